// Dense retrieval's scan: scores = M q, then the k best rows.
//
// The product is memory-bound (it reads n * dim elements once and does one FMA per element), so it
// is its own kernel shaped for bandwidth: a warp per kRowsPerWarp rows, 16-byte loads, the loads of
// all its rows in flight at once, the query in shared memory. It writes one f32 score per row (4
// bytes against dim * 4 or dim * 2 read).
//
// Selection runs in passes over (score, row) pairs: a block of kSortThreads bitonic-sorts a chunk
// of kChunk pairs in shared memory, best first, and keeps its first k; k <= kChunk / 2, so each
// pass at least halves the candidates until one block holds them all, and that block writes the
// result. 10k rows and k = 10: one product and two selection passes.

#include <cfloat>
#include <climits>
#include <cmath>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kScoreThreads = 256;
constexpr int kRowsPerWarp = 4;
constexpr int kRowsPerScoreBlock = kScoreThreads / 32 * kRowsPerWarp;
constexpr int kSortThreads = 1024;
constexpr int kChunk = 2 * kSortThreads;
static_assert(tensor::Backend::kDotTopKMax <= kChunk / 2, "a pass must halve its candidates");

// NaN ranks below every number (as the CPU backend's selection).
__device__ __forceinline__ float rank_value(float s) { return isnan(s) ? -INFINITY : s; }

__device__ __forceinline__ bool better(float sa, int ra, float sb, int rb) {
    const float a = rank_value(sa), b = rank_value(sb);
    return a > b || (a == b && ra < rb);
}

__device__ __forceinline__ float dot4(float4 v, float4 q) {
    return fmaf(v.w, q.w, fmaf(v.z, q.z, fmaf(v.y, q.y, v.x * q.x)));
}

// Eight f16 elements of a row (one 16-byte load) against eight query elements.
__device__ __forceinline__ float dot8(uint4 packed, float4 q0, float4 q1) {
    const auto* h = reinterpret_cast<const __half2*>(&packed);
    const float2 a = __half22float2(h[0]), b = __half22float2(h[1]);
    const float2 c = __half22float2(h[2]), d = __half22float2(h[3]);
    return dot4(make_float4(a.x, a.y, b.x, b.y), q0) + dot4(make_float4(c.x, c.y, d.x, d.y), q1);
}

// scores[r] = matrix[r, :] . query. Vec: rows are read 16 bytes at a time (dim a multiple of 4 f32
// or 8 f16, 16-byte aligned rows); otherwise one element at a time.
template <class T, bool Vec>
__global__ void __launch_bounds__(kScoreThreads)
    dot_scores_kernel(const T* __restrict__ matrix, const float* __restrict__ query, int n, int dim,
                      float* __restrict__ scores) {
    extern __shared__ float4 q_s4[];  // [dim] f32, 16-byte aligned
    float* q_s = reinterpret_cast<float*>(q_s4);
    for (int i = threadIdx.x; i < dim; i += kScoreThreads) q_s[i] = query[i];
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const int first = blockIdx.x * kRowsPerScoreBlock + (threadIdx.x >> 5) * kRowsPerWarp;
    float acc[kRowsPerWarp] = {};
    constexpr int kPerLoad = 16 / sizeof(T);
    if constexpr (Vec) {
        const int loads = dim / kPerLoad;
        for (int i = lane; i < loads; i += 32) {
            uint4 v[kRowsPerWarp];
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r) {
                const int row = min(first + r, n - 1);  // a past-the-end row re-reads the last
                v[r] = reinterpret_cast<const uint4*>(matrix +
                                                      static_cast<std::int64_t>(row) * dim)[i];
            }
            // The query as 16-byte shared-memory reads: no bank conflicts across the warp.
            const auto* q4 = reinterpret_cast<const float4*>(q_s) + i * (kPerLoad / 4);
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r) {
                if constexpr (sizeof(T) == 4) {
                    acc[r] += dot4(*reinterpret_cast<const float4*>(&v[r]), q4[0]);
                } else {
                    acc[r] += dot8(v[r], q4[0], q4[1]);
                }
            }
        }
    } else {
        for (int i = lane; i < dim; i += 32) {
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r) {
                const int row = min(first + r, n - 1);
                acc[r] =
                    fmaf(to_f32(matrix[static_cast<std::int64_t>(row) * dim + i]), q_s[i], acc[r]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
        for (int offset = 16; offset > 0; offset >>= 1) {
            acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], offset);
        }
        if (lane == 0 && first + r < n) scores[first + r] = acc[r];
    }
}

// One selection pass: block b sorts pairs [b * kChunk, (b + 1) * kChunk) of the m inputs (rows
// null: a pair's row is its index) and writes its first `keep` to out[b * keep ...]. Pairs past m
// are padding (-inf, INT_MAX), which every real pair beats; `last` marks the final pass, which
// writes padding as row -1.
__global__ void __launch_bounds__(kSortThreads)
    select_kernel(const float* __restrict__ in_scores, const int* __restrict__ in_rows, int m,
                  int keep, bool last, float* __restrict__ out_scores, int* __restrict__ out_rows) {
    __shared__ float s[kChunk];
    __shared__ int r[kChunk];
    const int base = blockIdx.x * kChunk;
    for (int t = threadIdx.x; t < kChunk; t += kSortThreads) {
        const int i = base + t;
        s[t] = i < m ? in_scores[i] : -INFINITY;
        r[t] = i < m ? (in_rows != nullptr ? in_rows[i] : i) : INT_MAX;
    }
    __syncthreads();
    for (int size = 2; size <= kChunk; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            const int t = threadIdx.x;
            const int i = 2 * t - (t & (stride - 1)), j = i + stride;
            const bool best_first = (i & size) == 0;  // every run ends up best first
            const float si = s[i], sj = s[j];
            const int ri = r[i], rj = r[j];
            if (better(sj, rj, si, ri) == best_first) {
                s[i] = sj;
                s[j] = si;
                r[i] = rj;
                r[j] = ri;
            }
            __syncthreads();
        }
    }
    for (int t = threadIdx.x; t < keep; t += kSortThreads) {
        out_scores[blockIdx.x * keep + t] = s[t];
        out_rows[blockIdx.x * keep + t] = last && r[t] == INT_MAX ? -1 : r[t];
    }
}

