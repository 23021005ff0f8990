// Safetensors loading: single and sharded checkpoints give the right names, shapes, dtypes and
// values as zero-copy views; misaligned data is copied; every kind of corrupt or truncated file
// is an Error, never a crash or an out-of-bounds read (the suite also runs under ASan).

#include <gtest/gtest.h>

#include <cstring>

#include "loader_test_util.h"
#include "model/model_files.h"
#include "model/safetensors_loader.h"

namespace inferscale::model {
namespace {

using test::loader_fixture;
using test::ScratchDir;
using test::write_bytes;

// The order tools/make_loader_fixtures.py writes them in: tensor k holds
// ((i % 7) - 3) * 0.25 + k at element i.
const char* const kNames[] = {
    "model.embed_tokens.weight",
    "model.layers.0.input_layernorm.weight",
    "model.layers.0.self_attn.q_proj.weight",
    "model.layers.0.self_attn.k_proj.weight",
    "model.layers.0.self_attn.v_proj.weight",
    "model.layers.0.self_attn.o_proj.weight",
    "model.layers.0.post_attention_layernorm.weight",
    "model.layers.0.mlp.gate_proj.weight",
    "model.layers.0.mlp.up_proj.weight",
    "model.layers.0.mlp.down_proj.weight",
    "model.norm.weight",
    "lm_head.weight",
};

float expected_value(int k, std::int64_t i) { return static_cast<float>((i % 7) - 3) * 0.25f + k; }

void expect_values(const tensor::Tensor& t, int k, const std::string& name) {
    std::vector<float> f32(static_cast<std::size_t>(t.numel()));
    tensor::convert_to_f32(t.dtype, t.data, f32.data(), f32.size());
    for (std::size_t i = 0; i < f32.size(); ++i)
        ASSERT_EQ(f32[i], expected_value(k, static_cast<std::int64_t>(i)))
            << name << "[" << i << "]";
}

void expect_tiny_weights(const WeightStore& store) {
    ASSERT_EQ(store.all().size(), 12u);
    for (int k = 0; k < 12; ++k) {
        const tensor::Tensor* t = store.find(kNames[k]);
        ASSERT_NE(t, nullptr) << kNames[k];
        expect_values(*t, k, kNames[k]);
    }
    EXPECT_EQ(store.find("model.embed_tokens.weight")->dtype, tensor::DType::BF16);
    EXPECT_EQ(store.find("model.layers.0.self_attn.k_proj.weight")->dtype, tensor::DType::F16);
    EXPECT_EQ(store.find("model.norm.weight")->dtype, tensor::DType::F32);
    const tensor::Tensor* q = store.find("model.layers.0.self_attn.q_proj.weight");
    EXPECT_EQ(q->rank, 2);
    EXPECT_EQ(q->shape[0], 8);
    EXPECT_EQ(q->shape[1], 8);
    const tensor::Tensor* down = store.find("model.layers.0.mlp.down_proj.weight");
    EXPECT_EQ(down->shape[0], 8);
    EXPECT_EQ(down->shape[1], 12);
    EXPECT_EQ(store.find("model.norm.weight")->rank, 1);
}

TEST(Safetensors, SingleFileDirectory) {
    std::size_t last_done = 0, last_total = 0;
    auto r = load_model_files(loader_fixture("tiny_hf"), [&](std::size_t done, std::size_t total) {
        last_done = done;
        last_total = total;
    });
    ASSERT_TRUE(r.ok()) << r.error().message;
    expect_tiny_weights(r->weights);
    EXPECT_EQ(last_done, 12u);
    EXPECT_EQ(last_total, 12u);
    EXPECT_EQ(r->config.num_layers, 1);
    EXPECT_EQ(r->config.vocab_size, 16);
    EXPECT_EQ(r->config.name, "tiny_hf");
    // config.json lists [2, 3]; generation_config.json adds 7.
    EXPECT_EQ(r->eos_token_ids, (std::vector<std::int64_t>{2, 3, 7}));
    EXPECT_FALSE(r->chat_template.empty());
    EXPECT_TRUE(r->tokenizer_json_path.empty());  // the fixture has no tokenizer.json
    EXPECT_TRUE(r->gguf_vocab.tokens.empty());
}

TEST(Safetensors, ViewsPointIntoTheMap) {
    WeightStore store;
    auto n = load_safetensors_file(loader_fixture("tiny_hf/model.safetensors"), store);
    ASSERT_TRUE(n.ok()) << n.error().message;
    EXPECT_EQ(*n, 12u);
    // Zero copy: the tensors sit in one contiguous region in file order of their offsets.
    const auto* a = static_cast<const char*>(store.find(kNames[0])->data);
    const auto* b = static_cast<const char*>(store.find("lm_head.weight")->data);
    EXPECT_LT(std::abs(b - a), 4096);
}

TEST(Safetensors, ShardedDirectory) {
    std::vector<std::pair<std::size_t, std::size_t>> calls;
    auto r = load_model_files(loader_fixture("tiny_hf_sharded"),
                              [&](std::size_t d, std::size_t t) { calls.emplace_back(d, t); });
    ASSERT_TRUE(r.ok()) << r.error().message;
    expect_tiny_weights(r->weights);
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls.back(), std::make_pair(std::size_t{12}, std::size_t{12}));
    EXPECT_EQ(r->eos_token_ids, (std::vector<std::int64_t>{2, 3}));
}

TEST(Safetensors, MisalignedDataIsCopiedAligned) {
    WeightStore store;
    auto n = load_safetensors_file(loader_fixture("misaligned.safetensors"), store);
    ASSERT_TRUE(n.ok()) << n.error().message;
    const char* names[] = {"a", "b", "c"};
    for (int k = 0; k < 3; ++k) {
        const tensor::Tensor* t = store.find(names[k]);
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t->data) % tensor::dtype_size(t->dtype), 0u);
        expect_values(*t, k, names[k]);
    }
    EXPECT_EQ(store.find("a")->shape[1], 5);
}

