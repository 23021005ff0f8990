// Prefill attention in the FlashAttention-2 pattern: a block owns a tile of kBlockM query rows
// of one sequence and one query head, walks the sequence's KV in tiles of kBlockN tokens
// gathered through the page table, and keeps an online softmax, so no score matrix larger than
// one tile ever exists. Tensor cores do both products through WMMA (bf16 in, f32 accumulate).
//
// Each of the four warps owns 16 query rows end to end (scores, softmax, output), so inside a
// KV tile only the K/V loads need block-wide barriers. WMMA's register layout of an accumulator
// is unspecified, so the running output lives in shared memory as f32: a warp rescales its rows
// there after the softmax step and reloads them as the accumulator of the P x V product.
// Rows are padded (+8 bf16 / +4 f32) to spread WMMA's row accesses over the banks.
//
// Short chunks over a long KV (a question after injected memory) give too few (tile, head)
// blocks to fill the GPU, so the plan may split the KV as flash-decoding does: grid x is then
// (query tile, split), each split walks split_tokens KV tokens (a multiple of kBlockN, so
// tiles never straddle splits) and stores its rows' unnormalized output with (max, sum) in the
// workspace; merge_prefill_splits_kernel weighs them together. The causal mask is unchanged
// (it is per row), and a row whose visible KV ends before a split's first token leaves an
// empty state there that the merge never reads.

#include <mma.h>

#include <algorithm>
#include <cmath>

#include "backends/cuda/attention_common.cuh"
#include "backends/cuda/cuda_check.h"

namespace inferscale::backends::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kBlockM = 64;  // query rows per block: 4 warps x 16
constexpr int kBlockN = 64;  // KV tokens per tile
constexpr int kThreads = 128;

template <int D>
struct PrefillSmem {
    static constexpr int kQkvLd = D + 8;      // bf16 row stride of the Q, K and V tiles
    static constexpr int kSLd = kBlockN + 4;  // f32 row stride of the scores
    static constexpr int kPLd = kBlockN + 8;  // bf16 row stride of the probabilities
    static constexpr int kOLd = D + 4;        // f32 row stride of the running output
    static constexpr int kQ = 0;
    static constexpr int kK = kQ + kBlockM * kQkvLd * 2;
    static constexpr int kV = kK + kBlockN * kQkvLd * 2;
    static constexpr int kS = kV + kBlockN * kQkvLd * 2;
    static constexpr int kP = kS + kBlockM * kSLd * 4;
    static constexpr int kO = kP + kBlockM * kPLd * 2;
    static constexpr int kBytes = kO + kBlockM * kOLd * 4;
    static_assert(kK % 128 == 0 && kV % 128 == 0 && kS % 128 == 0 && kP % 128 == 0 &&
                      kO % 128 == 0,
                  "WMMA needs 32-byte aligned tiles");
};

