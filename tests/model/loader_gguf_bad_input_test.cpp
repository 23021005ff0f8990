// Malformed GGUF files: truncation anywhere, bad magic or version, absurd counts and lengths,
// bad offsets, unsupported tensor types, architectures and metadata. Each must be an Error with a
// message that says what is wrong, never a crash, over-read or huge allocation (ASan run).

#include <gtest/gtest.h>

#include <limits>

#include "loader_gguf_builder.h"
#include "loader_test_util.h"
#include "model/gguf_file.h"
#include "model/model_files.h"

namespace inferscale::model {
namespace {

using test::GgufBuilder;
using test::minimal_llama;
using test::ScratchDir;

// One directory for the whole suite: hundreds of cases, and each ScratchDir costs a process.
const ScratchDir& scratch() {
    static ScratchDir dir;
    return dir;
}

std::string load_error(const std::string& bytes) {
    const ScratchDir& dir = scratch();
    const std::string path = dir.file("bad.gguf");
    test::write_bytes(path, bytes);
    auto r = load_model_files(path);
    EXPECT_FALSE(r.ok());
    if (r.ok()) return {};
    EXPECT_NE(r.error().message.find(path), std::string::npos) << r.error().message;
    return r.error().message;
}

void expect_error(const std::string& bytes, const std::string& expect) {
    std::string msg = load_error(bytes);
    EXPECT_NE(msg.find(expect), std::string::npos) << "expected '" << expect << "' in: " << msg;
}

TEST(GgufBadInput, MinimalBuilderFileIsValid) {
    ScratchDir dir;
    test::write_bytes(dir.file("ok.gguf"), minimal_llama().build());
    auto r = load_model_files(dir.file("ok.gguf"));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->config.tie_word_embeddings);
    EXPECT_EQ(r->config.vocab_size, 8);  // no token list: from token_embd
    EXPECT_EQ(r->config.rope_theta, 10000.0f);
    // F32 tensors without permutation are zero-copy views into the map.
    EXPECT_EQ(r->weights.find("model.norm.weight")->dtype, tensor::DType::F32);

    test::write_bytes(dir.file("v2.gguf"), minimal_llama().build(/*version=*/2));
    EXPECT_TRUE(load_model_files(dir.file("v2.gguf")).ok());
}

TEST(GgufBadInput, TruncatedAnywhere) {
    for (const std::string fixture : {"tiny_llama.gguf", "tiny_qwen2.gguf"}) {
        const std::string whole = test::read_bytes(test::loader_fixture(fixture));
        ASSERT_GT(whole.size(), 1000u);
        std::vector<std::size_t> cuts;
        for (std::size_t i = 0; i < 300; i += 3) cuts.push_back(i);
        for (std::size_t pct = 1; pct < 100; ++pct) cuts.push_back(whole.size() * pct / 100);
        cuts.push_back(whole.size() - 1);
        for (std::size_t cut : cuts) {
            SCOPED_TRACE(fixture + " cut at " + std::to_string(cut));
            std::string msg = load_error(whole.substr(0, cut));
            EXPECT_TRUE(msg.find("truncated") != std::string::npos ||
                        msg.find("too small") != std::string::npos ||
                        msg.find("past the end") != std::string::npos ||
                        msg.find("cannot fit") != std::string::npos)
                << msg;
        }
    }
}

TEST(GgufBadInput, MissingEmptyMagicVersion) {
    auto r = load_model_files("/nonexistent/model.gguf");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("/nonexistent/model.gguf"), std::string::npos);
    expect_error("", "too small");
    std::string bytes = minimal_llama().build();
    bytes[0] = 'X';
    expect_error(bytes, "bad magic");
    expect_error(minimal_llama().build(1), "unsupported GGUF version 1");
    expect_error(minimal_llama().build(4), "unsupported GGUF version 4");
}

TEST(GgufBadInput, AbsurdCountsAndLengths) {
    std::string bytes = minimal_llama().build();
    // Tensor count at bytes 8..15, metadata count at 16..23.
    std::string huge = bytes;
    for (int i = 8; i < 16; ++i) huge[i] = '\xff';
    expect_error(huge, "cannot fit");
    huge = bytes;
    for (int i = 16; i < 24; ++i) huge[i] = '\x7f';
    expect_error(huge, "cannot fit");
    // The first key's string length at bytes 24..31.
    huge = bytes;
    for (int i = 24; i < 32; ++i) huge[i] = '\xff';
    expect_error(huge, "past the end");

    GgufBuilder b = minimal_llama();
    std::string arr;
    GgufBuilder::put_u32(arr, 8);                       // array of strings
    GgufBuilder::put_u64(arr, 1ull << 40);              // ... claiming 2^40 of them
    b.add_raw("tokenizer.ggml.tokens", 9, arr);
    expect_error(b.build(), "past the end");

    b = minimal_llama();
    b.add_raw("general.bogus", 77, "");
    expect_error(b.build(), "unknown value type 77");

    b = minimal_llama();
    b.add_u32("llama.block_count", 2);
    expect_error(b.build(), "duplicate metadata key 'llama.block_count'");

    b = minimal_llama();
    b.tensors[0].ne = {32, 1, 1, 1, 8};
    expect_error(b.build(), "5 dimensions");

    b = minimal_llama();
    b.tensors[0].ne = {1ull << 40, 1ull << 40};
    expect_error(b.build(), "absurd dimensions");

    b = minimal_llama();
    b.tensors.push_back(b.tensors[1]);
    expect_error(b.build(), "duplicate tensor 'blk.0.attn_norm.weight'");
}

