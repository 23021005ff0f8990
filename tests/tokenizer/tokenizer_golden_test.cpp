// Golden parity with Hugging Face tokenizers: the ids for each hard text (with and without
// add_special / parse_special), decode of those ids, decode of every single id, and streaming
// decode equal to full decode. Fixtures come from tools/make_tokenizer_fixtures.py.

#include <gtest/gtest.h>

#include "fixture_util.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace inferscale::tokenizer {
namespace {

using testing::fixture_path;
using testing::read_json;
using Ids = std::vector<std::int32_t>;

std::string stream_decode(const Tokenizer& tok, const Ids& ids, bool skip_special) {
    IncrementalDecoder decoder(tok, skip_special);
    std::string out;
    for (std::int32_t id : ids) out += decoder.push(id);
    return out + decoder.flush();
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, MatchesHuggingFace) {
    auto tok = Tokenizer::from_json_file(fixture_path(GetParam() + "_tokenizer.json"));
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const auto expected = read_json(GetParam() + "_expected.json");
    EXPECT_EQ(tok->vocab_size(), expected.at("vocab_size").get<std::int64_t>());
    for (const auto& c : expected.at("cases")) {
        const std::string text = c.at("text");
        SCOPED_TRACE(text);
        const Ids ids = c.at("ids");
        EXPECT_EQ(tok->encode(text, true, true), ids);
        EXPECT_EQ(tok->encode(text, false, true), c.at("ids_no_add_special").get<Ids>());
        EXPECT_EQ(tok->encode(text, true, false), c.at("ids_no_parse_special").get<Ids>());
        EXPECT_EQ(tok->decode(ids, false), c.at("decoded").get<std::string>());
        EXPECT_EQ(tok->decode(ids, true), c.at("decoded_skip_special").get<std::string>());
        EXPECT_EQ(stream_decode(*tok, ids, false), c.at("decoded").get<std::string>());
        EXPECT_EQ(stream_decode(*tok, ids, true), c.at("decoded_skip_special").get<std::string>());
    }
}

TEST_P(GoldenTest, DecodesEveryIdLikeHuggingFace) {
    auto tok = Tokenizer::from_json_file(fixture_path(GetParam() + "_tokenizer.json"));
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const auto each = read_json(GetParam() + "_expected.json").at("decode_each");
    ASSERT_EQ(static_cast<std::int64_t>(each.size()), tok->vocab_size());
    int mismatches = 0;
    for (std::size_t id = 0; id < each.size(); ++id) {
        const Ids one{static_cast<std::int32_t>(id)};
        if (tok->decode(one) != each[id].get<std::string>()) {
            ADD_FAILURE() << "id " << id << ": '" << tok->decode(one) << "' vs '"
                          << each[id].get<std::string>() << "'";
            if (++mismatches > 10) break;
        }
    }
}

// What an id adds after other text: HF's decode of that id alone, with the leading space a
// SentencePiece decode strips from a text's first token put back ("\u2581the" -> " the", and
// the byte token <0x20> where a Strip decoder dropped it), and nothing else changed
// (byte-level tokens, pieces without a word start, other bytes, specials).
TEST_P(GoldenTest, DecodePieceKeepsWordStartSpaces) {
    auto tok = Tokenizer::from_json_file(fixture_path(GetParam() + "_tokenizer.json"));
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const auto each = read_json(GetParam() + "_expected.json").at("decode_each");
    const std::string word_start = "\u2581";
    int mismatches = 0, word_starts = 0;
    for (std::size_t id = 0; id < each.size(); ++id) {
        const auto i = static_cast<std::int32_t>(id);
        const std::string_view text = tok->token_text(i);
        const std::string alone = each[id].get<std::string>();
        const bool spm_start = !tok->is_special(i) && (text.starts_with(word_start) ||
                                                       (text == "<0x20>" && alone.empty()));
        word_starts += spm_start ? 1 : 0;
        const std::string expected = (spm_start ? " " : "") + alone;
        if (tok->decode_piece(i) != expected) {
            ADD_FAILURE() << "id " << id << ": '" << tok->decode_piece(i) << "' vs '" << expected
                          << "'";
            if (++mismatches > 10) break;
        }
    }
    if (GetParam().starts_with("spm")) {
        EXPECT_GT(word_starts, 100);
    }
}

// Constrained decoding matches bytes: the bytes of HF's ids for a text, taken token by token
// after a first token (so SentencePiece's first-token space rule does not apply), are exactly
// the bytes HF decodes the whole text to, also where a character is split across tokens.
TEST_P(GoldenTest, TokenBytesConcatenateToTheDecodedText) {
    auto tok = Tokenizer::from_json_file(fixture_path(GetParam() + "_tokenizer.json"));
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const auto expected = read_json(GetParam() + "_expected.json");
    int checked = 0;
    for (const auto& c : expected.at("cases")) {
        const Ids ids = c.at("ids_no_parse_special");
        if (ids.size() < 2) continue;
        Ids plain;
        for (std::int32_t id : ids)
            if (!tok->is_special(id)) plain.push_back(id);
        if (plain.size() < 2) continue;
        // The shortest lead whose decode is whole characters and starts the text (a lead that
        // ends inside a character decodes to U+FFFD); the rest goes token by token.
        const std::string whole = tok->decode(plain, true);
        std::size_t split = 1;
        std::string lead;
        for (; split < plain.size(); ++split) {
            lead = tok->decode(std::span(plain).first(split), true);
            if (lead.find("\xEF\xBF\xBD") == std::string::npos && whole.starts_with(lead)) break;
        }
        if (split == plain.size()) continue;
        std::string bytes;
        for (std::size_t i = split; i < plain.size(); ++i) bytes += tok->token_bytes(plain[i]);
        EXPECT_EQ(bytes, whole.substr(lead.size())) << c.at("text").get<std::string>();
        ++checked;
    }
    EXPECT_GT(checked, 20);
    // A lone lead byte of a 4-byte character: its byte, where decode_piece repairs it.
    const std::optional<std::int32_t> lead =
        tok->token_id(GetParam().starts_with("spm") ? "<0xF0>" : byte_level_encode("\xF0"));
    ASSERT_TRUE(lead.has_value());
    EXPECT_EQ(tok->token_bytes(*lead), "\xF0");
    EXPECT_EQ(tok->decode_piece(*lead), "\xEF\xBF\xBD");
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GoldenTest,
                         ::testing::Values("llama3", "qwen2", "smollm", "spm", "spm_legacy"));

TEST(GoldenTest, SpecialIdsAndEndOfGeneration) {
    auto llama3 = Tokenizer::from_json_file(fixture_path("llama3_tokenizer.json"));
    ASSERT_TRUE(llama3.ok());
    EXPECT_EQ(llama3->bos_id(), *llama3->token_id("<|begin_of_text|>"));
    EXPECT_EQ(llama3->eos_id(), *llama3->token_id("<|end_of_text|>"));
    EXPECT_TRUE(llama3->is_end_of_generation(*llama3->token_id("<|eot_id|>")));
    EXPECT_TRUE(llama3->is_end_of_generation(*llama3->token_id("<|im_end|>")));
    EXPECT_FALSE(llama3->is_end_of_generation(*llama3->token_id("<|start_header_id|>")));
    EXPECT_FALSE(llama3->token_id("no such token").has_value());

    auto qwen = Tokenizer::from_json_file(fixture_path("qwen2_tokenizer.json"));
    ASSERT_TRUE(qwen.ok());
    EXPECT_EQ(qwen->bos_id(), -1);
    EXPECT_TRUE(qwen->is_end_of_generation(*qwen->token_id("<|endoftext|>")));
    EXPECT_TRUE(qwen->is_end_of_generation(*qwen->token_id("<|im_end|>")));

    auto spm = Tokenizer::from_json_file(fixture_path("spm_tokenizer.json"));
    ASSERT_TRUE(spm.ok());
    EXPECT_EQ(spm->bos_id(), 1);
    EXPECT_EQ(spm->eos_id(), 2);
    EXPECT_TRUE(spm->is_end_of_generation(2));
}

}  // namespace
}  // namespace inferscale::tokenizer