template <int D>
__global__ void __launch_bounds__(kThreads)
    prefill_attention_kernel(const bf16* __restrict__ q, PagedKvView kv, AttentionBatch batch,
                             PrefillLaunch launch, bf16* __restrict__ out) {
    static_assert(D % 16 == 0, "WMMA tiles are 16 wide");
    using L = PrefillSmem<D>;
    constexpr int kVecs = D / 8;  // 16-byte vectors per row

    const SeqInfo s = load_seq(batch, blockIdx.y, kv);
    if (s.q_len <= 1) return;  // empty, or a decode row: the decode kernel owns it
    const int split = static_cast<int>(blockIdx.x) % launch.num_splits;
    const int row0 = static_cast<int>(blockIdx.x) / launch.num_splits * kBlockM;
    if (row0 >= s.q_len) return;
    const int rows = min(kBlockM, s.q_len - row0);
    const int first_pos = s.kv_len - s.q_len + row0;  // KV index of the tile's first query
    const int kv_end = first_pos + rows;               // KV tokens the whole tile needs
    const bool split_mode = launch.num_splits > 1;
    const int kv_begin = split_mode ? split * launch.split_tokens : 0;
    if (kv_begin >= kv_end) return;  // past this tile's causal end: the merge skips it
    const int kv_stop = split_mode ? min(kv_end, kv_begin + launch.split_tokens) : kv_end;
    const int head = blockIdx.z;
    const int kv_head = head / (batch.num_heads / kv.kv_heads);

    extern __shared__ __align__(128) unsigned char smem[];
    bf16* q_s = reinterpret_cast<bf16*>(smem + L::kQ);
    bf16* k_s = reinterpret_cast<bf16*>(smem + L::kK);
    bf16* v_s = reinterpret_cast<bf16*>(smem + L::kV);
    float* s_s = reinterpret_cast<float*>(smem + L::kS);
    bf16* p_s = reinterpret_cast<bf16*>(smem + L::kP);
    float* o_s = reinterpret_cast<float*>(smem + L::kO);

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const uint4 zero = make_uint4(0, 0, 0, 0);

    for (int idx = tid; idx < kBlockM * kVecs; idx += kThreads) {
        const int r = idx / kVecs, c = (idx % kVecs) * 8;
        uint4 val = zero;
        if (r < rows) {
            const std::int64_t token = s.q_start + row0 + r;
            val = *reinterpret_cast<const uint4*>(q + (token * batch.num_heads + head) * D + c);
        }
        *reinterpret_cast<uint4*>(q_s + r * L::kQkvLd + c) = val;
    }
    for (int idx = tid; idx < kBlockM * L::kOLd; idx += kThreads) o_s[idx] = 0.0f;

    // Two lanes share one row of this warp: lane parity picks the half of the columns.
    const int my_row = warp * 16 + (lane >> 1);
    const int half = lane & 1;
    const bool row_valid = my_row < rows;
    const int my_pos = first_pos + my_row;  // last KV index this row may see
    const float scale_log2 = batch.scale * kLog2e;
    float row_max = -INFINITY, row_sum = 0.0f;

    for (int kv0 = kv_begin; kv0 < kv_stop; kv0 += kBlockN) {
        __syncthreads();  // every warp is done with the previous K/V tile (and Q/O are set)
        for (int idx = tid; idx < kBlockN * kVecs; idx += kThreads) {
            const int j = idx / kVecs, c = (idx % kVecs) * 8;
            uint4 kval = zero, vval = zero;  // zeros past the end keep NaNs out of P x V
            if (kv0 + j < kv_stop) {
                const std::int64_t off = kv_offset(s, kv0 + j, kv, kv_head) + c;
                kval = *reinterpret_cast<const uint4*>(static_cast<const bf16*>(kv.k) + off);
                vval = *reinterpret_cast<const uint4*>(static_cast<const bf16*>(kv.v) + off);
            }
            *reinterpret_cast<uint4*>(k_s + j * L::kQkvLd + c) = kval;
            *reinterpret_cast<uint4*>(v_s + j * L::kQkvLd + c) = vval;
        }
        __syncthreads();

        // S = Q K^T for this warp's 16 rows.
        {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kBlockN / 16];
#pragma unroll
            for (int n = 0; n < kBlockN / 16; ++n) wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
            for (int k0 = 0; k0 < D; k0 += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
                wmma::load_matrix_sync(a, q_s + warp * 16 * L::kQkvLd + k0, L::kQkvLd);
#pragma unroll
                for (int n = 0; n < kBlockN / 16; ++n) {
                    // K^T as a column-major matrix is K's rows read in place.
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b;
                    wmma::load_matrix_sync(b, k_s + n * 16 * L::kQkvLd + k0, L::kQkvLd);
                    wmma::mma_sync(acc[n], a, b, acc[n]);
                }
            }
#pragma unroll
            for (int n = 0; n < kBlockN / 16; ++n) {
                wmma::store_matrix_sync(s_s + warp * 16 * L::kSLd + n * 16, acc[n], L::kSLd,
                                        wmma::mem_row_major);
            }
        }
        __syncwarp();

        // Online softmax over this tile, causal mask included.
        {
            float* srow = s_s + my_row * L::kSLd;
            bf16* prow = p_s + my_row * L::kPLd;
            float tile_max = -INFINITY;
            for (int c = half * 32; c < half * 32 + 32; ++c) {
                const bool visible = row_valid && kv0 + c <= my_pos;
                const float x = visible ? srow[c] * scale_log2 : -INFINITY;
                srow[c] = x;
                tile_max = fmaxf(tile_max, x);
            }
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
            const float new_max = fmaxf(row_max, tile_max);
            // A row with nothing visible yet keeps max -inf; subtracting 0 keeps exp2 at 0.
            const float base = new_max == -INFINITY ? 0.0f : new_max;
            const float correction = exp2f(row_max - base);
            float sum = 0.0f;
            for (int c = half * 32; c < half * 32 + 32; ++c) {
                const bf16 p = __float2bfloat16_rn(exp2f(srow[c] - base));
                prow[c] = p;
                sum += __bfloat162float(p);  // the sum of what P x V will actually weigh
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            row_sum = row_sum * correction + sum;
            row_max = new_max;
            float* orow = o_s + my_row * L::kOLd;
            for (int c = half * (D / 2); c < (half + 1) * (D / 2); ++c) orow[c] *= correction;
        }
        __syncwarp();

        // O += P V for this warp's rows.
#pragma unroll 1
        for (int n0 = 0; n0 < D; n0 += 16) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> o;
            float* o_tile = o_s + warp * 16 * L::kOLd + n0;
            wmma::load_matrix_sync(o, o_tile, L::kOLd, wmma::mem_row_major);
#pragma unroll
            for (int k0 = 0; k0 < kBlockN; k0 += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b;
                wmma::load_matrix_sync(a, p_s + warp * 16 * L::kPLd + k0, L::kPLd);
                wmma::load_matrix_sync(b, v_s + k0 * L::kQkvLd + n0, L::kQkvLd);
                wmma::mma_sync(o, a, b, o);
            }
            wmma::store_matrix_sync(o_tile, o, L::kOLd, wmma::mem_row_major);
        }
        __syncwarp();
    }

    if (split_mode) {
        // The unnormalized rows go out as 16-byte vectors once every warp is done with o_s.
        if (row_valid && half == 0) {
            const std::int64_t slot =
                (static_cast<std::int64_t>(s.q_start + row0 + my_row) * batch.num_heads + head) *
                    launch.num_splits +
                split;
            launch.partial_ml[slot * 2] = row_max;
            launch.partial_ml[slot * 2 + 1] = row_sum;
        }
        __syncthreads();
        constexpr int kF4 = D / 4;
        for (int idx = tid; idx < rows * kF4; idx += kThreads) {
            const int r = idx / kF4, c = (idx % kF4) * 4;
            const std::int64_t slot =
                (static_cast<std::int64_t>(s.q_start + row0 + r) * batch.num_heads + head) *
                    launch.num_splits +
                split;
            *reinterpret_cast<float4*>(launch.partial_o + slot * D + c) =
                *reinterpret_cast<const float4*>(o_s + r * L::kOLd + c);
        }
        return;
    }
    if (row_valid) {
        // Every valid row sees KV token 0 at least, so row_sum > 0.
        const float inv = 1.0f / row_sum;
        const std::int64_t token = s.q_start + row0 + my_row;
        bf16* dst = out + (token * batch.num_heads + head) * D;
        const float* orow = o_s + my_row * L::kOLd;
        for (int c = half * (D / 2); c < (half + 1) * (D / 2); ++c) {
            dst[c] = __float2bfloat16_rn(orow[c] * inv);
        }
    }
}