TEST(Safetensors, TruncatedFilesAreErrors) {
    const std::string whole = test::read_bytes(loader_fixture("tiny_hf/model.safetensors"));
    ASSERT_GT(whole.size(), 100u);
    ScratchDir dir;
    const std::string path = dir.file("cut.safetensors");
    std::vector<std::size_t> cuts;
    for (std::size_t i = 0; i < 64; ++i) cuts.push_back(i);
    for (std::size_t pct = 2; pct < 100; pct += 2) cuts.push_back(whole.size() * pct / 100);
    cuts.push_back(whole.size() - 1);
    for (std::size_t cut : cuts) {
        write_bytes(path, whole.substr(0, cut));
        WeightStore store;
        auto r = load_safetensors_file(path, store);
        ASSERT_FALSE(r.ok()) << "cut at " << cut;
        EXPECT_NE(r.error().message.find(path), std::string::npos) << r.error().message;
    }
}

// A safetensors file from a header string and a data section.
std::string make_file(const std::string& header, const std::string& data) {
    std::string out(8, '\0');
    std::uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return out + header + data;
}

// One directory for the whole suite: hundreds of cases, and each ScratchDir costs a process.
const ScratchDir& scratch() {
    static ScratchDir dir;
    return dir;
}

std::string load_error(const std::string& bytes) {
    const ScratchDir& dir = scratch();
    write_bytes(dir.file("bad.safetensors"), bytes);
    WeightStore store;
    auto r = load_safetensors_file(dir.file("bad.safetensors"), store);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.error().message;
}

TEST(Safetensors, CorruptHeadersAreErrors) {
    const std::string data(64, '\0');
    struct Case {
        std::string bytes;
        const char* expect;
    };
    std::string huge_len(8, '\xff');
    const Case cases[] = {
        {"", "too small"},
        {huge_len + "{}", "header length"},
        {make_file("{not json", data), "JSON"},
        {make_file("[1, 2]", data), "object"},
        {make_file(R"({"w": 3})", data), "not an object"},
        {make_file(R"({"w": {"dtype": "F32", "shape": [4]}})", data), "data_offsets"},
        {make_file(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 100]}})", data),
         "outside the data region"},
        {make_file(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [8, 4]}})", data),
         "outside the data region"},
        {make_file(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [-1, 16]}})", data),
         "data_offsets"},
        {make_file(R"({"w": {"dtype": "F32", "shape": [5], "data_offsets": [0, 16]}})", data),
         "need 20"},
        {make_file(R"({"w": {"dtype": "I8", "shape": [4], "data_offsets": [0, 4]}})", data),
         "unsupported dtype 'I8'"},
        {make_file(R"({"w": {"dtype": "F32", "shape": [1,1,1,1,4], "data_offsets": [0, 16]}})",
                   data),
         "rank 5"},
        {make_file(R"({"w": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}})", data),
         "shape"},
        {make_file(R"({"w": {"dtype": "F32", "shape": [4611686018427387904, )"
                   R"(4611686018427387904], "data_offsets": [0, 16]}})",
                   data),
         "larger than the file"},
        {make_file(R"({"w": {"dtype": 1, "shape": [4], "data_offsets": [0, 16]}})", data), "dtype"},
    };
    for (const Case& c : cases) {
        std::string msg = load_error(c.bytes);
        EXPECT_NE(msg.find(c.expect), std::string::npos)
            << "expected '" << c.expect << "' in: " << msg;
        EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << msg;
    }
}

