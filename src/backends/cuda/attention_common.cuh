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

// Element offset of KV token j, kv head `kv_head`, dim 0 inside the page tensor.
__device__ __forceinline__ std::int64_t kv_offset(const SeqInfo& s, int j, const PagedKvView& kv,
                                                  int kv_head) {
    const std::int32_t page = s.pages[j / kv.block_size];
    if (page < 0 || page >= kv.num_blocks) __trap();  // page id outside the pool: a bug
    const std::int64_t slot = static_cast<std::int64_t>(page) * kv.block_size + j % kv.block_size;
    return (slot * kv.kv_heads + kv_head) * kv.head_dim;
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
