// Prefill attention in the FlashAttention-2 pattern on mma.sync tensor cores: a block owns a
// tile of 64 or 128 query rows of one sequence and one KV head, walks the sequence's KV in tiles
// gathered through the page table, and keeps an online softmax, so no score matrix larger than
// one tile ever exists. The rows pack the GQA group: row r is query token r / G of the tile
// with query head r % G of the KV head (G = heads per KV head), so one K/V tile serves the
// whole group and a short chunk (a question) still fills the tile: 43 tokens at G = 4 are 3
// tiles of 16 tokens x 4 heads per KV head, not 4 heads x one 64-row tile two-thirds empty.
// The building blocks (swizzled cp.async tiles, ldmatrix, m16n8k16 bf16 mma, the accumulator
// layout) are those of the decode kernels in attention_tc.cuh.
//
// Each of the four warps owns 16 x kFrags (query token, head) rows end to end: the scores
// S = Q K^T as accumulators, P (the bf16 weights) re-packed from those accumulators straight
// into A fragments, and the running output O stay in registers. With one 16-row fragment a warp
// also keeps Q in registers (read once); with two (kFrags = 2, "wide" tiles for long chunks) it
// reads Q's A fragments from shared memory per tile instead, and every K or V fragment it loads
// feeds both row fragments: half the shared-memory reads and twice the independent mma chains
// per K/V element, for registers that only head_dim <= 128 affords. Shared memory holds the Q
// tile and a double-buffered K/V tile: the next tile's cp.async copies fly while the current
// one is multiplied. A warp whose rows all end before a tile (the causal upper triangle of the
// diagonal tiles) skips its products.
//
// Short chunks over a long KV (a question after injected memory) give too few (tile, KV head)
// blocks to fill the GPU, so the plan may split the KV as flash-decoding does: grid x is then
// (query tile, split), each split walks split_tokens KV tokens (a multiple of kBlockN, so
// tiles never straddle splits) and stores its rows' unnormalized output with (max, sum) in the
// workspace; merge_prefill_splits_kernel weighs them together. The causal mask is unchanged
// (it is per row), and a row whose visible KV ends before a split's first token leaves an
// empty state there that the merge never reads. Query tiles are walked last-first: the last
// rows see the most KV, so the longest blocks start first.
//
// FP8 (E4M3) pages are read through registers instead of cp.async and widened into the same
// bf16 tiles (exactly: bf16 holds every E4M3 value), so the products are unchanged; the K scale
// folds into the score scale and the V scale into the output.

#include <algorithm>
#include <cmath>

#include "backends/cuda/attention_tc.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/fast_divisor.h"

namespace inferscale::backends::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kBlockN = 64;  // KV tokens per split unit (and per tile up to D = 128)
constexpr int kThreads = kWarps * 32;
constexpr int kMaxFrags = 2;

// KV tokens per tile: 64, or 32 at D = 256 so scores, P and O stay in registers, and where a
// block's whole KV fits 32 tokens (a short prompt without history: a 64-token tile would
// multiply and mask as many padding tokens as real ones).
template <int D>
constexpr int kWideTileN = D > 128 ? 32 : 64;
constexpr int kNarrowTileN = 32;

template <int D, int kFrags, int N>
struct PrefillShape {
    using S = tc::Shape<D>;
    static constexpr int kRows = kWarps * 16 * kFrags;  // (query token, head) rows per block
    static constexpr int kTileN = N;
    static constexpr int kScoreTiles = kTileN / 8;  // 8-token accumulator tiles per row group
    static constexpr int kTokenSteps = kTileN / 16;  // 16-token k-steps of P x V
    static constexpr int kQBytes = kRows * S::kRowBytes;
    static constexpr int kMatBytes = kTileN * S::kRowBytes;  // one K (or V) tile
    static constexpr int kStageBytes = 2 * kMatBytes;        // K tile, then V tile
    static constexpr int kSmemBytes = kQBytes + 2 * kStageBytes;
    static constexpr int kRowsPerPass = kThreads / S::kChunks;  // K/V rows one block copy covers
    static_assert(kBlockN % kTileN == 0, "splits never cut a tile");
    static_assert(kTileN % kRowsPerPass == 0 && kRows % kRowsPerPass == 0, "copy passes");
    static_assert(kFrags == 1 || D <= 128, "two row fragments need D <= 128 (registers)");
};

