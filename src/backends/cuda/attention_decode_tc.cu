// Decode attention on tensor cores, built to stream K/V at full bandwidth (head_dim 64/128,
// GQA groups up to 16, one query row per sequence).
//
// Work items are (KV split, sequence, kv head); a persistent grid of as many CTAs as fit on
// the GPU at once walks them round-robin, so items past a sequence's end (a replayed graph
// sized for a longer bound) cost one L1 read each instead of a CTA launch, and the split count
// can be high enough for balance without launching thousands of CTAs. An item's KV range is
// cut into 16-token tiles dealt to the 4 warps in turn; each warp streams its tiles through
// its own 3-stage cp.async ring (16-byte copies, zero-filled past the end, rows XOR-swizzled
// so ldmatrix is conflict-free) and never waits on the other warps inside the item. One K/V
// read serves the whole GQA group:
//   S[16 heads x 8 tokens] = Q[16 heads x 16 dims] K^T      (mma m16n8k16, Q in registers)
//   O[16 heads x 8 dims]  += P[16 heads x 16 tokens] V       (P from S's accumulators)
// with rows past the group zero. Scores are scaled in f32 and the online softmax runs on the
// accumulator fragments (row max over a quad of lanes); P is rounded to bf16 for the product
// and the row sums add exactly those rounded weights. At the end of an item the warps' states
// are merged through shared memory; a sequence whose whole KV fits in one split writes its
// output directly, others write (unnormalized output, max, sum) partials for the merge kernel.
//
// Expected cost (Llama-3.1-8B layer, H200, b=256 at 1K context): K+V = 1.07 GB per layer,
// ~240 us at 4.5 TB/s. Per 16-token warp tile: 32 mma, 16 ldmatrix, 16 cp.async per lane and
// ~120 other instructions, ~10x less issue time than the tile's DRAM time, so the kernel is
// bound by bytes in flight: 2 CTAs x 4 warps x 2-3 tiles x 8 KB = 128-192 KB per SM, about
// three times what Little's law asks at ~2 us loaded latency.

#include <algorithm>
#include <cmath>

#include "backends/cuda/attention_common.cuh"
#include "backends/cuda/cuda_check.h"

namespace inferscale::backends::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTileTokens = 16;  // tokens per warp tile: the k of one P x V mma
constexpr int kStages = 3;       // cp.async ring depth per warp

