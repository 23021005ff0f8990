// GGUF loading against fixtures written by tools/make_loader_fixtures.py with the PyPI `gguf`
// package: bit-exact dequantization of every supported type, Q/K rows restored to Hugging Face
// order, metadata -> ModelConfig and VocabData, and no Q/K permutation for qwen2.

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <nlohmann/json.hpp>

#include "loader_test_util.h"
#include "model/gguf_dequant.h"
#include "model/gguf_file.h"
#include "model/gguf_loader.h"
#include "model/model_files.h"
#include "tensor/quant_types_fixture.h"

namespace inferscale::model {
namespace {

using test::loader_fixture;

// keep_quantized leaves Q8_0/Q4_0/Q4_1 matrices as blocks (Q/K rows un-permuted as whole block
// rows) whose dequantization is exactly what the default mode returns.
TEST(GgufTinyLlama, KeepQuantizedBlocksDequantizeToDefaultMode) {
    auto plain = load_model_files(loader_fixture("tiny_llama.gguf"));
    ASSERT_TRUE(plain.ok()) << plain.error().message;
    auto kept = load_model_files(loader_fixture("tiny_llama.gguf"), {},
                                 LoadOptions{.keep_quantized = true});
    ASSERT_TRUE(kept.ok()) << kept.error().message;
    ASSERT_EQ(kept->weights.all().size(), plain->weights.all().size());
    std::set<tensor::DType> block_types;
    for (const auto& [name, want] : plain->weights.all()) {
        SCOPED_TRACE(name);
        const tensor::Tensor* got = kept->weights.find(name);
        ASSERT_NE(got, nullptr);
        ASSERT_EQ(got->shape, want.shape);
        ASSERT_EQ(want.dtype, tensor::DType::F32);
        std::vector<float> deq(static_cast<std::size_t>(got->numel()));
        tensor::convert_to_f32(got->dtype, got->data, deq.data(), deq.size());
        if (tensor::is_block_quantized(got->dtype)) block_types.insert(got->dtype);
        EXPECT_EQ(std::memcmp(deq.data(), want.data, deq.size() * sizeof(float)), 0);
    }
    EXPECT_EQ(block_types, (std::set<tensor::DType>{tensor::DType::Q8_0, tensor::DType::Q4_0,
                                                    tensor::DType::Q4_1}));
    // The permuted ones (q: Q8_0, k: Q4_1) stayed blocks too.
    EXPECT_EQ(kept->weights.find("model.layers.0.self_attn.q_proj.weight")->dtype,
              tensor::DType::Q8_0);
    EXPECT_EQ(kept->weights.find("model.layers.0.self_attn.k_proj.weight")->dtype,
              tensor::DType::Q4_1);
}

TEST(GgufTinyLlama, DequantizedValuesMatchReferenceBitForBit) {
    WeightStore store;
    std::size_t calls = 0, last_total = 0;
    auto r = load_gguf_model(loader_fixture("tiny_llama.gguf"), store,
                             [&](std::size_t, std::size_t total) { ++calls, last_total = total; });
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(calls, 12u);
    EXPECT_EQ(last_total, 12u);

    const std::string bin = test::read_bytes(loader_fixture("tiny_llama_expected.bin"));
    auto index =
        nlohmann::json::parse(test::read_bytes(loader_fixture("tiny_llama_expected.json")));
    ASSERT_EQ(store.all().size(), index.size());
    std::set<std::string> types;
    for (auto it = index.begin(); it != index.end(); ++it) {
        const std::string& name = it.key();
        SCOPED_TRACE(name + " (" + it.value()["gguf_type"].get<std::string>() + ")");
        types.insert(it.value()["gguf_type"].get<std::string>());
        const tensor::Tensor* t = store.find(name);
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->dtype, tensor::DType::F32);
        const auto& shape = it.value()["shape"];
        ASSERT_EQ(t->rank, static_cast<int>(shape.size()));
        for (int d = 0; d < t->rank; ++d) EXPECT_EQ(t->shape[d], shape[d].get<std::int64_t>());
        const std::size_t offset = it.value()["offset"].get<std::size_t>();
        ASSERT_LE((offset + t->numel()) * 4, bin.size());
        const float* want = reinterpret_cast<const float*>(bin.data()) + offset;
        const float* got = t->as<float>();
        std::int64_t mismatches = 0, first = -1;
        for (std::int64_t i = 0; i < t->numel(); ++i) {
            if (std::memcmp(&want[i], &got[i], 4) != 0) {
                if (first < 0) first = i;
                ++mismatches;
            }
        }
        EXPECT_EQ(mismatches, 0) << "first at " << first << ": got " << got[first] << " want "
                                 << want[first];
    }
    // The fixture covers the types of its tensors; the others are checked below.
    EXPECT_EQ(types, (std::set<std::string>{"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1"}));
}

// The remaining supported types (Q5_0, Q5_1, Q2_K ... Q6_K, IQ4_NL, IQ4_XS), by ggml type id,
// against the `gguf` package's dequantization (tests/fixtures/quant/quant_types.bin).
TEST(GgufTypes, MoreBlockTypesDequantizeLikeTheReference) {
    const auto f = tensor::test::QuantTypesFixture::load();
    ASSERT_FALSE(f.x.empty());
    const std::pair<std::uint32_t, tensor::DType> ids[] = {{6, tensor::DType::Q5_0},
                                                           {7, tensor::DType::Q5_1},
                                                           {12, tensor::DType::Q4_K},
                                                           {13, tensor::DType::Q5_K},
                                                           {11, tensor::DType::Q3_K},
                                                           {10, tensor::DType::Q2_K},
                                                           {14, tensor::DType::Q6_K},
                                                           {20, tensor::DType::IQ4_NL},
                                                           {23, tensor::DType::IQ4_XS}};
    for (const auto& [id, dtype] : ids) {
        SCOPED_TRACE(ggml_type_name(id));
        EXPECT_TRUE(ggml_type_supported(id));
        EXPECT_EQ(ggml_type_size(id).block_bytes, tensor::dtype_block_bytes(dtype));
        EXPECT_EQ(static_cast<std::int64_t>(ggml_type_size(id).block_elems),
                  tensor::dtype_block_elems(dtype));
        const auto& blocks = f.types.at(dtype);
        std::vector<float> got(blocks.deq.size());
        dequantize_to_f32(id, blocks.bytes.data(), got.data(), got.size());
        EXPECT_EQ(std::memcmp(got.data(), blocks.deq.data(), 4 * got.size()), 0);
    }
    EXPECT_FALSE(ggml_type_supported(21));  // IQ3_S
}

TEST(GgufTinyLlama, ConfigVocabAndTemplate) {
    auto r = load_model_files(loader_fixture("tiny_llama.gguf"));
    ASSERT_TRUE(r.ok()) << r.error().message;
    const ModelConfig& c = r->config;
    EXPECT_EQ(c.architecture, Architecture::Llama);
    EXPECT_EQ(c.num_layers, 1);
    EXPECT_EQ(c.hidden_size, 64);
    EXPECT_EQ(c.intermediate_size, 64);
    EXPECT_EQ(c.num_heads, 4);
    EXPECT_EQ(c.num_kv_heads, 2);
    EXPECT_EQ(c.head_dim, 16);
    EXPECT_EQ(c.max_position_embeddings, 128);
    EXPECT_FLOAT_EQ(c.rope_theta, 50000.0f);
    EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
    EXPECT_EQ(c.vocab_size, 32);
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_FALSE(c.attention_bias);
    EXPECT_EQ(c.bos_token_id, 1);
    EXPECT_EQ(c.eos_token_id, 2);
    EXPECT_EQ(c.name, "tiny_llama.gguf");
    EXPECT_EQ(r->eos_token_ids, (std::vector<std::int64_t>{2, 5}));  // eos, then end-of-turn
    EXPECT_TRUE(r->tokenizer_json_path.empty());
    EXPECT_NE(r->chat_template.find("<|im_start|>"), std::string::npos);

    const tokenizer::VocabData& v = r->gguf_vocab;
    EXPECT_EQ(v.model, "gpt2");
    EXPECT_EQ(v.pre, "smollm");
    ASSERT_EQ(v.tokens.size(), 32u);
    EXPECT_EQ(v.tokens[4], "<|im_start|>");
    EXPECT_EQ(v.tokens[31], "t31");
    ASSERT_EQ(v.scores.size(), 32u);
    EXPECT_EQ(v.scores[5], -5.0f);
    ASSERT_EQ(v.token_types.size(), 32u);
    EXPECT_EQ(v.token_types[0], tokenizer::TokenType::Unknown);
    EXPECT_EQ(v.token_types[3], tokenizer::TokenType::Control);
    EXPECT_EQ(v.token_types[6], tokenizer::TokenType::Normal);
    EXPECT_EQ(v.merges, (std::vector<std::string>{"t 1", "t1 0", "t 2"}));
    EXPECT_EQ(v.bos_id, 1);
    EXPECT_EQ(v.eos_id, 2);
    EXPECT_EQ(v.unk_id, 0);
    EXPECT_EQ(v.pad_id, 3);
    EXPECT_TRUE(v.add_bos);
    EXPECT_FALSE(v.add_space_prefix);
}

TEST(GgufFile, EveryMetadataValueType) {
    auto r = GgufFile::open(loader_fixture("tiny_llama.gguf"));
    ASSERT_TRUE(r.ok()) << r.error().message;
    const GgufFile& g = *r;
    EXPECT_EQ(g.version(), 3u);
    EXPECT_EQ(g.alignment(), 32u);
    EXPECT_EQ(g.data_start() % 32, 0u);
    EXPECT_EQ(*g.get_int("test.u8"), 200);
    EXPECT_EQ(*g.get_int("test.i8"), -100);
    EXPECT_EQ(*g.get_int("test.u16"), 60000);
    EXPECT_EQ(*g.get_int("test.i16"), -30000);
    EXPECT_EQ(*g.get_int("test.u32"), 4000000000LL);
    EXPECT_EQ(*g.get_int("test.i32"), -2000000000LL);
    EXPECT_EQ(*g.get_int("test.u64"), 1LL << 40);
    EXPECT_EQ(*g.get_int("test.i64"), -(1LL << 40));
    EXPECT_EQ(*g.get_float("test.f32"), 1.5);
    EXPECT_EQ(*g.get_float("test.f64"), 0.125);
    EXPECT_TRUE(*g.get_bool("test.bool"));
    EXPECT_EQ(*g.get_string("test.str"), "h\xc3\xa9llo");
    const GgufValue* arr = g.find("test.arr_i32");
    ASSERT_NE(arr, nullptr);
    EXPECT_EQ(arr->ints, (std::vector<std::int64_t>{1, -2, 3}));
    const GgufValue* nested = g.find("test.arr_nested");
    ASSERT_NE(nested, nullptr);
    EXPECT_EQ(nested->elem_type, GgufType::Array);
    EXPECT_EQ(nested->array_size, 2u);
    // Typed getters name the key on a type mismatch.
    auto wrong = g.get_int("test.str");
    ASSERT_FALSE(wrong.ok());
    EXPECT_NE(wrong.error().message.find("test.str"), std::string::npos);
    EXPECT_NE(g.get_string("no.such.key").error().message.find("no.such.key"), std::string::npos);
}

// Our own statement of the converter's permutation (HF row s*half+i -> GGUF row 2i+s).
std::vector<float> permute_like_converter(const std::vector<float>& hf, std::int64_t rows,
                                          std::int64_t cols, std::int64_t heads) {
    std::vector<float> out(hf.size());
    const std::int64_t hd = rows / heads, half = hd / 2;
    for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t s = 0; s < 2; ++s)
            for (std::int64_t i = 0; i < half; ++i)
                for (std::int64_t c = 0; c < cols; ++c)
                    out[((h * hd + 2 * i + s) * cols) + c] =
                        hf[((h * hd + s * half + i) * cols) + c];
    return out;
}

