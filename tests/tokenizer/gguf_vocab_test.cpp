// Tokenizer::from_vocab against HF: the SmolLM2 GGUF vocabulary (dumped to JSON so this test
// does not need the GGUF parser) must tokenize the hard texts exactly as HF's tokenizer built
// from the same vocab does, and a SentencePiece vocab in GGUF "llama" form (scores) must match
// HF's legacy SentencePiece tokenizer.json.

#include <gtest/gtest.h>

#include <map>

#include "fixture_util.h"
#include "tokenizer/tokenizer.h"

namespace inferscale::tokenizer {
namespace {

using testing::read_json;
using testing::read_smollm2_vocab;
using Ids = std::vector<std::int32_t>;

// Parsed once: the 1 MB fixture dominates the test time under AddressSanitizer.
const VocabData& smollm2_vocab() {
    static const VocabData vocab = read_smollm2_vocab();
    return vocab;
}

TEST(GgufVocabTest, SmolLM2MatchesHuggingFace) {
    auto tok = Tokenizer::from_vocab(smollm2_vocab());
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    EXPECT_EQ(tok->vocab_size(), 49152);
    EXPECT_EQ(tok->bos_id(), 1);
    EXPECT_EQ(tok->eos_id(), 2);
    EXPECT_TRUE(tok->is_end_of_generation(*tok->token_id("<|im_end|>")));
    const auto expected = read_json("smollm2_expected.json");
    for (const auto& c : expected.at("cases")) {
        const std::string text = c.at("text");
        SCOPED_TRACE(text);
        const Ids ids = c.at("ids");
        EXPECT_EQ(tok->encode(text, true, true), ids);
        EXPECT_EQ(tok->encode(text, true, false), c.at("ids_no_parse_special").get<Ids>());
        EXPECT_EQ(tok->decode(ids), c.at("decoded").get<std::string>());
        EXPECT_EQ(tok->decode(ids, true), c.at("decoded_skip_special").get<std::string>());
    }
}

// The SentencePiece fixture's vocab as GGUF stores it: scores rank merged pieces (earlier
// merge = higher score), types mark control, unknown and byte tokens.
VocabData spm_as_gguf() {
    const auto j = read_json("spm_legacy_tokenizer.json");
    const auto& vocab = j.at("model").at("vocab");
    VocabData v;
    v.model = "llama";
    v.pre = "default";
    v.tokens.resize(vocab.size());
    for (const auto& [text, id] : vocab.items()) v.tokens[id.get<std::size_t>()] = text;
    for (const auto& t : j.at("added_tokens")) {
        const auto id = t.at("id").get<std::size_t>();
        if (id >= v.tokens.size()) v.tokens.resize(id + 1);
        v.tokens[id] = t.at("content");
    }
    v.scores.assign(v.tokens.size(), 0.0f);
    v.token_types.assign(v.tokens.size(), TokenType::Normal);
    std::map<std::string, std::size_t> index;
    for (std::size_t i = 0; i < v.tokens.size(); ++i) index[v.tokens[i]] = i;
    float rank = 0;
    for (const auto& m : j.at("model").at("merges")) {
        const std::string merged = m.is_array() ? m[0].get<std::string>() + m[1].get<std::string>()
                                                : std::string();
        if (auto it = index.find(merged); it != index.end()) v.scores[it->second] = -(++rank);
    }
    for (std::size_t i = 3; i < 3 + 256; ++i) v.token_types[i] = TokenType::Byte;
    v.token_types[0] = TokenType::Unknown;
    for (const auto& t : j.at("added_tokens")) {
        if (t.at("id").get<std::size_t>() > 0)
            v.token_types[t.at("id").get<std::size_t>()] = TokenType::Control;
    }
    v.bos_id = 1;
    v.eos_id = 2;
    v.unk_id = 0;
    v.add_bos = true;
    v.add_space_prefix = true;
    return v;
}

TEST(GgufVocabTest, SentencePieceScoresMatchHuggingFace) {
    auto tok = Tokenizer::from_vocab(spm_as_gguf());
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const auto expected = read_json("spm_legacy_expected.json");
    for (const auto& c : expected.at("cases")) {
        const std::string text = c.at("text");
        SCOPED_TRACE(text);
        const Ids ids = c.at("ids");
        EXPECT_EQ(tok->encode(text, true, true), ids);
        EXPECT_EQ(tok->decode(ids, true), c.at("decoded_skip_special").get<std::string>());
    }
}

TEST(GgufVocabTest, RejectsBadVocab) {
    VocabData good;
    good.model = "gpt2";
    good.tokens = {"a", "b", "ab"};
    good.merges = {"a b"};
    ASSERT_TRUE(Tokenizer::from_vocab(good).ok());
    EXPECT_EQ(Tokenizer::from_vocab(good)->encode("abab", false), (Ids{2, 2}));

    VocabData empty;
    empty.model = "gpt2";
    EXPECT_FALSE(Tokenizer::from_vocab(empty).ok());
    VocabData unknown = good;
    unknown.model = "bert";
    EXPECT_FALSE(Tokenizer::from_vocab(unknown).ok());
    VocabData bad_merge = good;
    bad_merge.merges.push_back("nosuchtoken xyz");
    EXPECT_FALSE(Tokenizer::from_vocab(bad_merge).ok());
    VocabData bad_types = good;
    bad_types.token_types = {TokenType::Normal};
    EXPECT_FALSE(Tokenizer::from_vocab(bad_types).ok());
}

// tokenizer.ggml.pre picks the split of a byte-level vocabulary; a name without a known split is
// an error naming it (as in llama.cpp), never GPT-2's split in its place.
TEST(GgufVocabTest, RefusesUnknownPreTokenizer) {
    VocabData v;
    v.model = "gpt2";
    v.tokens = {"a", "b", "ab"};
    v.merges = {"a b"};
    for (const char* known : {"", "gpt-2", "llama-bpe", "llama3", "llama-v3", "qwen2", "smollm"}) {
        v.pre = known;
        auto tok = Tokenizer::from_vocab(v);
        ASSERT_TRUE(tok.ok()) << known << ": " << tok.error().message;
        EXPECT_EQ(tok->encode("abab", false), (Ids{2, 2})) << known;
    }
    for (const char* unknown : {"default", "gpt2", "deepseek-coder", "no-such-split"}) {
        v.pre = unknown;
        auto tok = Tokenizer::from_vocab(v);
        ASSERT_FALSE(tok.ok()) << unknown;
        EXPECT_NE(tok.error().message.find(std::string("unknown pre-tokenizer type '") + unknown +
                                           "'"),
                  std::string::npos)
            << tok.error().message;
    }
    // A SentencePiece vocabulary has no pre-tokenizer to pick: its pre name is not read, as in
    // llama.cpp (Gemma's files say "default").
    VocabData spm = spm_as_gguf();
    spm.pre = "no-such-split";
    EXPECT_TRUE(Tokenizer::from_vocab(spm).ok());
}

}  // namespace
}  // namespace inferscale::tokenizer
