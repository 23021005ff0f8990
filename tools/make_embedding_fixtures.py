#!/usr/bin/env python3
"""Generate the sentence-embedding golden fixtures for all-MiniLM-L6-v2.

  tests/fixtures/tokenizer/minilm_expected.json  HF `tokenizers` on the model's tokenizer.json:
      ids for hard texts (accents, CJK, punctuation, emoji, long words, very long input) with the
      file's truncation (128), without special tokens, and truncated at 256 as
      sentence-transformers does; decodes of those ids.
  tests/fixtures/embed/minilm_embeddings.json    sentence-transformers (CPU torch) on ~40
      sentences: the token ids it fed the model and the normalized mean-pooled embeddings.

The model comes from models/all-minilm-l6-v2 (scripts/fetch_embedding_model.sh).
Usage: python3 tools/make_embedding_fixtures.py  (from the repository root; deterministic)
Needs: pip install sentence-transformers tokenizers
"""

import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "all-minilm-l6-v2")
TOKENIZER_OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizer", "minilm_expected.json")
EMBED_OUT = os.path.join(ROOT, "tests", "fixtures", "embed", "minilm_embeddings.json")

LONG_TEXT = " ".join(
    f"Sentence {i}: the committee reviewed item {i * 7} of the quarterly report, "
    f"noting that expenditures rose {i % 9}.{i % 7}% while revenue held steady."
    for i in range(40))

HARD_TEXTS = [
    "",
    " ",
    "Hello world",
    "Hello, world! How are you?",
    "   leading and trailing spaces   ",
    "tabs\tand\t\ttabs, line one\r\nline two\n\n",
    "I'm sure you'll see they've done it, it's what we'd do. I'M LOUD",
    "café naïve résumé Ångström crème brûlée Ελληνικά Привет мир",
    "combining e\u0301 vs \u00e9, ligature \ufb01ne, nbsp\u00a0here, zwsp\u200bthere",
    "İstanbul DİYARBAKIR ǅemal ﬀ Σίσυφος ΣΊΣΥΦΟΣ",
    "中文测试：你好，世界！今天天气很好。",
    "日本語のテキストとカタカナ、ひらがな。",
    "한국어 텍스트입니다.",
    "mixed中文and English123数字",
    "العربية نص تجريبي और हिन्दी पाठ",
    "emoji 😀👍🏽 family 👨\u200d👩\u200d👧 flag 🇺🇸 heart ❤️ newer 🥰🫠",
    "$$$ %%% ^^^ &&& *** ((( ))) ~~~ ``` ||| <<< >>> +++ === @@@ ###",
    "fancy “quotes” ‘single’ — em-dash – en-dash … ellipsis ¿qué? ¡sí! «guillemets» §5 ¶2",
    "URL: https://example.com/path?q=1&r=two#frag and mail: alice.smith@example.org",
    "phone: +1 (555) 010-9999, price $1,234.56, 3.14159, 1e-9, 50%",
    "supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "a" * 99 + " " + "b" * 100 + " " + "c" * 101,
    "x" * 250,
    "control\x00chars\x07and\x0bvertical\x0cfeed\x1funit\x7fdel\u0085nel\ufffdrepl",
    "\u202aembedding\u202c marks \u200e and soft\u00adhyphen",
    "[CLS] already [SEP] there [MASK] and [UNK] [PAD]",
    "Don't do not won't can't shouldn't y'all 'quoted' rock 'n' roll",
    "ＦＵＬＬＷＩＤＴＨ ｌｅｔｔｅｒｓ １２３ and ｶﾀｶﾅ",
    "Caroline went to the LGBTQ support group on 8 May, 2023 at 1:56 pm.",
    LONG_TEXT,
]