TEST(GgufUnpermute, InvertsConverterPermutationForWeightsAndBiases) {
    for (auto [rows, cols, heads] : {std::tuple<int, int, int>{48, 5, 3}, {64, 1, 4}, {8, 3, 1}}) {
        std::vector<float> hf(static_cast<std::size_t>(rows * cols));
        for (std::size_t i = 0; i < hf.size(); ++i) hf[i] = static_cast<float>(i);
        std::vector<float> data = permute_like_converter(hf, rows, cols, heads);
        ASSERT_NE(data, hf);
        unpermute_qk_rows(data.data(), rows, cols, heads);
        EXPECT_EQ(data, hf) << rows << "x" << cols << " heads " << heads;
    }
}

TEST(GgufTinyQwen2, NoPermutationBiasesAndTiedEmbeddings) {
    auto r = load_model_files(loader_fixture("tiny_qwen2.gguf"));
    ASSERT_TRUE(r.ok()) << r.error().message;
    const ModelConfig& c = r->config;
    EXPECT_EQ(c.architecture, Architecture::Qwen2);
    EXPECT_TRUE(c.attention_bias);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(c.num_heads, 2);
    EXPECT_EQ(c.num_kv_heads, 1);
    EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
    EXPECT_EQ(r->weights.find("lm_head.weight"), nullptr);
    // Stored as ramps 0, 0.5, 1, ...: qwen2 uses NeoX rotary, so rows come back untouched.
    for (const char* name : {"model.layers.0.self_attn.q_proj.weight",
                             "model.layers.0.self_attn.k_proj.weight",
                             "model.layers.0.self_attn.q_proj.bias",
                             "model.layers.0.self_attn.k_proj.bias",
                             "model.layers.0.self_attn.v_proj.bias"}) {
        const tensor::Tensor* t = r->weights.find(name);
        ASSERT_NE(t, nullptr) << name;
        for (std::int64_t i = 0; i < t->numel(); ++i)
            ASSERT_EQ(t->as<float>()[i], 0.5f * static_cast<float>(i)) << name << "[" << i << "]";
    }
    EXPECT_EQ(r->weights.find("model.layers.0.self_attn.k_proj.weight")->shape[0], 16);
    EXPECT_EQ(r->weights.find("model.layers.0.self_attn.k_proj.weight")->shape[1], 32);
}

}  // namespace
}  // namespace inferscale::model