// Folds a tile's raw scores into each row's tile maximum (rows g and g + 8 of the lane); the
// scale to log2 units is applied later, inside each weight's exp2 (scale > 0 keeps the order).
// With kMasked, a score whose tile column lies past its row's limit (given relative to the
// lane's first column: the row's last visible KV index, or the split's last token, minus
// kv0 + 2t) or before its window's first KV index (`lower`, relative the same way) becomes
// -inf. Most tiles need no mask: they skip the compares.
template <bool kMasked, int kTiles>
__device__ __forceinline__ void mask_and_max(float (&sc)[kTiles][4], int limit_lo, int limit_hi,
                                             int lower_lo, int lower_hi, float (&tile_max)[2]) {
#pragma unroll
    for (int n = 0; n < kTiles; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int col = n * 8 + (e & 1);
            if (kMasked && (col > (e < 2 ? limit_lo : limit_hi) ||
                            col < (e < 2 ? lower_lo : lower_hi))) {
                sc[n][e] = -INFINITY;
            }
            tile_max[e >> 1] = fmaxf(tile_max[e >> 1], sc[n][e]);
        }
    }
}

// Issues the copies of KV tokens [t0, t0 + kTileN) of the kv head `rows` addresses (zero past
// `stop`) into the stage at shared address `stage`. Thread tid copies 16-byte chunk
// tid % kChunks of rows r0 + P i (r0 = tid / kChunks, P = kRowsPerPass). t0 is a multiple of
// 16, so with a power-of-two block size of at least 16 the rows r0 + 16 m + P u (u < 16 / P)
// share a page: one page-table read serves 16 / P of a thread's rows (2 at D = 128).
// FP8 pages: the same rows and chunks (8 bytes of E4M3 a chunk), every load issued before the
// first widened store.
template <int D, int kFrags, int N>
__device__ __forceinline__ void load_fp8_kv_tile(unsigned stage, const PagedRows& rows,
                                                 const PagedKvView& kv, int t0, int stop, int tid) {
    using P = PrefillShape<D, kFrags, N>;
    constexpr int kPass = P::kRowsPerPass, kCount = N / kPass;
    const int chunk = tid % P::S::kChunks;
    const int r0 = tid / P::S::kChunks;
    const auto* k = static_cast<const std::uint8_t*>(kv.k);
    const auto* v = static_cast<const std::uint8_t*>(kv.v);
    uint2 kb[kCount], vb[kCount];
#pragma unroll
    for (int i = 0; i < kCount; ++i) {
        kb[i] = vb[i] = make_uint2(0u, 0u);
        const int j = t0 + r0 + i * kPass;
        if (j < stop) {
            const std::int64_t off = rows(j) + chunk * 8;
            kb[i] = *reinterpret_cast<const uint2*>(k + off);
            vb[i] = *reinterpret_cast<const uint2*>(v + off);
        }
    }
#pragma unroll
    for (int i = 0; i < kCount; ++i) {
        const unsigned dst = stage + tc::tile_offset<D>(r0 + i * kPass, chunk);
        tc::st_shared16(dst, tc::widen_e4m3x8(kb[i]));
        tc::st_shared16(dst + P::kMatBytes, tc::widen_e4m3x8(vb[i]));
    }
}

