#pragma once
// Shared by the golden-model tests: loads a fixture checkpoint from tests/fixtures/golden/<name>
// (made by tools/make_golden_models.py) with the transformers reference outputs, and runs
// single sequences through LlamaModel over a paged KV cache.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"
#include "model/llama_model.h"
#include "model/model_files.h"

namespace inferscale::model::golden {

inline std::string golden_dir(const std::string& name) {
    const char* env = std::getenv("INFERSCALE_FIXTURES");
    return std::string(env != nullptr ? env : "tests/fixtures") + "/golden/" + name;
}

struct Golden {
    std::vector<std::int32_t> prompt;
    std::vector<std::int32_t> greedy;
    std::vector<float> logits;  // [prompt_len, vocab] f32
    std::vector<float> rope_inv_freq;
    std::int64_t vocab = 0;
    float logits_abs_max = 0.0f;
};

inline Golden load_golden(const std::string& name) {
    Golden g;
    std::ifstream meta(golden_dir(name) + "/golden.json");
    const nlohmann::json j = nlohmann::json::parse(meta);
    g.prompt = j.at("prompt").get<std::vector<std::int32_t>>();
    g.greedy = j.at("greedy").get<std::vector<std::int32_t>>();
    g.rope_inv_freq = j.at("rope_inv_freq").get<std::vector<float>>();
    g.vocab = j.at("logits_shape").at(1).get<std::int64_t>();
    g.logits_abs_max = j.at("logits_abs_max").get<float>();
    g.logits.resize(g.prompt.size() * g.vocab);
    std::ifstream bin(golden_dir(name) + "/logits.bin", std::ios::binary);
    bin.read(reinterpret_cast<char*>(g.logits.data()),
             static_cast<std::streamsize>(g.logits.size() * sizeof(float)));
    EXPECT_TRUE(bin.good()) << "logits.bin of " << name;
    return g;
}

inline std::int32_t argmax(const float* row, std::int64_t n) {
    return static_cast<std::int32_t>(std::max_element(row, row + n) - row);
}

inline float max_abs_diff(const float* a, const float* b, std::size_t n) {
    float m = 0.0f;
    for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
    return m;
}

// A loaded checkpoint with a CPU backend, a KV cache and a workspace.
struct Harness {
    std::unique_ptr<backends::cpu::CpuBackend> backend =
        std::make_unique<backends::cpu::CpuBackend>();
    ModelConfig config;
    std::unique_ptr<LlamaModel> model;
    std::unique_ptr<kv::KvStorage> kv;
    std::unique_ptr<ForwardWorkspace> ws;

    // `block_size` small so that the prompt spans many pages.
    void init(const std::string& name, std::int64_t block_size = 4, std::int64_t num_blocks = 96) {
        init_path(golden_dir(name), {}, block_size, num_blocks);
    }

    // Any model file or directory `load_model_files` takes.
    void init_path(const std::string& path, const LoadOptions& options,
                   std::int64_t block_size = 4, std::int64_t num_blocks = 96) {
        auto files = load_model_files(path, {}, options);
        ASSERT_TRUE(files.ok()) << files.error().message;
        config = files->config;
        auto m = LlamaModel::create(*backend, config, files->weights, {.max_positions = 128});
        ASSERT_TRUE(m.ok()) << m.error().message;
        model = std::make_unique<LlamaModel>(std::move(m).value());
        auto storage = kv::KvStorage::create(*backend, model->kv_layout(num_blocks, block_size));
        ASSERT_TRUE(storage.ok()) << storage.error().message;
        kv = std::make_unique<kv::KvStorage>(std::move(storage).value());
        auto w = model->create_workspace(WorkspaceLimits{
            .max_tokens = 96, .max_seqs = 8, .max_pages = 256, .max_logit_rows = 96});
        ASSERT_TRUE(w.ok()) << w.error().message;
        ws = std::make_unique<ForwardWorkspace>(std::move(w).value());
    }

    // One forward; returns the logits rows.
    std::vector<float> run(const ForwardBatch& batch) {
        std::vector<float> logits(LlamaModel::num_logit_rows(batch) * config.vocab_size);
        const Status st = model->forward(batch, *kv, *ws, logits);
        EXPECT_TRUE(st.ok()) << st.error().message;
        return logits;
    }

    // Runs `tokens` as one sequence whose KV already holds `start` tokens in `pages`.
    std::vector<float> run_one(const std::vector<std::int32_t>& tokens, std::int32_t start,
                               const std::vector<std::int32_t>& pages, LogitsSelection sel) {
        std::vector<std::int32_t> pos(tokens.size());
        std::iota(pos.begin(), pos.end(), start);
        const BatchSequence seq{static_cast<std::int32_t>(tokens.size()),
                                start + static_cast<std::int32_t>(tokens.size()), pages};
        return run(ForwardBatch{tokens, pos, std::span(&seq, 1), sel});
    }
};

// Block ids handed out out of order: a pool whose free list was scrambled by releasing blocks
// in a shuffled order.
inline kv::BlockPool scrambled_pool(std::int32_t num_blocks) {
    kv::BlockPool pool(num_blocks);
    std::vector<kv::BlockId> all;
    EXPECT_TRUE(pool.allocate(num_blocks, all));
    for (std::int32_t i = 0; i < num_blocks; ++i) {
        pool.release(all[(static_cast<std::int64_t>(i) * 37 + 11) % num_blocks]);
    }
    return pool;
}

inline std::vector<std::int32_t> take_blocks(kv::BlockPool& pool, std::int32_t count) {
    std::vector<kv::BlockId> out;
    EXPECT_TRUE(pool.allocate(count, out));
    return out;
}

}  // namespace inferscale::model::golden
