#pragma once
// Argument structs for the Backend ops that take more than a couple of tensors. All tensors live
// on the backend's device; index tensors are i32. Shapes use these names:
//   n = tokens in the batch, s = sequences, p = pages referenced by the batch,
//   h = query heads, kvh = kv heads, d = head_dim, bs = block (page) size.

#include <cstdint>
#include <span>

#include "tensor/tensor.h"

namespace inferscale::tensor {

// One output of Backend::linear: y = x w^T (+ bias).
struct LinearTarget {
    Tensor w;     // [out, in] weight
    Tensor bias;  // [out] or empty
    Tensor y;     // [n, out]
};

// cos/sin of position * inv_freq for every position up to the table size, half a head wide:
// the rotate_half convention uses the same angle for dims i and i + d/2.
struct RopeTables {
    Tensor cos;  // [max_positions, d / 2] f32
    Tensor sin;  // [max_positions, d / 2] f32
};

// Paged KV for one layer. A page holds bs consecutive tokens of one sequence. FP8 pages
// (F8_E4M3) hold value / scale per KV head: a write divides by the head's scale and rounds,
// a read multiplies back (KvStorage keeps the scales).
struct KvPages {
    Tensor k;          // [num_blocks, bs, kvh, d] kv dtype
    Tensor v;          // [num_blocks, bs, kvh, d] kv dtype
    Tensor k_scale{};  // [kvh] f32, with F8_E4M3 pages only
    Tensor v_scale{};  // [kvh] f32, with F8_E4M3 pages only
};

// Page tables of the batch in CSR form plus where each sequence's queries sit in the batch.
// Sequence i owns pages indices[indptr[i] .. indptr[i+1]); its KV length after this step is
// (pages - 1) * bs + last_page_len[i]; its queries are rows qo_indptr[i] .. qo_indptr[i+1] of q
// and are the last tokens of its KV (causal: query j sees KV 0 .. kv_len - q_len + j).
struct PagedAttentionArgs {
    Tensor qo_indptr;      // [s + 1] i32
    Tensor indptr;         // [s + 1] i32
    Tensor indices;        // [p] i32
    Tensor last_page_len;  // [s] i32
    // Host copies of the same small arrays: the CPU backend reads these, a GPU backend uses
    // them to size its launch without a device round trip.
    const std::int32_t* host_qo_indptr = nullptr;  // [s + 1]
    const std::int32_t* host_indptr = nullptr;     // [s + 1]
    int num_seqs = 0;
    float scale = 0.0f;  // softmax scale, usually 1 / sqrt(d)
    // Sliding-window attention: > 0, query at KV index i sees only KV indices > i - window
    // (the last `window` tokens, itself included); 0, the whole causal prefix.
    std::int32_t window = 0;
    // Replayable decode: when > 0, every sequence has exactly one query row and a KV length of
    // at most this many tokens, and a GPU backend sizes its launches from this bound and
    // num_seqs alone, so one recorded launch serves every step with the same num_seqs.
    std::int32_t fixed_max_kv_len = 0;
    // The head rows of q and k hold llama.cpp's interleaved rotary pairs un-interleaved (a
    // llama/mistral GGUF, whose Q/K rows the loader un-permuted): element i of ggml's row is
    // element (i % 2) * d / 2 + i / 2 here. Only a backend reproducing ggml's summation order
    // reads it (the CPU backend's ggml arithmetic); a plain dot product is the same either way.
    bool qk_ggml_interleaved = false;
};

// Backend::sequence_attention: bidirectional attention within each of s sequences packed back
// to back without padding (an encoder's batch): rows seq_indptr[i] .. seq_indptr[i+1] of q attend
// to the same rows of k and v, each head on its own (as many kv heads as query heads).
struct SequenceAttentionArgs {
    Tensor seq_indptr;                              // [s + 1] i32, seq_indptr[0] = 0, [s] = n
    const std::int32_t* host_seq_indptr = nullptr;  // [s + 1], the same on the host
    int num_seqs = 0;
    int max_seq_len = 0;  // the longest sequence's rows (sizes a GPU launch)
    float scale = 0.0f;   // softmax scale, usually 1 / sqrt(d)
};

// Backend::rope: rotates q, and k when given, in place by the angles of `positions` (HF
// rotate_half pairing: dim i with dim i + d/2; positions beyond the tables are a bug); with
// pages, then Backend::write_kv(k, v, slots, pages); with attention, then
// Backend::paged_attention(q, pages, *attention, out). A backend that fuses the attention in
// need not rotate q and k in place: only out and the pages are results then.
struct RopeArgs {
    Tensor q;          // [n, h, d]
    Tensor k{};        // [n, kvh, d] or empty
    Tensor positions;  // [n] i32
    RopeTables tables;
    Tensor v{};                                     // [n, kvh, d], with pages
    Tensor slots{};                                 // [n] i32, with pages
    KvPages pages{};                                // empty: no KV write
    const PagedAttentionArgs* attention = nullptr;  // null: no attention; needs pages
    Tensor out{};                                   // [n, h, d], with attention
};

// What Backend::linear does with the targets' outputs after the matmul:
//   None.
//   SwiGLU: the targets are gate then up, of one shape: gate.y = silu(gate.y) * up.y, as
//     Backend::swiglu. A backend that fuses it need not write up.y.
//   GeGLU: the same with gelu (tanh approximation) for silu, as Backend::geglu.
//   RopeAttention (RoPE, KV write and attention): the targets are q, k then v, and `rope` views
//     their outputs as its q, k and v ([n, heads, d]): Backend::rope(*rope), which must have
//     pages and attention. A backend that fuses it need not write the targets' outputs: only
//     rope->out and the pages are results.
enum class LinearEpilogue : std::uint8_t { None, SwiGLU, GeGLU, RopeAttention };

// Backend::linear: y = x w^T (+ bias) for every target (which share x, as q/k/v and gate/up
// do: a backend may run them as one launch), then the epilogue.
struct LinearArgs {
    Tensor x;  // [n, in]
    std::span<const LinearTarget> targets;
    LinearEpilogue epilogue = LinearEpilogue::None;
    const RopeArgs* rope = nullptr;  // RopeAttention's
};

// Memory injection: copy pre-RoPE K and V rows of several chunks into paged slots of every
// layer, rotating K to its target position on the way (Backend::inject_chunks). A chunk is one
// contiguous tensor [num_layers][2][t_c][kvh][d] in the pages' dtype (index 0 of dim 1 is K
// before RoPE, 1 is V); it may live anywhere on the device, hence the address table. Per layer the
// pages are at layer0 + l * layer_stride elements (K and V alike), as KvStorage lays them out;
// FP8 chunks hold values over the pages' scales, whose layer l sits scale_stride elements past
// layer0's.
// Only layers [first_layer, first_layer + num_layers) are written, so a caller can inject layer
// group by layer group as each group's bytes arrive. Sizes are small (one entry per token or
// chunk); the KV rows are the traffic.
struct InjectArgs {
    Tensor chunk_addrs;   // [c, 2] i32: each chunk's device address, low word first
    Tensor chunk_tokens;  // [c] i32: t_c, rows of chunk c
    Tensor src_chunk;     // [n] i32: chunk of injected token i
    Tensor src_row;       // [n] i32: row of token i inside its chunk
    Tensor positions;     // [n] i32: RoPE position token i is rotated to
    Tensor slots;         // [n] i32: flat page slot (block * bs + offset) token i goes to
    KvPages layer0;       // pages of layer 0
    std::int64_t layer_stride = 0;  // elements from layer l's pages to layer l + 1's
    std::int64_t scale_stride = 0;  // elements from layer l's scales to layer l + 1's (FP8)
    std::int64_t first_layer = 0;
    std::int64_t num_layers = 0;
};

}  // namespace inferscale::tensor