int ceil_div(std::int64_t a, std::int64_t b) { return static_cast<int>((a + b - 1) / b); }

// Candidate pairs after the first selection pass of n rows (none when one pass finishes).
std::int64_t first_pass_candidates(std::int64_t n, std::int64_t k) {
    const int blocks = ceil_div(n, kChunk);
    return blocks > 1 ? blocks * k : 0;
}

}  // namespace

void CudaBackend::dot_top_k(const tensor::Tensor& matrix, const tensor::Tensor& query,
                            tensor::Tensor rows, tensor::Tensor scores) {
    tensor::check_dot_top_k_args(matrix, query, rows, scores, kDotTopKMax);
    for (const tensor::Tensor* t :
         std::initializer_list<const tensor::Tensor*>{&matrix, &query, &rows, &scores}) {
        check_on_device(*t, "dot_top_k operand");
    }
    const std::int64_t n = matrix.shape[0], dim = matrix.shape[1], k = rows.shape[0];
    IS_CHECK(n < INT_MAX && dim <= 12288) << "dot_top_k: n " << n << " dim " << dim;
    activate();

    // Workspace: the n scores, then two candidate buffers (scores, rows) for the passes.
    const std::int64_t candidates = first_pass_candidates(n, k);
    const auto align = [](std::size_t b) { return (b + 255) / 256 * 256; };
    const std::size_t score_bytes = align(static_cast<std::size_t>(n) * sizeof(float));
    const std::size_t pair_bytes = align(static_cast<std::size_t>(candidates) * sizeof(float));
    const std::size_t need = score_bytes + 4 * pair_bytes;
    if (need > dot_top_k_workspace_bytes_) {
        IS_CHECK(!capturing_) << "dot_top_k: its workspace must grow outside graph capture";
        synchronize();  // earlier searches may still read the old workspace
        if (dot_top_k_workspace_ != nullptr) IS_CUDA_CHECK(cudaFree(dot_top_k_workspace_));
        dot_top_k_workspace_ = nullptr;
        dot_top_k_workspace_bytes_ = 0;
        IS_CUDA_CHECK(cudaMalloc(&dot_top_k_workspace_, need));
        dot_top_k_workspace_bytes_ = need;
    }
    auto* base = static_cast<char*>(dot_top_k_workspace_);
    auto* all_scores = reinterpret_cast<float*>(base);
    float* cand_scores[2] = {reinterpret_cast<float*>(base + score_bytes),
                             reinterpret_cast<float*>(base + score_bytes + pair_bytes)};
    int* cand_rows[2] = {reinterpret_cast<int*>(base + score_bytes + 2 * pair_bytes),
                         reinterpret_cast<int*>(base + score_bytes + 3 * pair_bytes)};

    if (n > 0) {
        const dim3 grid(ceil_div(n, kRowsPerScoreBlock));
        const std::size_t smem = static_cast<std::size_t>(dim) * sizeof(float);
        const bool aligned = reinterpret_cast<std::uintptr_t>(matrix.data) % 16 == 0;
        const auto launch = [&](auto kernel, const auto* m) {
            kernel<<<grid, kScoreThreads, smem, stream_>>>(
                m, query.as<float>(), static_cast<int>(n), static_cast<int>(dim), all_scores);
        };
        if (matrix.dtype == tensor::DType::F32) {
            const auto* m = matrix.as<float>();
            if (aligned && dim % 4 == 0) {
                launch(dot_scores_kernel<float, true>, m);
            } else {
                launch(dot_scores_kernel<float, false>, m);
            }
        } else {
            const auto* m = matrix.as<__half>();
            if (aligned && dim % 8 == 0) {
                launch(dot_scores_kernel<__half, true>, m);
            } else {
                launch(dot_scores_kernel<__half, false>, m);
            }
        }
        IS_CUDA_CHECK_LAUNCH();
    }

    const float* in_scores = all_scores;
    const int* in_rows = nullptr;
    std::int64_t m = n;
    for (int pass = 0;; ++pass) {
        const int blocks = std::max(1, ceil_div(m, kChunk));
        const bool last = blocks == 1;
        float* out_s = last ? scores.as<float>() : cand_scores[pass % 2];
        int* out_r = last ? rows.as<std::int32_t>() : cand_rows[pass % 2];
        select_kernel<<<blocks, kSortThreads, 0, stream_>>>(
            in_scores, in_rows, static_cast<int>(m), static_cast<int>(k), last, out_s, out_r);
        IS_CUDA_CHECK_LAUNCH();
        if (last) break;
        in_scores = out_s;
        in_rows = out_r;
        m = static_cast<std::int64_t>(blocks) * k;
    }
}

}  // namespace inferscale::backends::cuda