template <int D, int kFrags, int N>
__device__ __forceinline__ void issue_kv_tile(unsigned stage, const PagedRows& rows,
                                              const PagedKvView& kv, int t0, int stop, int tid) {
    using P = PrefillShape<D, kFrags, N>;
    if (kv.fp8) {
        load_fp8_kv_tile<D, kFrags, N>(stage, rows, kv, t0, stop, tid);
        return;
    }
    constexpr int kPass = P::kRowsPerPass;
    const int chunk = tid % P::S::kChunks;
    const int r0 = tid / P::S::kChunks;
    const auto copy_row = [&](int r, std::int64_t off, bool valid) {
        const unsigned dst = stage + tc::tile_offset<D>(r, chunk);
        tc::cp_async16(dst, static_cast<const bf16*>(kv.k) + off + chunk * 8, valid);
        tc::cp_async16(dst + P::kMatBytes, static_cast<const bf16*>(kv.v) + off + chunk * 8,
                       valid);
    };
    if (kPass <= 16 && rows.pow2 && rows.block_size >= 16) {
        constexpr int kRun = kPass <= 16 ? 16 / kPass : 1;
#pragma unroll
        for (int m = 0; m < P::kTileN / 16; ++m) {
            const int j0 = t0 + 16 * m + r0;
            const std::int64_t base = j0 < stop ? rows(j0) : 0;
#pragma unroll
            for (int u = 0; u < kRun; ++u) {
                const int r = 16 * m + r0 + u * kPass;
                const bool valid = t0 + r < stop;
                copy_row(r, valid ? base + u * kPass * rows.row_stride : 0, valid);
            }
        }
        return;
    }
#pragma unroll
    for (int r = r0; r < P::kTileN; r += kPass) {
        const bool valid = t0 + r < stop;
        copy_row(r, valid ? rows(t0 + r) : 0, valid);
    }
}