template <int kD>
struct TcShape {
    static constexpr int kChunks = kD / 8;                   // 16-byte chunks per K/V row
    static constexpr int kRowBytes = kD * 2;                 // one bf16 row
    static constexpr int kMatBytes = kTileTokens * kRowBytes;  // one K (or V) tile
    static constexpr int kStageBytes = 2 * kMatBytes;          // K tile, then V tile
    static constexpr int kWarpBytes = kStages * kStageBytes;
    static constexpr int kSmemBytes = kWarps * kWarpBytes;
    static constexpr int kRowsPerCopy = 32 / kChunks;          // rows one warp copy covers
    static constexpr int kCopies = kTileTokens / kRowsPerCopy;  // copies per lane per matrix
    static constexpr int kOLd = kD + 8;  // f32 row stride of a warp's merged output rows
    static_assert(16 * kOLd * 4 <= kWarpBytes, "a warp's output rows fit in its stage ring");
};

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; zero-filled when !valid (nothing is read then).
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool valid) {
    const int bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned addr, unsigned (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

// c[16x8] += a[16x16] b[16x8], bf16 inputs, f32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi, float& sum) {
    const __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
    sum += __low2float(p) + __high2float(p);  // the weights the product will actually use
    return *reinterpret_cast<const unsigned*>(&p);
}

// Byte offset of (row, 16-byte chunk) in a swizzled tile: chunk bits 0-2 XOR row bits 0-2, so
// the 8 rows one ldmatrix phase reads land on 8 different bank groups.
template <int kD>
__device__ __forceinline__ int tile_offset(int row, int chunk) {
    return row * TcShape<kD>::kRowBytes + ((chunk ^ (row & 7)) << 4);
}

// kBig: the group has more than 8 heads, so the accumulator rows 8-15 are live.
template <int kD, bool kBig>
__global__ void __launch_bounds__(kThreads, 2)
    decode_tc_kernel(const bf16* __restrict__ q, PagedKvView kv, AttentionBatch batch,
                     DecodeLaunch launch, bf16* __restrict__ out) {
    using Shape = TcShape<kD>;
    constexpr int kKSteps = kD / 16;  // 16-dim steps of Q K^T
    constexpr int kNTiles = kD / 8;   // 8-dim output tiles
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ float m_s[kWarps][16], l_s[kWarps][16];

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;  // accumulator row (head) and column pair
    unsigned char* ring = smem + warp * Shape::kWarpBytes;
    const unsigned ring_addr = smem_addr(ring);
    const bf16* k_pages = static_cast<const bf16*>(kv.k);
    const bf16* v_pages = static_cast<const bf16*>(kv.v);
    const int bs = kv.block_size;
    const bool tile_in_page = bs % kTileTokens == 0;  // tiles start at multiples of 16
    const int group = batch.num_heads / kv.kv_heads;
    const float scale_log2 = batch.scale * kLog2e;
    const std::int64_t items =
        static_cast<std::int64_t>(launch.num_splits) * launch.grid_rows * kv.kv_heads;

    // This lane's copy slots and ldmatrix addresses inside a tile.
    const int copy_chunk = lane % Shape::kChunks, copy_row0 = lane / Shape::kChunks;
    const int k_row = (lane & 7) + ((lane >> 4) << 3), k_chunk = (lane >> 3) & 1;
    const int v_row = (lane & 7) + (((lane >> 3) & 1) << 3), v_chunk = lane >> 4;

    for (std::int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int kv_head = static_cast<int>(item % kv.kv_heads);
        const std::int64_t rest = item / kv.kv_heads;
        const int seq = static_cast<int>(rest % launch.grid_rows);
        const int split = static_cast<int>(rest / launch.grid_rows);
        const SeqInfo s = load_seq(batch, seq, kv);
        if (s.q_len != 1) continue;  // prefill rows belong to the prefill kernel
        const int begin = split * launch.split_tokens;
        if (begin >= s.kv_len) continue;  // past this sequence's end: the merge skips it
        const bool single = launch.num_splits == 1 || s.kv_len <= launch.split_tokens;
        const int end = single ? s.kv_len : min(s.kv_len, begin + launch.split_tokens);
        const int head0 = kv_head * group;

        // Q as the A operand, rows = heads of the group (zero past it), raw bf16: the scale
        // is applied to the f32 scores.
        unsigned qa[kKSteps][4];
        {
            const unsigned* q_words = reinterpret_cast<const unsigned*>(
                q + (static_cast<std::int64_t>(s.q_start) * batch.num_heads + head0) * kD);
#pragma unroll
            for (int ks = 0; ks < kKSteps; ++ks) {
                const int w = (ks * 16 + 2 * t) / 2;  // word index of dims (16 ks + 2t, +1)
                qa[ks][0] = g < group ? __ldg(q_words + g * (kD / 2) + w) : 0u;
                qa[ks][2] = g < group ? __ldg(q_words + g * (kD / 2) + w + 4) : 0u;
                if (kBig) {
                    qa[ks][1] = g + 8 < group ? __ldg(q_words + (g + 8) * (kD / 2) + w) : 0u;
                    qa[ks][3] = g + 8 < group ? __ldg(q_words + (g + 8) * (kD / 2) + w + 4) : 0u;
                } else {
                    qa[ks][1] = 0u;
                    qa[ks][3] = 0u;
                }
            }
        }

        const int num_tiles = (end - begin + kTileTokens - 1) / kTileTokens;
        const int my_tiles = num_tiles > warp ? (num_tiles - warp + kWarps - 1) / kWarps : 0;

        // Issues the copies of this warp's i-th tile into ring stage `stage`.
        const std::int64_t row_stride = static_cast<std::int64_t>(kv.kv_heads) * kD;
        const auto issue = [&](int i, int stage) {
            const int t0 = begin + (warp + i * kWarps) * kTileTokens;
            const unsigned k_dst = ring_addr + stage * Shape::kStageBytes;
            std::int64_t tile_base = 0;  // element offset of token t0 when the tile is in one page
            if (tile_in_page) {
                const std::int32_t page = s.pages[t0 / bs];
                if (page < 0 || page >= kv.num_blocks) __trap();  // page id outside the pool
                tile_base = (static_cast<std::int64_t>(page) * bs + t0 % bs) * row_stride +
                            kv_head * kD + copy_chunk * 8;
            }
#pragma unroll
            for (int c = 0; c < Shape::kCopies; ++c) {
                const int row = copy_row0 + c * Shape::kRowsPerCopy;
                const int j = t0 + row;
                const bool valid = j < end;
                std::int64_t off = 0;
                if (valid) {
                    if (tile_in_page) {
                        off = tile_base + row * row_stride;
                    } else {
                        const std::int32_t page = s.pages[j / bs];
                        if (page < 0 || page >= kv.num_blocks) __trap();
                        off = (static_cast<std::int64_t>(page) * bs + j % bs) * row_stride +
                              kv_head * kD + copy_chunk * 8;
                    }
                }
                const unsigned dst = k_dst + tile_offset<kD>(row, copy_chunk);
                cp_async16(dst, k_pages + off, valid);
                cp_async16(dst + Shape::kMatBytes, v_pages + off, valid);
            }
        };

        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g, g + 8
        float o[kNTiles][4];
#pragma unroll
        for (int n = 0; n < kNTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

#pragma unroll
        for (int i = 0; i < kStages - 1; ++i) {
            if (i < my_tiles) issue(i, i);
            cp_async_commit();
        }
        int stage = 0;
        for (int i = 0; i < my_tiles; ++i) {
            {
                const int ahead = i + kStages - 1;
                int ahead_stage = stage + kStages - 1;
                if (ahead_stage >= kStages) ahead_stage -= kStages;
                if (ahead < my_tiles) issue(ahead, ahead_stage);
                cp_async_commit();
            }
            cp_async_wait<kStages - 1>();  // tile i has landed (for this lane)
            __syncwarp();                  // ... and for every lane of the warp

            const unsigned k_tile = ring_addr + stage * Shape::kStageBytes;
            const unsigned v_tile = k_tile + Shape::kMatBytes;
            const int t0 = begin + (warp + i * kWarps) * kTileTokens;

            // S = Q K^T: sc[0] tokens 0-7, sc[1] tokens 8-15 of the tile.
            float sc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
            for (int ks = 0; ks < kKSteps; ++ks) {
                unsigned b[4];
                ldmatrix_x4(k_tile + tile_offset<kD>(k_row, 2 * ks + k_chunk), b);
                mma_bf16(sc[0], qa[ks], b[0], b[1]);
                mma_bf16(sc[1], qa[ks], b[2], b[3]);
            }

            // Online softmax over the tile's 16 tokens for rows g and g + 8.
            float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int n = 0; n < 2; ++n) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const bool valid = t0 + n * 8 + 2 * t + (e & 1) < end;
                    const float x = valid ? sc[n][e] * scale_log2 : -INFINITY;
                    sc[n][e] = x;
                    tile_max[e >> 1] = fmaxf(tile_max[e >> 1], x);
                }
            }
            float corr[2], base[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float mx = tile_max[r];
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float new_max = fmaxf(m[r], mx);  // finite: token t0 is visible
                base[r] = new_max == -INFINITY ? 0.0f : new_max;
                corr[r] = exp2f(m[r] - base[r]);
                m[r] = new_max;
            }
            unsigned pa[4];
            float sum0 = 0.0f, sum1 = 0.0f;
            pa[0] = pack_bf16(exp2f(sc[0][0] - base[0]), exp2f(sc[0][1] - base[0]), sum0);
            pa[2] = pack_bf16(exp2f(sc[1][0] - base[0]), exp2f(sc[1][1] - base[0]), sum0);
            if (kBig) {
                pa[1] = pack_bf16(exp2f(sc[0][2] - base[1]), exp2f(sc[0][3] - base[1]), sum1);
                pa[3] = pack_bf16(exp2f(sc[1][2] - base[1]), exp2f(sc[1][3] - base[1]), sum1);
            } else {
                pa[1] = 0u;
                pa[3] = 0u;
            }
            l[0] = l[0] * corr[0] + sum0;
            l[1] = l[1] * corr[1] + sum1;
#pragma unroll
            for (int n = 0; n < kNTiles; ++n) {
                o[n][0] *= corr[0];
                o[n][1] *= corr[0];
                if (kBig) {
                    o[n][2] *= corr[1];
                    o[n][3] *= corr[1];
                }
            }

            // O += P V, two 8-dim output tiles per ldmatrix.
#pragma unroll
            for (int np = 0; np < kNTiles / 2; ++np) {
                unsigned b[4];
                ldmatrix_x4_trans(v_tile + tile_offset<kD>(v_row, 2 * np + v_chunk), b);
                mma_bf16(o[2 * np], pa, b[0], b[1]);
                mma_bf16(o[2 * np + 1], pa, b[2], b[3]);
            }
            __syncwarp();  // every lane is done with this stage before it is refilled
            if (++stage == kStages) stage = 0;
        }
        cp_async_wait<0>();
        __syncwarp();

        // Row sums over the quad; then this warp's state into its (now idle) ring.
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        }
        float* o_s = reinterpret_cast<float*>(ring);  // [16][kOLd] f32