// One block per (batch row, head); rows of decode sequences are left to the decode path. Only
// the splits that start at or before the row's causal end hold a state for it.
__global__ void merge_prefill_splits_kernel(PagedKvView kv, AttentionBatch batch,
                                            PrefillLaunch launch, bf16* __restrict__ out) {
    const int row = blockIdx.x, head = blockIdx.y;
    const int seq = find_seq(batch.qo_indptr, batch.num_seqs, row);
    const SeqInfo s = load_seq(batch, seq, kv);
    if (s.q_len <= 1) return;
    const int my_pos = s.kv_len - s.q_len + (row - s.q_start);
    const int used = min(launch.num_splits, my_pos / launch.split_tokens + 1);
    const int d = kv.head_dim;
    const std::int64_t first =
        (static_cast<std::int64_t>(row) * batch.num_heads + head) * launch.num_splits;
    const float* __restrict__ ml = launch.partial_ml + first * 2;
    float global_max = -INFINITY;
    for (int i = 0; i < used; ++i) global_max = fmaxf(global_max, ml[2 * i]);
    float total = 0.0f;
    for (int i = 0; i < used; ++i) total += ml[2 * i + 1] * exp2f(ml[2 * i] - global_max);
    const float inv = 1.0f / total;  // split 0 always holds KV token 0, so total > 0
    const float* __restrict__ po = launch.partial_o + first * d;
    bf16* dst = out + (static_cast<std::int64_t>(row) * batch.num_heads + head) * d;
    for (int c = threadIdx.x * 4; c < d; c += blockDim.x * 4) {
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int i = 0; i < used; ++i) {
            const float w = exp2f(ml[2 * i] - global_max);
            const float4 v = *reinterpret_cast<const float4*>(po + static_cast<std::int64_t>(i) * d + c);
            acc.x += v.x * w;
            acc.y += v.y * w;
            acc.z += v.z * w;
            acc.w += v.w * w;
        }
        __nv_bfloat162 lo = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
        __nv_bfloat162 hi = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
        *reinterpret_cast<__nv_bfloat162*>(dst + c) = lo;
        *reinterpret_cast<__nv_bfloat162*>(dst + c + 2) = hi;
    }
}