template <int D, int kFrags, int N>
__global__ void __launch_bounds__(kThreads, 2)
    prefill_attention_kernel(const bf16* __restrict__ q, PagedKvView kv, AttentionBatch batch,
                             PrefillLaunch launch, FastDivisor group_div,
                             bf16* __restrict__ out) {
    allow_next_launch();
    using P = PrefillShape<D, kFrags, N>;
    using S = typename P::S;

    // The metadata, and the KV of tokens before the chunk (earlier steps'), are inputs no
    // kernel of this step writes (dependent_launch.cuh): they are read before the kernels
    // ahead have finished, Q and the chunk's own KV after.
    const SeqInfo s = load_seq(batch, blockIdx.y, kv);
    const int split = static_cast<int>(blockIdx.x) % launch.num_splits;
    const int tile = launch.max_q_tiles - 1 - static_cast<int>(blockIdx.x) / launch.num_splits;
    // Rows split into (token, head) by the GQA group size: a multiply-high, not a division.
    const int group = static_cast<int>(group_div.divisor);
    const auto per_token = [&group_div](int row) { return group_div.div(row); };
    const int tile_queries = per_token(P::kRows);
    const int token0 = tile * tile_queries;  // the tile's first query token in the sequence
    // Empty, a decode row (the decode kernel owns it), or a tile past the chunk.
    if (s.q_len <= 1 || token0 >= s.q_len) {
        wait_for_inputs();
        return;
    }
    const int rows = min(tile_queries, s.q_len - token0) * group;
    const int first_pos = s.kv_len - s.q_len + token0;  // KV index of the tile's first query
    const int kv_end = first_pos + per_token(rows);     // KV tokens the whole tile needs
    const bool split_mode = launch.num_splits > 1;
    const int kv_begin = split_mode ? split * launch.split_tokens : 0;
    if (kv_begin >= kv_end) {  // past this tile's causal end: the merge skips it
        wait_for_inputs();
        return;
    }
    const int kv_stop = split_mode ? min(kv_end, kv_begin + launch.split_tokens) : kv_end;
    const int kv_head = blockIdx.z;
    const int head0 = kv_head * group;  // row r holds query head head0 + r % group

    extern __shared__ __align__(128) unsigned char smem[];
    const unsigned q_addr = smem_addr(smem);
    const unsigned kv_addr = q_addr + P::kQBytes;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const tc::Lane<D> ln(lane);

    // The first K/V tile goes before the wait when it lies before the chunk's tokens.
    const PagedRows kv_rows(s, kv, kv_head);
    const bool early = kv_begin + N <= s.kv_len - s.q_len;
    if (early) {
        issue_kv_tile<D, kFrags, N>(kv_addr, kv_rows, kv, kv_begin, kv_stop, tid);
        tc::cp_async_commit();
    }
    wait_for_inputs();
    // Q tile (rows past the chunk zero-filled) and, unless it went early, the first K/V tile:
    // one copy group.
    {
        const int chunk = tid % S::kChunks;
#pragma unroll
        for (int r = tid / S::kChunks; r < P::kRows; r += P::kRowsPerPass) {
            const bool valid = r < rows;
            const int pr = valid ? r : 0;
            const FastDivisor::Split th = group_div.split(pr);  // (token, head) of row pr
            const std::int64_t token = s.q_start + token0 + th.quot;
            tc::cp_async16(q_addr + tc::tile_offset<D>(r, chunk),
                           q + (token * batch.num_heads + head0 + th.rem) * D + chunk * 8,
                           valid);
        }
    }
    if (!early) issue_kv_tile<D, kFrags, N>(kv_addr, kv_rows, kv, kv_begin, kv_stop, tid);
    tc::cp_async_commit();

    // Fragment f of the warp holds rows warp_row0 + 16 f + [0, 16); lane rows g and g + 8.
    const int warp_row0 = warp * 16 * kFrags;
    const bool warp_active = warp_row0 < rows;
    int pos_lo[kFrags], pos_hi[kFrags], frag_first[kFrags];
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
        const int r0 = warp_row0 + 16 * f;
        pos_lo[f] = first_pos + per_token(r0 + ln.g);      // last KV index row g sees
        pos_hi[f] = first_pos + per_token(r0 + ln.g + 8);  // and row g + 8
        frag_first[f] = first_pos + per_token(r0);
    }
    const int warp_last = first_pos + per_token(warp_row0 + 16 * kFrags - 1);
    const HeadScales hs = head_scales(kv, kv_head);
    const float scale_log2 = batch.scale * kLog2e * hs.k;
    const float v_scale = hs.v;
    // Q's A fragment (16-dim step ks) of row fragment f, from shared memory.
    const auto q_frag_addr = [&](int ks, int f) {
        return q_addr +
               tc::tile_offset<D>(warp_row0 + 16 * f + (lane & 15), 2 * ks + (lane >> 4));
    };

    unsigned qa[kFrags == 1 ? S::kKSteps : 1][4];  // one fragment keeps Q in registers
    float o[kFrags][S::kNTiles][4];
    float m[kFrags][2], l[kFrags][2];
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
#pragma unroll
        for (int n = 0; n < S::kNTiles; ++n) {
            o[f][n][0] = o[f][n][1] = o[f][n][2] = o[f][n][3] = 0.0f;
        }
        m[f][0] = m[f][1] = -INFINITY;
        l[f][0] = l[f][1] = 0.0f;
    }

    const int num_tiles = (kv_stop - kv_begin + N - 1) / N;
    for (int it = 0; it < num_tiles; ++it) {
        const int kv0 = kv_begin + it * N;
        const unsigned stage = kv_addr + (it & 1) * P::kStageBytes;
        if (it + 1 < num_tiles) {
            issue_kv_tile<D, kFrags, N>(kv_addr + ((it + 1) & 1) * P::kStageBytes, kv_rows,
                                        kv, kv0 + N, kv_stop, tid);
            tc::cp_async_commit();
            tc::cp_async_wait<1>();
        } else {
            tc::cp_async_wait<0>();
        }
        __syncthreads();  // this tile (and at it == 0 the Q tile) landed for every warp
        if (kFrags == 1 && it == 0) {  // Q into registers once
#pragma unroll
            for (int ks = 0; ks < S::kKSteps; ++ks) tc::ldmatrix_x4(q_frag_addr(ks, 0), qa[ks]);
        }

        if (warp_active && kv0 <= warp_last) {
            // S = Q K^T: sc[f][n] holds tokens 8n .. 8n + 7 of the tile for row fragment f.
            float sc[kFrags][P::kScoreTiles][4];
#pragma unroll
            for (int f = 0; f < kFrags; ++f) {
#pragma unroll
                for (int n = 0; n < P::kScoreTiles; ++n) {
                    sc[f][n][0] = sc[f][n][1] = sc[f][n][2] = sc[f][n][3] = 0.0f;
                }
            }
#pragma unroll
            for (int ks = 0; ks < S::kKSteps; ++ks) {
                unsigned qs[kFrags][4];
                if constexpr (kFrags > 1) {
#pragma unroll
                    for (int f = 0; f < kFrags; ++f) tc::ldmatrix_x4(q_frag_addr(ks, f), qs[f]);
                }
#pragma unroll
                for (int n2 = 0; n2 < P::kTokenSteps; ++n2) {
                    unsigned b[4];
                    tc::ldmatrix_x4(stage + tc::tile_offset<D>(n2 * 16 + ln.k_row,
                                                               2 * ks + ln.k_chunk),
                                    b);
                    if constexpr (kFrags == 1) {
                        tc::mma_bf16(sc[0][2 * n2], qa[ks], b[0], b[1]);
                        tc::mma_bf16(sc[0][2 * n2 + 1], qa[ks], b[2], b[3]);
                    } else {
#pragma unroll
                        for (int f = 0; f < kFrags; ++f) {
                            tc::mma_bf16(sc[f][2 * n2], qs[f], b[0], b[1]);
                            tc::mma_bf16(sc[f][2 * n2 + 1], qs[f], b[2], b[3]);
                        }
                    }
                }
            }

            // Online softmax for rows g (e = 0, 1) and g + 8 (e = 2, 3) of each fragment,
            // causal mask included where the tile reaches past a row's position or the split.
            unsigned pa[kFrags][P::kTokenSteps][4];
#pragma unroll
            for (int f = 0; f < kFrags; ++f) {
                float tile_max[2] = {-INFINITY, -INFINITY};
                if (kv0 + N - 1 > frag_first[f] || kv0 + N > kv_stop ||
                    kv0 < window_start(batch, warp_last)) {
                    const int lane_col = kv0 + 2 * ln.t;
                    mask_and_max<true>(sc[f], min(pos_lo[f], kv_stop - 1) - lane_col,
                                       min(pos_hi[f], kv_stop - 1) - lane_col,
                                       window_start(batch, pos_lo[f]) - lane_col,
                                       window_start(batch, pos_hi[f]) - lane_col, tile_max);
                } else {
                    mask_and_max<false>(sc[f], 0, 0, 0, 0, tile_max);
                }
                float base[2], corr[2];
                // A fully masked row keeps max -inf.
                tc::advance_max(tile_max, m[f], base, corr, scale_log2);
                const auto weight = [&](float x, int r) {
                    return tc::softmax_weight(x, scale_log2, base[r]);
                };
                float sum[2] = {0.0f, 0.0f};
#pragma unroll
                for (int k2 = 0; k2 < P::kTokenSteps; ++k2) {
                    const float(&lo)[4] = sc[f][2 * k2];
                    const float(&hi)[4] = sc[f][2 * k2 + 1];
                    pa[f][k2][0] = tc::pack_bf16(weight(lo[0], 0), weight(lo[1], 0), sum[0]);
                    pa[f][k2][1] = tc::pack_bf16(weight(lo[2], 1), weight(lo[3], 1), sum[1]);
                    pa[f][k2][2] = tc::pack_bf16(weight(hi[0], 0), weight(hi[1], 0), sum[0]);
                    pa[f][k2][3] = tc::pack_bf16(weight(hi[2], 1), weight(hi[3], 1), sum[1]);
                }
                l[f][0] = l[f][0] * corr[0] + sum[0];
                l[f][1] = l[f][1] * corr[1] + sum[1];
                tc::rescale_rows<2>(o[f], corr);
            }

            // O += P V, two 8-dim output tiles per ldmatrix, each feeding every fragment.
            const unsigned v_stage = stage + P::kMatBytes;
#pragma unroll
            for (int k2 = 0; k2 < P::kTokenSteps; ++k2) {
#pragma unroll
                for (int np = 0; np < S::kNTiles / 2; ++np) {
                    unsigned b[4];
                    tc::ldmatrix_x4_trans(v_stage + tc::tile_offset<D>(k2 * 16 + ln.v_row,
                                                                       2 * np + ln.v_chunk),
                                          b);
#pragma unroll
                    for (int f = 0; f < kFrags; ++f) {
                        tc::mma_bf16(o[f][2 * np], pa[f][k2], b[0], b[1]);
                        tc::mma_bf16(o[f][2 * np + 1], pa[f][k2], b[2], b[3]);
                    }
                }
            }
        }
        __syncthreads();  // every warp is done with this stage before it is refilled
    }