#pragma unroll
        for (int n = 0; n < kNTiles; ++n) {
            *reinterpret_cast<float2*>(o_s + g * Shape::kOLd + n * 8 + 2 * t) =
                make_float2(o[n][0], o[n][1]);
            if (kBig) {
                *reinterpret_cast<float2*>(o_s + (g + 8) * Shape::kOLd + n * 8 + 2 * t) =
                    make_float2(o[n][2], o[n][3]);
            }
        }
        if (t == 0) {
            m_s[warp][g] = m[0];
            l_s[warp][g] = l[0];
            m_s[warp][g + 8] = m[1];
            l_s[warp][g + 8] = l[1];
        }
        __syncthreads();

        // Merge the warps (a warp without tiles has max -inf and sum 0, so weight 0).
        constexpr int kQuads = kD / 4;
        for (int idx = tid; idx < group * kQuads; idx += kThreads) {
            const int h = idx / kQuads, c = (idx % kQuads) * 4;
            float mx = -INFINITY;
#pragma unroll
            for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_s[w][h]);
            const float b = mx == -INFINITY ? 0.0f : mx;
            float sum = 0.0f;
            float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
            for (int w = 0; w < kWarps; ++w) {
                const float cw = exp2f(m_s[w][h] - b);
                sum += l_s[w][h] * cw;
                const float4 v = *reinterpret_cast<const float4*>(
                    reinterpret_cast<const float*>(smem + w * Shape::kWarpBytes) +
                    h * Shape::kOLd + c);
                acc.x += v.x * cw;
                acc.y += v.y * cw;
                acc.z += v.z * cw;
                acc.w += v.w * cw;
            }
            if (single) {
                const float inv = 1.0f / sum;  // token 0 is in this split: sum > 0
                const __nv_bfloat162 lo = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
                const __nv_bfloat162 hi = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
                uint2 packed;
                packed.x = *reinterpret_cast<const unsigned*>(&lo);
                packed.y = *reinterpret_cast<const unsigned*>(&hi);
                *reinterpret_cast<uint2*>(
                    out + (static_cast<std::int64_t>(s.q_start) * batch.num_heads + head0 + h) *
                              kD + c) = packed;
            } else {
                const std::int64_t slot =
                    (static_cast<std::int64_t>(seq) * batch.num_heads + head0 + h) *
                        launch.num_splits + split;
                *reinterpret_cast<float4*>(launch.partial_o + slot * kD + c) = acc;
                if (c == 0) {
                    launch.partial_ml[slot * 2] = mx;
                    launch.partial_ml[slot * 2 + 1] = sum;
                }
            }
        }
        __syncthreads();  // the rings and m_s/l_s are reused by the next item
    }
}