template <int D>
void set_smem_limit() {
    IS_CUDA_CHECK(cudaFuncSetAttribute(prefill_attention_kernel<D>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       PrefillSmem<D>::kBytes));
}

template <int D>
void launch_typed(const void* q, const PagedKvView& pages, const AttentionBatch& batch,
                  const PrefillLaunch& launch, void* out, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>(launch.max_q_tiles * launch.num_splits),
                    static_cast<unsigned>(batch.num_seqs), static_cast<unsigned>(batch.num_heads));
    prefill_attention_kernel<D><<<grid, kThreads, PrefillSmem<D>::kBytes, stream>>>(
        static_cast<const bf16*>(q), pages, batch, launch, static_cast<bf16*>(out));
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool prefill_attention_supports(int head_dim) {
    return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

int prefill_tile_rows() { return kBlockM; }

int prefill_tile_tokens() { return kBlockN; }

void init_prefill_attention() {
    set_smem_limit<64>();
    set_smem_limit<128>();
    set_smem_limit<256>();
}

void launch_prefill_attention(const void* q, const PagedKvView& pages, const AttentionBatch& batch,
                              const PrefillLaunch& launch, void* out, cudaStream_t stream) {
    if (launch.max_q_tiles <= 0 || batch.num_seqs <= 0) return;
    IS_CHECK(batch.num_seqs <= 65535 && batch.num_heads <= 65535) << "prefill grid";
    IS_CHECK(launch.num_splits >= 1 &&
             (launch.num_splits == 1 ||
              (launch.partial_o != nullptr && launch.partial_ml != nullptr &&
               launch.split_tokens > 0 && launch.split_tokens % kBlockN == 0 &&
               reinterpret_cast<std::uintptr_t>(launch.partial_o) % 16 == 0)))
        << "prefill split workspace";
    switch (pages.head_dim) {
        case 64: launch_typed<64>(q, pages, batch, launch, out, stream); break;
        case 128: launch_typed<128>(q, pages, batch, launch, out, stream); break;
        case 256: launch_typed<256>(q, pages, batch, launch, out, stream); break;
        default: IS_UNREACHABLE() << "prefill head_dim " << pages.head_dim;
    }
}

void launch_merge_prefill_splits(const PagedKvView& pages, const AttentionBatch& batch,
                                 const PrefillLaunch& launch, void* out, cudaStream_t stream) {
    if (launch.num_splits <= 1 || launch.max_q_tiles <= 0 || batch.num_tokens <= 0) return;
    IS_CHECK(pages.head_dim % 4 == 0) << "prefill merge head_dim " << pages.head_dim;
    const dim3 grid(static_cast<unsigned>(batch.num_tokens), static_cast<unsigned>(batch.num_heads));
    const int threads = std::min(64, pages.head_dim / 4);
    merge_prefill_splits_kernel<<<grid, threads, 0, stream>>>(pages, batch, launch,
                                                              static_cast<bf16*>(out));
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace inferscale::backends::cuda