#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float lf = l[f][r];
            lf += __shfl_xor_sync(0xffffffffu, lf, 1);
            lf += __shfl_xor_sync(0xffffffffu, lf, 2);
            const int row = warp_row0 + 16 * f + ln.g + 8 * r;
            if (row >= rows) continue;
            const FastDivisor::Split th = group_div.split(row);
            const std::int64_t token = s.q_start + token0 + th.quot;
            const int head = head0 + th.rem;
            if (split_mode) {
                const std::int64_t slot =
                    (token * batch.num_heads + head) * launch.num_splits + split;
                float* dst = launch.partial_o + slot * D + 2 * ln.t;
#pragma unroll
                for (int n = 0; n < S::kNTiles; ++n) {
                    *reinterpret_cast<float2*>(dst + n * 8) =
                        make_float2(o[f][n][2 * r] * v_scale, o[f][n][2 * r + 1] * v_scale);
                }
                if (ln.t == 0) {
                    // The merge works in log2 units.
                    launch.partial_ml[slot * 2] = m[f][r] * scale_log2;
                    launch.partial_ml[slot * 2 + 1] = lf;
                }
            } else {
                // Every valid row sees KV token 0 at least, so l > 0.
                const float inv = v_scale / lf;
                bf16* dst = out + (token * batch.num_heads + head) * D + 2 * ln.t;
#pragma unroll
                for (int n = 0; n < S::kNTiles; ++n) {
                    *reinterpret_cast<__nv_bfloat162*>(dst + n * 8) =
                        __floats2bfloat162_rn(o[f][n][2 * r] * inv, o[f][n][2 * r + 1] * inv);
                }
            }
        }
    }
}

