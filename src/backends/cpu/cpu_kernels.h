#pragma once
// Plain-pointer CPU kernels behind CpuBackend, one file per op family. All activations are f32
// row-major; matrix weights are f32, bf16 or f16 (the dtype their checkpoint stored) or
// ggml block-quantized (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K, IQ4_NL, IQ4_XS). Kernels
// parallelize with OpenMP internally and must not be called from inside a parallel region.

#include <cstdint>
#include <vector>

#include "backends/cpu/ggml_isa.h"
#include "tensor/dtype.h"

namespace inferscale::backends::cpu {

// ---- matmul.cpp ----
// y[n, out] = x[n, in] * w[out, in]^T (+ bias[out]). Small n runs a GEMV that streams the weight
// once (decode is memory-bound); larger n converts weight rows to f32 in `scratch` chunks as
// needed and calls OpenBLAS sgemm.
void linear(const float* x, std::int64_t n, std::int64_t in, const void* w, tensor::DType w_dtype,
            std::int64_t out, const float* bias, float* y, std::vector<float>& scratch);

// ---- matmul_quantized.cpp ----
// y[n, out] = x[n, in] * w[out, in]^T (+ bias[out]) for a block-quantized w (any block DType;
// in a multiple of its block), computed as ggml's CPU backend does: x quantized per block to
// Q8_1 (Q4_1, Q5_1 weights), Q8_K (super-block types) or Q8_0 into `scratch`, then integer block
// dot products scaled in f32.
void linear_quantized(const float* x, std::int64_t n, std::int64_t in, const void* w,
                      tensor::DType w_dtype, std::int64_t out, const float* bias, float* y,
                      std::vector<std::uint8_t>& scratch);

// ---- matmul_kquant.cpp ----
// linear_quantized for super-block weights (Q2_K ... Q6_K, IQ4_XS; in a multiple of 256).
void linear_kquant(const float* x, std::int64_t n, std::int64_t in, const void* w,
                   tensor::DType w_dtype, std::int64_t out, const float* bias, float* y,
                   std::vector<std::uint8_t>& scratch);

// ---- elementwise.cpp ----
// Rows of a table of any weight dtype (block-quantized rows are dequantized).
void embedding(const void* table, tensor::DType dtype, std::int64_t vocab, std::int64_t hidden,
               const std::int32_t* ids, std::int64_t n, float* out);
void gather_rows(const float* x, std::int64_t n, std::int64_t k, const std::int32_t* rows,
                 std::int64_t m, float* out);
void rms_norm(const float* x, const float* weight, float eps, std::int64_t n, std::int64_t hidden,
              float* out);
void add(float* x, const float* y, std::int64_t count);
void swiglu(const float* gate, const float* up, std::int64_t count, float* out);
// gelu, tanh approximation (transformers' gelu_pytorch_tanh, ggml_gelu_f32's formula).
float gelu_tanh(float x);
void geglu(const float* gate, const float* up, std::int64_t count, float* out);
void scale(float* x, std::int64_t count, float factor);
// `ggml`: rotate with rotate_ggml (below) instead of the reference expression.
void rope(float* x, std::int64_t n, std::int64_t heads, std::int64_t head_dim,
          const std::int32_t* positions, const float* cos, const float* sin,
          std::int64_t max_positions, bool ggml);
// One head row as rope() turns it: dst = src rotated by (cos, sin)[0 .. half), HF's rotate_half
// pairing (dim i with i + half), or rotate_ggml's arithmetic; src == dst is allowed. Everything
// that rotates a key on the CPU (rope, the injection of memory chunks) goes through it, so an
// injected key equals the key a prefill at that position computes.
void rotate_head(const float* src, float* dst, std::int64_t half, const float* cos,
                 const float* sin, bool ggml);

// ---- encoder_ops.cpp ----
// LayerNorm with bias (biased variance); out may alias x.
void layer_norm(const float* x, const float* weight, const float* bias, float eps, std::int64_t n,
                std::int64_t hidden, float* out);
// x = x * (1 + erf(x / sqrt(2))) / 2 in place.
void gelu_erf(float* x, std::int64_t count);
// Bidirectional attention within packed sequences (tensor::SequenceAttentionArgs); q, k, v,
// out [n, heads, head_dim], seq_indptr [num_seqs + 1]; out must not alias q, k or v.
void sequence_attention(const float* q, const float* k, const float* v, std::int64_t heads,
                        std::int64_t head_dim, const std::int32_t* seq_indptr, int num_seqs,
                        float scale, float* out);

// ---- attention.cpp ----
struct PagedKvView {
    void* k = nullptr;  // [num_blocks, bs, kvh, d] f32, or FP8 E4M3 with scales
    void* v = nullptr;
    std::int64_t num_blocks = 0;
    std::int64_t block_size = 0;
    std::int64_t kv_heads = 0;
    std::int64_t head_dim = 0;
    const float* k_scale = nullptr;  // [kvh], FP8 pages only (value = scale * e4m3)
    const float* v_scale = nullptr;