template <int kD, bool kBig>
void set_smem_limit(int& ctas_per_sm) {
    IS_CUDA_CHECK(cudaFuncSetAttribute(decode_tc_kernel<kD, kBig>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       TcShape<kD>::kSmemBytes));
    IS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &ctas_per_sm, decode_tc_kernel<kD, kBig>, kThreads, TcShape<kD>::kSmemBytes));
    IS_CHECK(ctas_per_sm >= 1) << "decode tc kernel does not fit on an SM";
}

int variant(int head_dim, int group) { return (head_dim == 128 ? 2 : 0) + (group > 8 ? 1 : 0); }

template <int kD, bool kBig>
void launch_typed(const void* q, const PagedKvView& pages, const AttentionBatch& batch,
                  const DecodeLaunch& launch, void* out, cudaStream_t stream) {
    const std::int64_t items =
        static_cast<std::int64_t>(launch.num_splits) * launch.grid_rows * pages.kv_heads;
    const std::int64_t grid = std::min<std::int64_t>(items, launch.max_ctas);
    decode_tc_kernel<kD, kBig><<<static_cast<unsigned>(grid), kThreads, TcShape<kD>::kSmemBytes,
                                 stream>>>(static_cast<const bf16*>(q), pages, batch, launch,
                                           static_cast<bf16*>(out));
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool decode_tc_supports(int head_dim, int group) {
    return (head_dim == 64 || head_dim == 128) && group >= 1 && group <= 16;
}

DecodeTcLimits init_decode_tc_attention() {
    DecodeTcLimits limits;
    set_smem_limit<64, false>(limits.ctas_per_sm[variant(64, 1)]);
    set_smem_limit<64, true>(limits.ctas_per_sm[variant(64, 16)]);
    set_smem_limit<128, false>(limits.ctas_per_sm[variant(128, 1)]);
    set_smem_limit<128, true>(limits.ctas_per_sm[variant(128, 16)]);
    return limits;
}

int decode_tc_ctas_per_sm(const DecodeTcLimits& limits, int head_dim, int group) {
    return limits.ctas_per_sm[variant(head_dim, group)];
}

void launch_decode_tc_attention(const void* q, const PagedKvView& pages,
                                const AttentionBatch& batch, const DecodeLaunch& launch,
                                void* out, cudaStream_t stream) {
    const int group = batch.num_heads / pages.kv_heads;
    IS_CHECK(launch.per_sequence && decode_tc_supports(pages.head_dim, group))
        << "decode tc: head_dim " << pages.head_dim << ", group " << group;
    IS_CHECK(launch.max_ctas > 0 && launch.grid_rows > 0) << "decode tc grid";
    IS_CHECK(launch.num_splits == 1 ||
             (launch.partial_o != nullptr && launch.partial_ml != nullptr &&
              launch.split_tokens > 0 && launch.split_tokens % kTileTokens == 0 &&
              reinterpret_cast<std::uintptr_t>(launch.partial_o) % 16 == 0))
        << "decode tc split workspace";
    const bool big = group > 8;
    if (pages.head_dim == 64) {
        big ? launch_typed<64, true>(q, pages, batch, launch, out, stream)
            : launch_typed<64, false>(q, pages, batch, launch, out, stream);
    } else {
        big ? launch_typed<128, true>(q, pages, batch, launch, out, stream)
            : launch_typed<128, false>(q, pages, batch, launch, out, stream);
    }
}

}  // namespace inferscale::backends::cuda