SENTENCES = [
    # Facts a memory store holds.
    "Alice's dog is named Biscuit.",
    "Bob is allergic to peanuts and shellfish.",
    "My sister lives in Lisbon and works as an architect.",
    "I started learning the piano in March 2023.",
    "The user prefers vegetarian restaurants with outdoor seating.",
    "Caroline went to the LGBTQ support group on 8 May, 2023.",
    "Melanie painted a sunrise over the lake last year.",
    "Her favourite book is One Hundred Years of Solitude.",
    "John's birthday is on the 14th of February.",
    "We adopted two cats, Miso and Tofu, from the shelter.",
    "He runs a half marathon every October in Chicago.",
    "The meeting with the landlord is next Tuesday at 10am.",
    "I'm training for a triathlon and swim three times a week.",
    "She switched jobs from nursing to software engineering.",
    "Our anniversary dinner was at a Japanese place called Kaiseki.",
    # Questions a memory lookup asks.
    "What is my dog's name?",
    "Where does my sister live?",
    "When did I start playing the piano?",
    # Short.
    "Hi",
    "ok",
    "?",
    "",
    "Paris",
    # Non-ASCII.
    "Le café est très bon, n'est-ce pas ?",
    "Der Größenwahn ist übermäßig.",
    "Привет, как дела?",
    "我们今天去公园散步，天气非常好。",
    "東京は日本の首都です。",
    "안녕하세요. 오늘 날씨가 좋네요.",
    "Emoji time 😀👍🏽 🎉 ❤️",
    "naïve résumé with crème brûlée",
    # Punctuation, numbers, code.
    "Meet me at 5:30 p.m. on 2024-01-15 (room #42)!",
    "def f(x): return x ** 2  # square",
    "The price went from $1,299.99 to €999 — a 23% drop.",
    # Long, and longer than max_seq_length (256 tokens: truncated).
    "After graduating from university with a degree in marine biology, she spent three years "
    "studying coral reefs in the Great Barrier Reef before moving to Hawaii, where she now leads "
    "a small research team that monitors the effects of rising ocean temperatures on reef "
    "ecosystems and advises local fishermen on sustainable practices.",
    LONG_TEXT,
    "word " * 300,
    "The quick brown fox jumps over the lazy dog. " * 30,
    "Repeated     spaces\tand\ttabs\nand\nnewlines\n\n in one fact.",
    "ALL CAPS SENTENCE ABOUT THE USER'S FAVOURITE FOOTBALL TEAM.",
]


def tokenizer_fixture():
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(MODEL, "tokenizer.json"))
    tok256 = Tokenizer.from_file(os.path.join(MODEL, "tokenizer.json"))
    tok256.enable_truncation(256)
    for t in (tok, tok256):
        t.no_padding()  # the file pads to 128; the engine never pads
    cases = []
    for text in HARD_TEXTS:
        ids = tok.encode(text).ids
        cases.append({
            "text": text,
            "ids": ids,
            "ids_no_add_special": tok.encode(text, add_special_tokens=False).ids,
            "ids_truncated_256": tok256.encode(text).ids,
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
        })
    return {"truncation": tok.truncation["max_length"], "vocab_size": tok.get_vocab_size(),
            "cases": cases}


def embedding_fixture():
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(MODEL, device="cpu")
    tokenized = model.tokenize(SENTENCES)
    mask = tokenized["attention_mask"]
    ids = [row[: int(m.sum())].tolist() for row, m in zip(tokenized["input_ids"], mask)]
    vectors = model.encode(SENTENCES, batch_size=8, convert_to_numpy=True)
    return {
        "model": "all-MiniLM-L6-v2",
        "max_seq_length": model.max_seq_length,
        "dim": int(vectors.shape[1]),
        "cases": [{"text": t, "ids": i, "embedding": [round(float(x), 7) for x in v]}
                  for t, i, v in zip(SENTENCES, ids, vectors)],
    }


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {path}")


def main():
    write(TOKENIZER_OUT, tokenizer_fixture())
    write(EMBED_OUT, embedding_fixture())


if __name__ == "__main__":
    main()