    bool fp8() const { return k_scale != nullptr; }
    float* k_f32() const { return static_cast<float*>(k); }
    float* v_f32() const { return static_cast<float*>(v); }
};

// FP8 E4M3 rows: dst[i] = e4m3(src[i]) * scale, and its inverse rounding src[i] / scale.
void widen_e4m3(const std::uint8_t* src, float scale, std::int64_t n, float* dst);
void narrow_e4m3(const float* src, float scale, std::int64_t n, std::uint8_t* dst);

void write_kv(const float* k, const float* v, std::int64_t n, const std::int32_t* slots,
              const PagedKvView& pages);

struct AttentionMeta {
    const std::int32_t* qo_indptr = nullptr;      // [s + 1]
    const std::int32_t* indptr = nullptr;         // [s + 1]
    const std::int32_t* indices = nullptr;        // [p]
    const std::int32_t* last_page_len = nullptr;  // [s]
    int num_seqs = 0;
    float scale = 0.0f;
    bool qk_ggml_interleaved = false;  // see tensor::PagedAttentionArgs
    std::int64_t window = 0;           // see tensor::PagedAttentionArgs
};

// One work item of paged attention, a (query row, query head) pair numbered row * heads + head:
// its sequence's page ids, query count, which KV positions it sees ([first, visible): causal up
// to and including its own, from the window's start), and its KV head's offset inside a token's
// K/V row. Aborts on malformed metadata.
struct AttentionItem {
    std::int64_t row = 0;
    std::int64_t head = 0;
    const std::int32_t* page_ids = nullptr;
    std::int64_t q_len = 0;
    std::int64_t first = 0;
    std::int64_t visible = 0;
    std::int64_t kv_offset = 0;
};
AttentionItem locate_item(const AttentionMeta& meta, std::int64_t item, std::int64_t heads,
                          std::int64_t kv_heads, std::int64_t head_dim, std::int64_t block_size);

void paged_attention(const float* q, std::int64_t n, std::int64_t heads, const PagedKvView& pages,
                     const AttentionMeta& meta, float* out);

// ---- elementwise_ggml.cpp, attention_ggml.cpp ----
// The same ops with ggml's CPU arithmetic (CpuBackendOptions::arithmetic, ggml_arith.h):
// identical bits to llama.cpp's build for `isa` (ggml_isa.h) for the same inputs.
void rms_norm_ggml(const float* x, const float* weight, float eps, std::int64_t n,
                   std::int64_t hidden, float* out);
void swiglu_ggml(const float* gate, const float* up, std::int64_t count, float* out,
                 GgmlIsa isa);
// ggml_vec_geglu_f32 (GGML_GELU_FP16): gelu looked up at the gate rounded to f16, itself
// rounded to f16, times up; the same in both builds.
void geglu_ggml(const float* gate, const float* up, std::int64_t count, float* out);
// One head row: dst = src rotated by (cos, sin)[0 .. half); src == dst is allowed.
void rotate_ggml(const float* src, float* dst, std::int64_t half, const float* cos,
                 const float* sin);
void paged_attention_ggml(const float* q, std::int64_t n, std::int64_t heads,
                          const PagedKvView& pages, const AttentionMeta& meta, float* out,
                          GgmlIsa isa);

}  // namespace inferscale::backends::cpu