// One block per (batch row, head); rows of decode sequences are left to the decode path. Only
// the splits that start at or before the row's causal end hold a state for it.
__global__ void merge_prefill_splits_kernel(PagedKvView kv, AttentionBatch batch,
                                            PrefillLaunch launch, bf16* __restrict__ out) {
    allow_next_launch();
    const int row = blockIdx.x, head = blockIdx.y;
    // The row's sequence (a binary search of the metadata) before the partials are ready.
    const int seq = find_seq(batch.qo_indptr, batch.num_seqs, row);
    const SeqInfo s = load_seq(batch, seq, kv);
    wait_for_inputs();
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
            const float4 v =
                *reinterpret_cast<const float4*>(po + static_cast<std::int64_t>(i) * d + c);
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

template <int D, int kFrags, int N>
void set_smem_limit() {
    IS_CUDA_CHECK(cudaFuncSetAttribute(prefill_attention_kernel<D, kFrags, N>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       PrefillShape<D, kFrags, N>::kSmemBytes));
}

template <int D, int kFrags, int N = kWideTileN<D>>
void launch_typed(const void* q, const PagedKvView& pages, const AttentionBatch& batch,
                  const PrefillLaunch& launch, void* out, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>(launch.max_q_tiles * launch.num_splits),
                    static_cast<unsigned>(batch.num_seqs), static_cast<unsigned>(pages.kv_heads));
    const FastDivisor group(static_cast<std::uint32_t>(batch.num_heads / pages.kv_heads));
    launch_dependent(prefill_attention_kernel<D, kFrags, N>, grid, kThreads,
                     PrefillShape<D, kFrags, N>::kSmemBytes, stream, static_cast<const bf16*>(q),
                     pages, batch, launch, group, static_cast<bf16*>(out));
}

