#pragma once
// Plain-pointer launchers behind CudaBackend, one .cu file per op family. Every launcher only
// enqueues work on `stream`: no allocation, no synchronization and no host reads of device
// memory, so each is legal inside CUDA graph capture. Shapes were checked by the caller; index
// values that are out of range (token ids, rows, positions, slots, page ids) are bugs that trap
// the kernel, which then surfaces as an error at the next synchronize.
// Activations are bf16 or f32 (one dtype per call); KV pages are bf16; accumulation is f32.

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "tensor/dtype.h"

namespace inferscale::backends::cuda {

using tensor::DType;

// ---- convert.cu ----
// dst[i] = src[i] converted; from F32, F16 or BF16 into F32 or BF16.
void launch_convert(const void* src, DType from, void* dst, DType to, std::int64_t count,
                    cudaStream_t stream);

// ---- random_fill.cu ----
// out[i] = tensor::random_uniform(seed, i, scale, offset) rounded to `dtype` (F32, F16, BF16).
void launch_fill_random(void* out, DType dtype, std::int64_t count, std::uint64_t seed,
                        float scale, float offset, cudaStream_t stream);

// Bytes of a block-quantized tensor: tensor::random_block_byte (random quants, every scale
// field `scale_bits`).
void launch_fill_random_blocks(void* out, DType dtype, std::int64_t bytes, std::uint64_t seed,
                               std::uint16_t scale_bits, cudaStream_t stream);

// ---- quant_linear.cu ----
// Weights of a ggml block type (tensor/quantized.h) as the file's blocks, rows back to back.
// Up to kQuantGemvMaxRows tokens a linear over them runs on int8 activations: x [n, in] bf16
// quantized per 32 elements into `quants` [n, in] with f32 `scales` [n, in / 32] (in a
// multiple of 32; quants 16-byte aligned), then y[n, out] = x W^T (+ bias) with the blocks
// dequantized in registers: y bf16 or f32 (y_f32), bias bf16 or f32 (bias_f32) or null.
inline constexpr std::int64_t kQuantGemvMaxRows = 8;
struct QuantActivations {
    std::int8_t* quants = nullptr;
    float* scales = nullptr;
};
struct QuantLinearTarget {
    const void* w = nullptr;
    DType dtype = DType::Q8_0;
    const void* bias = nullptr;
    bool bias_f32 = false;
    void* y = nullptr;
    std::int64_t out = 0;
};
void launch_quantize_activations(const void* x, std::int64_t n, std::int64_t in,
                                 const QuantActivations& out, cudaStream_t stream);
void launch_quant_gemv(const QuantActivations& x, std::int64_t n, std::int64_t in,
                       const QuantLinearTarget& target, bool y_f32, cudaStream_t stream);
// out[r, :] = row row_ids[r] (r itself when row_ids is null) of the block weight w [.., in],
// dequantized into out_dtype (BF16 or F32); row ids outside [0, id_limit) trap.
void launch_dequantize_rows(const void* w, DType dtype, std::int64_t in, std::int64_t num_rows,
                            const std::int32_t* row_ids, std::int64_t id_limit, void* out,
                            DType out_dtype, cudaStream_t stream);

// ---- quant_gemv_ring.cu ----
// One token: y = x W^T (+ bias) for every target (all of one K-quant type: Q4_K, Q5_K, Q6_K),
// from x [1, in] bf16 as it is (each CTA quantizes it as launch_quantize_activations does), the
// blocks streamed by bulk copies (gemv_ring.cuh). `gated` (gate then up, one size, y bf16): the
// gate output becomes silu(gate) * up and up is not written. False (nothing enqueued) when the
// rows are not 16-byte aligned (Q6_K with in / 256 not a multiple of 8), x does not fit in
// shared memory, or the targets are not of one such type. init_quant_gemv_ring: once per
// device, before any launch.
void init_quant_gemv_ring();
bool launch_quant_gemv_ring(const void* x, std::int64_t in,
                            std::span<const QuantLinearTarget> targets, bool gated, bool y_f32,
                            int num_sms, cudaStream_t stream);

// ---- gather.cu ----
// out[i, :] = table[ids[i], :] converted to out's dtype.  table [vocab, hidden], out [n, hidden]
void launch_embedding(const void* table, DType table_dtype, std::int64_t vocab,
                      std::int64_t hidden, const std::int32_t* ids, std::int64_t n, void* out,
                      DType out_dtype, cudaStream_t stream);
// out[i, :] = x[rows[i], :] as raw bytes.  x [n, row_bytes], out [m, row_bytes]
void launch_gather_rows(const void* x, std::int64_t n, std::int64_t row_bytes,
                        const std::int32_t* rows, std::int64_t m, void* out, cudaStream_t stream);
// Splits each row of x [n, sum of part bytes] into consecutive column ranges: part j gets the
// next bytes[j] bytes of every row, out_j [n, bytes[j]]. Widths and pointers 16-byte aligned.
inline constexpr int kMaxColumnParts = 4;
struct ColumnParts {
    int count = 0;
    void* dst[kMaxColumnParts]{};
    std::int64_t bytes[kMaxColumnParts]{};
};
void launch_split_columns(const void* x, std::int64_t n, const ColumnParts& parts,
                          cudaStream_t stream);

// ---- norm.cu ----
// out = x / sqrt(mean(x^2) + eps) * weight per row. With a residual, x += residual first (x is
// written, rounded to dtype) and that sum is normalized. out may alias x or the residual.
//   x, residual (or null), out [n, hidden] dtype, weight [hidden] weight_dtype (BF16 or F32)
void launch_rms_norm(void* x, const void* residual, DType dtype, const void* weight,
                     DType weight_dtype, float eps, std::int64_t n, std::int64_t hidden, void* out,
                     cudaStream_t stream);

// ---- encoder_ops.cu ----
// LayerNorm with bias (biased variance), f32 statistics; out may alias x.
//   x, out [n, hidden] dtype, weight, bias [hidden] weight_dtype (BF16 or F32)
void launch_layer_norm(const void* x, DType dtype, const void* weight, const void* bias,
                       DType weight_dtype, float eps, std::int64_t n, std::int64_t hidden,
                       void* out, cudaStream_t stream);
// x = x * (1 + erf(x / sqrt(2))) / 2 in place.
void launch_gelu(void* x, DType dtype, std::int64_t count, cudaStream_t stream);
// Bidirectional attention within packed sequences (tensor::SequenceAttentionArgs); head_dim at
// most 128, sequences of at most max_seq_len rows (a longer one traps the kernel).
//   q, k, v, out [n, heads, head_dim] dtype, seq_indptr [num_seqs + 1] on the device
void launch_sequence_attention(const void* q, const void* k, const void* v, DType dtype,
                               std::int64_t n, int heads, int head_dim,
                               const std::int32_t* seq_indptr, int num_seqs, int max_seq_len,
                               float scale, void* out, cudaStream_t stream);

// ---- elementwise.cu ----
void launch_add(void* x, const void* y, DType dtype, std::int64_t count, cudaStream_t stream);
// The gate's activation of a gated MLP: silu (SwiGLU) or gelu, tanh approximation (GeGLU).
enum class GateActivation { Silu, GeluTanh };
// out = act(gate) * up; out may alias gate or up.
void launch_gated(GateActivation act, const void* gate, const void* up, void* out, DType dtype,
                  std::int64_t count, cudaStream_t stream);
// x *= factor.
void launch_scale(void* x, DType dtype, std::int64_t count, float factor, cudaStream_t stream);
// y[t, o] += bias[o].  y [n, out] y_dtype, bias [out] bias_dtype (BF16 or F32)
void launch_add_bias(void* y, DType y_dtype, const void* bias, DType bias_dtype, std::int64_t n,
                     std::int64_t out, cudaStream_t stream);

// ---- rope.cu ----
// In place, rotate_half pairing (dim i with i + d/2), q and k in one launch (k_heads 0: q
// alone).  q [n, q_heads, d], k [n, k_heads, d] dtype, positions [n], cos/sin
// [max_positions, d/2] f32
void launch_rope(void* q, std::int64_t q_heads, void* k, std::int64_t k_heads, DType dtype,
                 std::int64_t n, std::int64_t head_dim, const std::int32_t* positions,
                 const float* cos, const float* sin, std::int64_t max_positions,
                 cudaStream_t stream);

// ---- paged KV (kv_write.cu, attention_*.cu) ----
struct PagedKvView {
    void* k = nullptr;  // [num_blocks, block_size, kv_heads, head_dim] bf16 or e4m3
    void* v = nullptr;  // [num_blocks, block_size, kv_heads, head_dim] bf16 or e4m3
    std::int64_t num_blocks = 0;
    int block_size = 0;
    int kv_heads = 0;
    int head_dim = 0;
    // FP8 (E4M3) pages: a stored value is e4m3 * the head's scale, k_scale / v_scale [kv_heads]
    // f32 on the device, read by the attention kernels (attention_common.cuh's head_scales).
    bool fp8 = false;
    const float* k_scale = nullptr;
    const float* v_scale = nullptr;
};

// pages[slots[t]] = k[t], v[t] (converted to bf16, or FP8: rounded over the head's scale as
// tensor::f32_to_e4m3 rounds).  k, v [n, kv_heads, head_dim] dtype
void launch_write_kv(const void* k, const void* v, DType dtype, std::int64_t n,
                     const std::int32_t* slots, const PagedKvView& pages, cudaStream_t stream);

// Where launch_rope_write_kv reads each token's q, k and v rows (bf16, [heads, head_dim] each)
// and writes the rotated q and k: the projections' own buffers, rotated in place, or the
// stacked q/k/v projection's output (a token's row is q | k | v), q then going to its own
// buffer and k to the pages only. Strides are elements from one token's row to the next.
struct QkvRows {
    const void* q = nullptr;
    const void* k = nullptr;
    const void* v = nullptr;
    std::int64_t q_stride = 0, k_stride = 0, v_stride = 0;
    void* q_out = nullptr;
    std::int64_t q_out_stride = 0;
    void* k_out = nullptr;  // null: k to the pages only
    std::int64_t k_out_stride = 0;
};

// launch_rope of q and k, then launch_write_kv, in one launch (rope.cu): bf16 rows and pages,
// head_dim / 2 a multiple of 8, 16-byte aligned rows, strides and tables; returns false (and
// does nothing) else.
bool launch_rope_write_kv(const QkvRows& rows, std::int64_t q_heads, std::int64_t n,
                          const std::int32_t* positions, const float* cos, const float* sin,
                          std::int64_t max_positions, const std::int32_t* slots,
                          const PagedKvView& pages, cudaStream_t stream);

// Device copies of PagedAttentionArgs plus the shapes the kernels need.
struct AttentionBatch {
    const std::int32_t* qo_indptr = nullptr;      // [s + 1]
    const std::int32_t* indptr = nullptr;         // [s + 1]
    const std::int32_t* indices = nullptr;        // [p]
    const std::int32_t* last_page_len = nullptr;  // [s]
    int num_seqs = 0;
    int num_tokens = 0;
    int num_heads = 0;
    float scale = 0.0f;
    int window = 0;  // > 0: a query sees only the last `window` KV tokens (PagedAttentionArgs)
};

// ---- attention_prefill.cu ----
// FlashAttention-2 style tensor-core kernel for every sequence with more than one query row.
// Sequences with exactly one query row are skipped (the decode kernel owns them).
bool prefill_attention_supports(int head_dim);
// Raises the dynamic shared memory limit of every prefill instantiation; call once per device
// before any launch (outside stream capture).
void init_prefill_attention();
// A block packs the `group` query heads of one kv head (GQA) as rows, 64 of them per 16-row
// fragment a warp owns (row_frags, 1 or up to prefill_max_row_frags(head_dim)): query tokens
// per tile = prefill_tile_queries(group, row_frags).
//   q, out [num_tokens, num_heads, head_dim] bf16; max_q_tiles = the largest
//   ceil(q_len / prefill_tile_queries(group, row_frags)) over the batch.
int prefill_max_row_frags(int head_dim);
int prefill_tile_queries(int group, int row_frags);
// KV tokens per prefill tile; a prefill split_tokens must be a multiple of it.
int prefill_tile_tokens();
struct PrefillLaunch {
    int max_q_tiles = 0;
    int row_frags = 1;
    std::int64_t max_kv_tokens = 0;  // the longest prefill sequence's KV, in whole pages
    // > 1: each (query tile, head) is cut into KV splits of split_tokens tokens that write
    // partial states, and launch_merge_prefill_splits combines them (short chunks, long KV).
    int num_splits = 1;
    int split_tokens = 0;
    float* partial_o = nullptr;   // [num_tokens, num_heads, num_splits, head_dim] f32
    float* partial_ml = nullptr;  // [num_tokens, num_heads, num_splits, 2] f32: max, sum
};
void launch_prefill_attention(const void* q, const PagedKvView& pages, const AttentionBatch& batch,
                              const PrefillLaunch& launch, void* out, cudaStream_t stream);
// Combines the split partials of every prefill row (sequences with more than one query row)
// into out (bf16); a no-op when launch.num_splits <= 1.
void launch_merge_prefill_splits(const PagedKvView& pages, const AttentionBatch& batch,
                                 const PrefillLaunch& launch, void* out, cudaStream_t stream);

// ---- attention_decode.cu ----
// One query row per thread block (times kv head and KV split) on CUDA cores, for any head_dim
// up to kMaxDecodeHeadDim and GQA groups up to kMaxDecodeGroup.
constexpr int kMaxDecodeHeadDim = 256;
constexpr int kMaxDecodeGroup = 16;
// Most KV splits of a decode row: the merge holds one split's statistics per lane.
constexpr int kMaxDecodeSplits = 32;

struct DecodeLaunch {
    // true: block x is a sequence; only sequences with exactly one query row are computed.
    // false: block x is a token row of the batch (any sequence), num_splits must be 1.
    bool per_sequence = true;
    int grid_rows = 0;       // num_seqs (per_sequence) or num_tokens
    int num_splits = 1;      // KV splits; > 1 writes partials and needs launch_merge_splits
    int split_tokens = 0;    // KV tokens per split (a multiple of the decode tile)
    float* partial_o = nullptr;   // [grid_rows, num_heads, num_splits, head_dim] f32
    float* partial_ml = nullptr;  // [grid_rows, num_heads, num_splits, 2] f32: max, sum
    // The tensor-core kernel's persistent grid: at most this many CTAs walk the
    // (split, sequence, kv head) items (CTAs resident at once on the device).
    int max_ctas = 0;
    // Tensor-core kernel: true, warps take whole items from item_counter[0] and count
    // themselves out in item_counter[1]; the last warp out zeroes both for the next launch
    // (two device ints, zero before the first). false: a CTA's warps share each item.
    bool warp_items = false;
    int* item_counter = nullptr;
    // Fast kernel (decode_fast_supports): the splits of a (sequence, kv head) count themselves
    // in split_arrivals[sequence * kv_heads + kv_head] and the last one in merges them and
    // zeroes its count (device ints, zero before the first launch), so launch_merge_splits
    // has nothing left to do. Null: the merge kernel merges.
    int* split_arrivals = nullptr;
    // Fast kernel: rope_write_kv fused in. With rope.positions set, q holds the rows
    // unrotated; each block rotates its heads' rows, and the block holding a sequence's newest
    // KV token first writes that token's K (rotated) and V, rows rope.k / rope.v [num_tokens,
    // kv_heads, head_dim], to slot rope.slots[row] (-1: padding, nothing written).
    struct Rope {
        const std::int32_t* positions = nullptr;  // [num_tokens]
        const float* cos = nullptr;               // [max_positions, head_dim / 2]
        const float* sin = nullptr;
        std::int64_t max_positions = 0;
        const std::int32_t* slots = nullptr;  // [num_tokens]
        const void* k = nullptr;  // bf16
        const void* v = nullptr;  // bf16
    } rope;
};
// A sequence whose KV fits in split 0 (kv_len <= split_tokens) gets its output from the decode
// kernel directly; splits past a sequence's end are neither written nor merged.
int decode_tile_tokens();
// The tensor-core, fast or generic kernel, whichever the launch and the shapes call for.
void launch_decode_attention(const void* q, const PagedKvView& pages, const AttentionBatch& batch,
                             const DecodeLaunch& launch, void* out, cudaStream_t stream);

// ---- attention_decode_fast.cu ----
// The bandwidth kernel of small decode batches, which can take DecodeLaunch::split_arrivals
// and DecodeLaunch::rope: per-sequence rows, head_dim 64/128/256, GQA groups up to 8.
bool decode_fast_supports(int head_dim, int group);
void launch_decode_fast_attention(const void* q, const PagedKvView& pages,
                                  const AttentionBatch& batch, const DecodeLaunch& launch,
                                  void* out, cudaStream_t stream);
// Combines the split partials of every single-row sequence whose KV spans more than one
// split into out (bf16); a no-op where the decode kernel merged them (split_arrivals).
void launch_merge_splits(const PagedKvView& pages, const AttentionBatch& batch,
                         const DecodeLaunch& launch, void* out, cudaStream_t stream);

// ---- attention_decode_tc.cu ----
// Tensor-core decode (head_dim 64/128, groups 1-16, per-sequence rows, launch.max_ctas > 0):
// one K/V read per (split, sequence, kv head) item serves the whole GQA group.
struct DecodeTcLimits {
    int ctas_per_sm[4] = {0, 0, 0, 0};  // per instantiation (head_dim 64/128 x group <= 8 / > 8)
};
bool decode_tc_supports(int head_dim, int group);
int decode_tc_warps_per_cta();
// Raises the shared-memory limit of every instantiation and measures how many CTAs of each fit
// on an SM; call once per device before any launch (outside stream capture).
DecodeTcLimits init_decode_tc_attention();
int decode_tc_ctas_per_sm(const DecodeTcLimits& limits, int head_dim, int group);
void launch_decode_tc_attention(const void* q, const PagedKvView& pages,
                                const AttentionBatch& batch, const DecodeLaunch& launch,
                                void* out, cudaStream_t stream);

}  // namespace inferscale::backends::cuda