TEST(Safetensors, EmptyTensorAndMetadataAreFine) {
    ScratchDir dir;
    write_bytes(dir.file("ok.safetensors"),
                make_file(R"({"__metadata__": {"format": "pt"}, "e": {"dtype": "F16", )"
                          R"("shape": [0, 3], "data_offsets": [0, 0]}})",
                          ""));
    WeightStore store;
    auto r = load_safetensors_file(dir.file("ok.safetensors"), store);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(store.find("e")->numel(), 0);
}

TEST(Safetensors, MissingAndEmptyFiles) {
    WeightStore store;
    auto r = load_safetensors_file("/nonexistent/model.safetensors", store);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("/nonexistent/model.safetensors"), std::string::npos);

    ScratchDir dir;
    write_bytes(dir.file("empty.safetensors"), "");
    r = load_safetensors_file(dir.file("empty.safetensors"), store);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("too small"), std::string::npos);

    auto files = load_model_files(dir.path());  // a directory without config.json
    ASSERT_FALSE(files.ok());
    EXPECT_NE(files.error().message.find("config.json"), std::string::npos);
    files = load_model_files("/nonexistent/model");
    ASSERT_FALSE(files.ok());
    EXPECT_NE(files.error().message.find("/nonexistent/model"), std::string::npos);
}

TEST(Safetensors, DuplicateTensorAcrossFiles) {
    WeightStore store;
    ASSERT_TRUE(load_safetensors_file(loader_fixture("tiny_hf/model.safetensors"), store).ok());
    auto r = load_safetensors_file(loader_fixture("tiny_hf/model.safetensors"), store);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("more than one file"), std::string::npos);
}

// Copies the sharded fixture into a scratch directory so a test can damage one file.
void copy_sharded(const ScratchDir& dir) {
    for (const char* f : {"config.json", "model.safetensors.index.json",
                          "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"})
        write_bytes(dir.file(f),
                    test::read_bytes(loader_fixture(std::string("tiny_hf_sharded/") + f)));
}

TEST(Safetensors, ShardedIndexProblems) {
    {
        ScratchDir dir;
        copy_sharded(dir);
        // Claim a tensor lives in the first shard although it is in the second.
        std::string index = test::read_bytes(dir.file("model.safetensors.index.json"));
        const std::string from = R"("model.norm.weight": "model-00002-of-00002.safetensors")";
        auto pos = index.find(from);
        ASSERT_NE(pos, std::string::npos) << index;
        index.replace(pos, from.size(),
                      R"("model.norm.weight": "model-00001-of-00002.safetensors")");
        write_bytes(dir.file("model.safetensors.index.json"), index);
        auto r = load_model_files(dir.path());
        ASSERT_FALSE(r.ok());
        EXPECT_NE(r.error().message.find("model.norm.weight"), std::string::npos)
            << r.error().message;
    }
    {
        ScratchDir dir;
        copy_sharded(dir);
        std::remove(dir.file("model-00002-of-00002.safetensors").c_str());
        auto r = load_model_files(dir.path());
        ASSERT_FALSE(r.ok());
        EXPECT_NE(r.error().message.find("model-00002-of-00002.safetensors"), std::string::npos);
    }
    {
        ScratchDir dir;
        copy_sharded(dir);
        write_bytes(dir.file("model.safetensors.index.json"),
                    R"({"weight_map": {"model.norm.weight": "../../etc/passwd"}})");
        auto r = load_model_files(dir.path());
        ASSERT_FALSE(r.ok());
        EXPECT_NE(r.error().message.find("invalid shard"), std::string::npos) << r.error().message;
    }
    {
        ScratchDir dir;
        copy_sharded(dir);
        write_bytes(dir.file("model.safetensors.index.json"), R"({"weight_map": [1]})");
        auto r = load_model_files(dir.path());
        ASSERT_FALSE(r.ok());
        EXPECT_NE(r.error().message.find("weight_map"), std::string::npos) << r.error().message;
    }
}

TEST(Safetensors, ValidationNamesMissingOrMisshapenWeight) {
    ScratchDir dir;
    copy_sharded(dir);
    // The config claims two layers; the checkpoint only has one.
    std::string config = test::read_bytes(dir.file("config.json"));
    auto pos = config.find("\"num_hidden_layers\": 1");
    ASSERT_NE(pos, std::string::npos);
    config.replace(pos, 22, "\"num_hidden_layers\": 2");
    write_bytes(dir.file("config.json"), config);
    auto r = load_model_files(dir.path());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("missing weight model.layers.1.input_layernorm.weight"),
              std::string::npos)
        << r.error().message;

    config.replace(config.find("\"num_hidden_layers\": 2"), 22, "\"num_hidden_layers\": 1");
    config.replace(config.find("\"intermediate_size\": 12"), 23, "\"intermediate_size\": 16");
    write_bytes(dir.file("config.json"), config);
    r = load_model_files(dir.path());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("gate_proj.weight has shape [12, 8], expected [16, 8]"),
              std::string::npos)
        << r.error().message;
}

}  // namespace
}  // namespace inferscale::model
