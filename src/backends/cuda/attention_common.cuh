#pragma once
// Page-table addressing shared by the prefill and decode attention kernels. A sequence's KV
// token j lives in page indices[indptr[s] + j / bs] at offset j % bs; the queries of sequence
// s are the last q_len tokens of its KV, so query row r (0-based inside the sequence) sees KV
// tokens 0 .. kv_len - q_len + r (causal).

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {

// exp2 is what the hardware computes; scores are pre-multiplied by log2(e) to use it.
constexpr float kLog2e = 1.4426950408889634f;

struct SeqInfo {
    int q_start = 0;   // first row of the sequence's queries in q
    int q_len = 0;     // query rows of the sequence in this batch
    int kv_len = 0;    // KV tokens after this step, the new ones included
    const std::int32_t* pages = nullptr;  // the sequence's page ids, in KV order
};

__device__ __forceinline__ SeqInfo load_seq(const AttentionBatch& b, int s,
                                            const PagedKvView& kv) {
    SeqInfo info;
    info.q_start = b.qo_indptr[s];
    info.q_len = b.qo_indptr[s + 1] - info.q_start;
    const int first_page = b.indptr[s];
    const int num_pages = b.indptr[s + 1] - first_page;
    info.kv_len = (num_pages - 1) * kv.block_size + b.last_page_len[s];
    info.pages = b.indices + first_page;
    // Queries must be the tail of the KV; anything else is malformed metadata (a bug).
    if (info.q_len > 0 && (num_pages <= 0 || info.kv_len < info.q_len)) __trap();
    return info;
}

// Element offsets of one sequence's KV rows for one kv head through its page table, with the
// per-thread constants hoisted: a power-of-two block size (the usual 16) splits a KV index
// with a shift and a mask instead of an integer division. `unit` is the element type's width
// (8 for offsets counted in 16-byte chunks of bf16).
struct PagedRows {
    const std::int32_t* pages;
    std::int64_t num_blocks, row_stride, col;
    int block_size, shift;
    bool pow2;

    __device__ __forceinline__ PagedRows(const SeqInfo& s, const PagedKvView& kv, int kv_head,
                                         int unit = 1) {
        pages = s.pages;
        num_blocks = kv.num_blocks;
        row_stride = static_cast<std::int64_t>(kv.kv_heads) * kv.head_dim / unit;
        col = static_cast<std::int64_t>(kv_head) * kv.head_dim / unit;
        block_size = kv.block_size;
        shift = __ffs(kv.block_size) - 1;
        pow2 = (kv.block_size & (kv.block_size - 1)) == 0;
    }

    // Offset of dim 0 of KV token j.
    __device__ __forceinline__ std::int64_t operator()(int j) const {
        const int index = pow2 ? j >> shift : j / block_size;
        const int in_page = pow2 ? j & (block_size - 1) : j - index * block_size;
        const std::int32_t page = pages[index];
        if (page < 0 || page >= num_blocks) __trap();  // page id outside the pool: a bug
        return (static_cast<std::int64_t>(page) * block_size + in_page) * row_stride + col;
    }
};

// The factors kv head `kv_head`'s stored K and V values carry: its scales with FP8 pages, 1 with
// bf16 ones. Attention folds k into the score scale and v into the output.
struct HeadScales {
    float k = 1.0f, v = 1.0f;
};
__device__ __forceinline__ HeadScales head_scales(const PagedKvView& kv, int kv_head) {
    return kv.fp8 ? HeadScales{kv.k_scale[kv_head], kv.v_scale[kv_head]} : HeadScales{};
}

// The first KV index a query at KV index `pos` sees: 0, or the start of its window.
__device__ __forceinline__ int window_start(const AttentionBatch& b, int pos) {
    return b.window > 0 ? max(0, pos - b.window + 1) : 0;
}

// The sequence whose query rows hold batch row `row` (upper bound over qo_indptr, minus one).
__device__ __forceinline__ int find_seq(const std::int32_t* qo_indptr, int num_seqs, int row) {
    int lo = 0, hi = num_seqs + 1;  // first index with qo_indptr[i] > row lies in [lo, hi)
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (qo_indptr[mid] > row) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return lo - 1;
}

}  // namespace inferscale::backends::cuda