// Head sizes up to 128 have three shapes: two row fragments a warp (wide), the 32-token KV
// tile (narrow), and one fragment with the wide tile.
template <int D>
void set_shape_limits() {
    set_smem_limit<D, 2, kWideTileN<D>>();
    set_smem_limit<D, 1, kNarrowTileN>();
    set_smem_limit<D, 1, kWideTileN<D>>();
}

template <int D>
void launch_shape(bool wide, bool narrow, const void* q, const PagedKvView& pages,
                  const AttentionBatch& batch, const PrefillLaunch& launch, void* out,
                  cudaStream_t stream) {
    if (wide) return launch_typed<D, 2>(q, pages, batch, launch, out, stream);
    if (narrow) return launch_typed<D, 1, kNarrowTileN>(q, pages, batch, launch, out, stream);
    launch_typed<D, 1>(q, pages, batch, launch, out, stream);
}

}  // namespace

bool prefill_attention_supports(int head_dim) {
    return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

int prefill_max_row_frags(int head_dim) { return head_dim <= 128 ? kMaxFrags : 1; }

int prefill_tile_queries(int group, int row_frags) { return kWarps * 16 * row_frags / group; }

int prefill_tile_tokens() { return kBlockN; }

void init_prefill_attention() {
    set_shape_limits<64>();
    set_shape_limits<128>();
    set_smem_limit<256, 1, kWideTileN<256>>();
}

void launch_prefill_attention(const void* q, const PagedKvView& pages, const AttentionBatch& batch,
                              const PrefillLaunch& launch, void* out, cudaStream_t stream) {
    if (launch.max_q_tiles <= 0 || batch.num_seqs <= 0) return;
    IS_CHECK(batch.num_seqs <= 65535 && pages.kv_heads <= 65535) << "prefill grid";
    IS_CHECK(batch.num_heads % pages.kv_heads == 0 &&
             batch.num_heads / pages.kv_heads <= prefill_tile_queries(1, 1))
        << "prefill GQA group";
    IS_CHECK(launch.row_frags >= 1 && launch.row_frags <= prefill_max_row_frags(pages.head_dim))
        << "prefill row fragments " << launch.row_frags << " at head_dim " << pages.head_dim;
    IS_CHECK(launch.num_splits >= 1 &&
             (launch.num_splits == 1 ||
              (launch.partial_o != nullptr && launch.partial_ml != nullptr &&
               launch.split_tokens > 0 && launch.split_tokens % kBlockN == 0 &&
               reinterpret_cast<std::uintptr_t>(launch.partial_o) % 16 == 0)))
        << "prefill split workspace";
    const bool wide = launch.row_frags == 2;
    const bool narrow = !wide && launch.num_splits == 1 && launch.max_kv_tokens <= kNarrowTileN;
    switch (pages.head_dim) {
        case 64: launch_shape<64>(wide, narrow, q, pages, batch, launch, out, stream); break;
        case 128: launch_shape<128>(wide, narrow, q, pages, batch, launch, out, stream); break;
        case 256: launch_typed<256, 1>(q, pages, batch, launch, out, stream); break;
        default: IS_UNREACHABLE() << "prefill head_dim " << pages.head_dim;
    }
}

void launch_merge_prefill_splits(const PagedKvView& pages, const AttentionBatch& batch,
                                 const PrefillLaunch& launch, void* out, cudaStream_t stream) {
    if (launch.num_splits <= 1 || launch.max_q_tiles <= 0 || batch.num_tokens <= 0) return;
    IS_CHECK(pages.head_dim % 4 == 0) << "prefill merge head_dim " << pages.head_dim;
    const dim3 grid(static_cast<unsigned>(batch.num_tokens),
                    static_cast<unsigned>(batch.num_heads));
    const int threads = std::min(64, pages.head_dim / 4);
    launch_dependent(merge_prefill_splits_kernel, grid, threads, 0, stream, pages, batch, launch,
                     static_cast<bf16*>(out));
}

}  // namespace inferscale::backends::cuda
