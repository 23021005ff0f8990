// Quick throughput check of LlamaModel on the CPU backend (not a test): prefill of a 128-token
// prompt, then greedy-style decode one token per forward.
//   model_timing [path-to-model]   default: random weights in the SmolLM2-135M shape
//   env TIMING_WEIGHT_DTYPE=bf16   random weights stored as bf16 instead of f32
//   env TIMING_NARROW=1            CpuBackendOptions::narrow_f32_matrices (f32 -> bf16)

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "base/timer.h"
#include "model/llama_model.h"
#include "model/model_files.h"

using namespace inferscale;

namespace {

model::ModelConfig smollm2_config() {
    model::ModelConfig c;
    c.vocab_size = 49152;
    c.hidden_size = 576;
    c.intermediate_size = 1536;
    c.num_layers = 30;
    c.num_heads = 9;
    c.num_kv_heads = 3;
    c.head_dim = 64;
    c.max_position_embeddings = 8192;
    c.rope_theta = 100000.0f;
    c.tie_word_embeddings = true;
    return c;
}

void add_random(model::WeightStore& ws, const std::string& name, std::int64_t rows,
                std::int64_t cols, tensor::DType dtype, std::mt19937& rng) {
    const std::size_t n = static_cast<std::size_t>(rows * (cols > 0 ? cols : 1));
    std::vector<float> v(n);
    std::normal_distribution<float> dist(0.0f, cols > 0 ? 0.05f : 0.1f);
    for (float& x : v) x = (cols > 0 ? 0.0f : 1.0f) + dist(rng);
    void* dst = ws.allocate(n * tensor::dtype_size(dtype));
    tensor::convert_from_f32(dtype, v.data(), dst, n);
    ws.add(name, cols > 0 ? tensor::Tensor(dst, dtype, {rows, cols})
                          : tensor::Tensor(dst, dtype, {rows}));
}

model::WeightStore random_weights(const model::ModelConfig& c, tensor::DType dtype) {
    model::WeightStore ws;
    std::mt19937 rng(1);
    const std::int64_t h = c.hidden_size, q = c.num_heads * c.head_dim,
                       kv = c.num_kv_heads * c.head_dim, f = c.intermediate_size;
    add_random(ws, "model.embed_tokens.weight", c.vocab_size, h, dtype, rng);
    add_random(ws, "model.norm.weight", h, 0, tensor::DType::F32, rng);
    for (std::int64_t i = 0; i < c.num_layers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        add_random(ws, p + "input_layernorm.weight", h, 0, tensor::DType::F32, rng);
        add_random(ws, p + "post_attention_layernorm.weight", h, 0, tensor::DType::F32, rng);
        add_random(ws, p + "self_attn.q_proj.weight", q, h, dtype, rng);
        add_random(ws, p + "self_attn.k_proj.weight", kv, h, dtype, rng);
        add_random(ws, p + "self_attn.v_proj.weight", kv, h, dtype, rng);
        add_random(ws, p + "self_attn.o_proj.weight", h, q, dtype, rng);
        add_random(ws, p + "mlp.gate_proj.weight", f, h, dtype, rng);
        add_random(ws, p + "mlp.up_proj.weight", f, h, dtype, rng);
        add_random(ws, p + "mlp.down_proj.weight", h, f, dtype, rng);
    }
    return ws;
}

}  // namespace

int main(int argc, char** argv) {
    model::ModelConfig config;
    model::WeightStore weights;
    if (argc > 1) {
        auto files = model::load_model_files(argv[1]);
        if (!files.ok()) {
            std::fprintf(stderr, "%s\n", files.error().message.c_str());
            return 1;
        }
        config = files->config;
        weights = std::move(files->weights);
    } else {
        const char* d = std::getenv("TIMING_WEIGHT_DTYPE");
        const bool bf16 = d != nullptr && std::strcmp(d, "bf16") == 0;
        config = smollm2_config();
        weights = random_weights(config, bf16 ? tensor::DType::BF16 : tensor::DType::F32);
    }
    backends::cpu::CpuBackend backend(
        {.narrow_f32_matrices = std::getenv("TIMING_NARROW") != nullptr});
    auto m = model::LlamaModel::create(backend, config, weights, {.max_positions = 1024});
    if (!m.ok()) {
        std::fprintf(stderr, "%s\n", m.error().message.c_str());
        return 1;
    }
    model::LlamaModel& model = m.value();
    auto kv = kv::KvStorage::create(backend, model.kv_layout(64)).value();
    auto ws = model
                  .create_workspace(
                      {.max_tokens = 128, .max_seqs = 1, .max_pages = 64, .max_logit_rows = 1})
                  .value();
    std::vector<std::int32_t> pages(64);
    std::iota(pages.begin(), pages.end(), 0);
    std::vector<float> logits(config.vocab_size);

    const int prompt = 128, decode = 32;
    std::vector<std::int32_t> ids(prompt), pos(prompt);
    for (int i = 0; i < prompt; ++i) ids[i] = (i * 7919) % static_cast<int>(config.vocab_size);
    std::iota(pos.begin(), pos.end(), 0);
    auto step = [&](std::span<const std::int32_t> t, std::span<const std::int32_t> p, int kv_len) {
        const model::BatchSequence seq{static_cast<std::int32_t>(t.size()), kv_len, pages};
        const Status st = model.forward({t, p, std::span(&seq, 1)}, kv, ws, logits);
        if (!st.ok()) std::fprintf(stderr, "%s\n", st.error().message.c_str());
    };
    step(ids, pos, prompt);  // warm-up
    double best_prefill = 1e9;
    for (int r = 0; r < 3; ++r) {
        Timer t;
        step(ids, pos, prompt);
        best_prefill = std::min(best_prefill, t.seconds());
    }
    Timer t;
    for (int i = 0; i < decode; ++i) {
        const std::int32_t tok = 100 + i, p = prompt + i;
        step(std::span(&tok, 1), std::span(&p, 1), prompt + i + 1);
    }
    const double dec = t.seconds();
    std::printf("prefill %d tokens: %.1f ms (%.0f tok/s); decode: %.2f ms/token (%.1f tok/s)\n",
                prompt, best_prefill * 1e3, prompt / best_prefill, dec * 1e3 / decode,
                decode / dec);
    return 0;
}
