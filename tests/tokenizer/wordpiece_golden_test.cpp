// WordPiece parity with Hugging Face tokenizers on all-MiniLM-L6-v2's tokenizer.json (BERT's
// normalizer, pre-tokenizer, [CLS]/[SEP] template and truncation): ids for hard texts with the
// file's truncation, without special tokens and truncated at 256, and their decodes. Fixtures
// come from tools/make_embedding_fixtures.py; the model from scripts/fetch_embedding_model.sh.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>

#include "fixture_util.h"
#include "tokenizer/tokenizer.h"

namespace inferscale::tokenizer {
namespace {

using testing::read_json;
using Ids = std::vector<std::int32_t>;

std::string minilm_tokenizer_path() {
    const char* models = std::getenv("INFERSCALE_MODELS");
    return std::string(models ? models : "models") + "/all-minilm-l6-v2/tokenizer.json";
}

TEST(WordPieceGolden, MatchesHuggingFace) {
    const std::string path = minilm_tokenizer_path();
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        GTEST_SKIP() << path << " absent (scripts/fetch_embedding_model.sh fetches it)";
    auto tok = Tokenizer::from_json_file(path);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const auto expected = read_json("minilm_expected.json");
    EXPECT_EQ(tok->vocab_size(), expected.at("vocab_size").get<std::int64_t>());
    EXPECT_EQ(tok->truncation_length(), expected.at("truncation").get<std::size_t>());
    for (const auto& c : expected.at("cases")) {
        const std::string text = c.at("text");
        SCOPED_TRACE(text);
        const Ids ids = c.at("ids");
        EXPECT_EQ(tok->encode(text), ids);
        EXPECT_EQ(tok->encode(text, false), c.at("ids_no_add_special").get<Ids>());
        EXPECT_EQ(tok->encode_truncated(text, 256), c.at("ids_truncated_256").get<Ids>());
        EXPECT_EQ(tok->decode(ids, false), c.at("decoded").get<std::string>());
        EXPECT_EQ(tok->decode(ids, true), c.at("decoded_skip_special").get<std::string>());
    }
}

}  // namespace
}  // namespace inferscale::tokenizer