TEST(GgufBadInput, OffsetsAndAlignment) {
    GgufBuilder b = minimal_llama();
    b.tensors[2].offset_override = 1 << 20;
    expect_error(b.build(), "tensor 'blk.0.attn_q.weight' needs bytes");
    b = minimal_llama();
    b.tensors[2].offset_override = 4;
    expect_error(b.build(), "not aligned to 32");
    b = minimal_llama();
    b.add_u32("general.alignment", 24);
    expect_error(b.build(), "power of two");
}

TEST(GgufBadInput, TensorTypes) {
    GgufBuilder b = minimal_llama();
    b.tensors[2].type = 21;                       // IQ3_S: 256-element blocks of 110 bytes
    b.tensors[2].ne = {256, 32};
    b.tensors[2].data.assign(32 * 110, '\0');
    expect_error(b.build(), "unsupported type IQ3_S");

    b = minimal_llama();
    b.tensors[2].type = 99;
    expect_error(b.build(), "unknown ggml type 99");

    b = minimal_llama();
    b.tensors[2].type = 8;  // Q8_0 needs ne[0] % 32 == 0
    b.tensors[2].ne = {20, 32};
    expect_error(b.build(), "block size");
}

TEST(GgufBadInput, ArchitectureAndMetadata) {
    GgufBuilder b = minimal_llama();
    b.erase_kv("general.architecture");
    b.add_string("general.architecture", "gpt2");
    expect_error(b.build(), "unsupported architecture 'gpt2'");

    b = minimal_llama();
    b.erase_kv("general.architecture");
    expect_error(b.build(), "missing metadata 'general.architecture'");

    b = minimal_llama();
    b.erase_kv("llama.block_count");
    expect_error(b.build(), "missing metadata 'llama.block_count'");

    b = minimal_llama();
    b.erase_kv("llama.embedding_length");
    b.add_string("llama.embedding_length", "32");
    expect_error(b.build(), "'llama.embedding_length' must be an integer");

    b = minimal_llama();
    b.erase_kv("llama.attention.head_count_kv");
    b.add_u32("llama.attention.head_count_kv", 0);
    expect_error(b.build(), "head_count_kv' must be positive");

    b = minimal_llama();
    b.add_string("llama.rope.scaling.type", "yarn");
    expect_error(b.build(), "unsupported rope scaling type 'yarn'");

    b = minimal_llama();
    b.add_u32("llama.rope.dimension_count", 8);
    expect_error(b.build(), "partial rotary");

    b = minimal_llama();
    b.add_f32_tensor("blk.0.attn_q_norm.weight", {16});
    expect_error(b.build(), "unexpected tensor 'blk.0.attn_q_norm.weight'");

    b = minimal_llama();
    b.add_raw("tokenizer.ggml.tokens", 8, std::string(8, '\0'));  // a string, not an array
    expect_error(b.build(), "tokenizer.ggml.tokens");

    b = minimal_llama();
    std::string tokens;
    GgufBuilder::put_u32(tokens, 8);
    GgufBuilder::put_u64(tokens, 2);
    GgufBuilder::put_str(tokens, "a");
    GgufBuilder::put_str(tokens, "b");
    b.add_raw("tokenizer.ggml.tokens", 9, tokens);
    b.add_u32("tokenizer.ggml.eos_token_id", 7);
    expect_error(b.build(), "outside the vocabulary");
}

// rope_freqs.weight (Llama 3.1-style scaling): one finite, positive factor per rotary pair.
TEST(GgufBadInput, RopeFreqs) {
    // minimal_llama has head_dim 16: 8 pairs.
    const auto with_factors = [](std::vector<std::uint64_t> ne, std::vector<float> values) {
        GgufBuilder b = minimal_llama();
        b.add_f32_tensor("rope_freqs.weight", std::move(ne));
        std::string& data = b.tensors.back().data;
        data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
        return b.build();
    };
    const std::vector<float> good{1.0f, 1.0f, 1.5f, 2.0f, 4.0f, 8.0f, 8.0f, 8.0f};

    ScratchDir dir;
    test::write_bytes(dir.file("ok.gguf"), with_factors({8}, good));
    auto r = load_model_files(dir.file("ok.gguf"));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->config.rope_freq_factors, good);
    EXPECT_EQ(r->weights.find("rope_freqs.weight"), nullptr);

    const std::vector<float> sixteen(16, 1.0f);
    expect_error(with_factors({16}, sixteen),
                 "tensor 'rope_freqs.weight' must have shape [8] (head_dim / 2), got 1 "
                 "dimensions of 16");
    expect_error(with_factors({8, 2}, sixteen), "must have shape [8] (head_dim / 2), got 2");
    for (float bad : {0.0f, -2.0f, std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN()}) {
        std::vector<float> values = good;
        values[5] = bad;
        expect_error(with_factors({8}, values),
                     "at 5: rope frequency factors must be finite and positive");
    }
}

TEST(GgufBadInput, MissingOrMisshapenWeights) {
    GgufBuilder b = minimal_llama();
    b.erase_tensor("blk.0.ffn_up.weight");
    expect_error(b.build(), "missing weight model.layers.0.mlp.up_proj.weight");

    b = minimal_llama();
    b.erase_tensor("blk.0.attn_k.weight");
    b.add_f32_tensor("blk.0.attn_k.weight", {32, 32});  // 2 kv heads' worth for 1 kv head
    expect_error(b.build(), "blk.0.attn_k.weight' has 32 rows, expected 1 heads x 16");

    b = minimal_llama();
    b.erase_tensor("blk.0.ffn_down.weight");
    b.add_f32_tensor("blk.0.ffn_down.weight", {16, 32});
    expect_error(b.build(), "down_proj.weight has shape [32, 16], expected [32, 32]");
}

}  // namespace
}  // namespace inferscale::model
