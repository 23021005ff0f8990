#pragma once
// Building blocks of the tensor-core decode kernels (attention_decode_tc*.cu): one warp streams
// 16-token K/V tiles of one kv head through its own cp.async ring in shared memory and folds
// each into an online softmax for the whole GQA group with mma.m16n8k16:
//   S[16 heads x 8 tokens] = Q[16 heads x 16 dims] K^T      (Q in registers, rows past the
//   O[16 heads x 8 dims]  += P[16 heads x 16 tokens] V       group zero)
// Copies are 16 bytes, zero-filled past the range; rows are XOR-swizzled so the 8 rows one
// ldmatrix phase reads land on 8 bank groups. Row maxima are kept on raw scores and the scale
// folds into each weight's exp2; P is rounded to bf16 for the product and the row sums add
// exactly those rounded weights.
//
// Register layout of the state (m16n8k16 accumulators): lane = 4 g + t holds rows g and g + 8
// (heads), columns 2t, 2t + 1 of every 8-wide tile; m is uniform over the quad, l is this
// lane's partial sum (reduce over the quad before use).

#include "backends/cuda/attention_common.cuh"

namespace inferscale::backends::cuda::tc {

constexpr int kTileTokens = 16;  // tokens per warp tile: the k of one P x V mma
constexpr int kStages = 3;       // cp.async ring depth per warp

template <int kD>
struct Shape {
    static constexpr int kChunks = kD / 8;                      // 16-byte chunks per K/V row
    static constexpr int kRowBytes = kD * 2;                    // one bf16 row
    static constexpr int kMatBytes = kTileTokens * kRowBytes;   // one K (or V) tile
    static constexpr int kStageBytes = 2 * kMatBytes;           // K tile, then V tile
    static constexpr int kRingBytes = kStages * kStageBytes;    // one warp's ring
    static constexpr int kRowsPerCopy = 32 / kChunks;           // rows one warp copy covers
    static constexpr int kCopies = kTileTokens / kRowsPerCopy;  // copies per lane per matrix
    static constexpr int kKSteps = kD / 16;                     // 16-dim steps of Q K^T
    static constexpr int kNTiles = kD / 8;                      // 8-dim output tiles
};

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

// Eight E4M3 values (8 bytes) widened to eight bf16 (16 bytes): exact, since bf16 holds every
// E4M3 value.
__device__ __forceinline__ uint4 widen_e4m3x8(uint2 bytes) {
    uint4 out;
    const unsigned in[2] = {bytes.x, bytes.y};
    unsigned* words = &out.x;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const auto pair = static_cast<__nv_fp8x2_storage_t>(in[i / 2] >> (16 * (i % 2)));
        const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)));
        const __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
        words[i] = *reinterpret_cast<const unsigned*>(&b);
    }
    return out;
}

__device__ __forceinline__ void st_shared16(unsigned addr, uint4 v) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w)
                 : "memory");
}

// Byte offset of (row, 16-byte chunk) in a swizzled tile.
template <int kD>
__device__ __forceinline__ int tile_offset(int row, int chunk) {
    return row * Shape<kD>::kRowBytes + ((chunk ^ (row & 7)) << 4);
}

// Per-lane constants: accumulator coordinates, copy slots and ldmatrix rows inside a tile.
template <int kD>
struct Lane {
    int g, t;                     // accumulator row (head) and column pair
    int copy_chunk, copy_row0;    // this lane's 16-byte chunk and first row of each copy
    int k_row, k_chunk;           // ldmatrix (K as B operand)
    int v_row, v_chunk;           // ldmatrix.trans (V as B operand)
    __device__ explicit Lane(int lane)
        : g(lane >> 2),
          t(lane & 3),
          copy_chunk(lane % Shape<kD>::kChunks),
          copy_row0(lane / Shape<kD>::kChunks),
          k_row((lane & 7) + ((lane >> 4) << 3)),
          k_chunk((lane >> 3) & 1),
          v_row((lane & 7) + (((lane >> 3) & 1) << 3)),
          v_chunk(lane >> 4) {}
};

// Byte offsets inside a ring stage of one lane's accesses, the same for every tile: its
// cp.async destinations and its ldmatrix rows of K (per 16-dim step) and of V (per pair of
// 8-dim output tiles). Computed once, they keep the swizzle arithmetic off the per-tile path.
template <int kD>
struct StageOffsets {
    unsigned copy[Shape<kD>::kCopies];
    unsigned k[Shape<kD>::kKSteps];
    unsigned v[Shape<kD>::kNTiles / 2];
    __device__ explicit StageOffsets(const Lane<kD>& ln) {
#pragma unroll
        for (int c = 0; c < Shape<kD>::kCopies; ++c) {
            copy[c] = tile_offset<kD>(ln.copy_row0 + c * Shape<kD>::kRowsPerCopy, ln.copy_chunk);
        }
#pragma unroll
        for (int ks = 0; ks < Shape<kD>::kKSteps; ++ks) {
            k[ks] = tile_offset<kD>(ln.k_row, 2 * ks + ln.k_chunk);
        }
#pragma unroll
        for (int np = 0; np < Shape<kD>::kNTiles / 2; ++np) {
            v[np] = Shape<kD>::kMatBytes + tile_offset<kD>(ln.v_row, 2 * np + ln.v_chunk);
        }
    }
};

// The online-softmax state of one warp for up to 16 heads of one kv head.
template <int kD>
struct State {
    float m[2], l[2];  // rows g, g + 8
    float o[Shape<kD>::kNTiles][4];
    __device__ void reset() {
        m[0] = m[1] = -INFINITY;
        l[0] = l[1] = 0.0f;
#pragma unroll
        for (int n = 0; n < Shape<kD>::kNTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    }
    // Row r's maximum in exp2 units (m is kept in raw score units; -inf stays -inf).
    __device__ float scaled_max(int r, float scale) const { return __fmul_rn(m[r], scale); }
    // Sums l over the quad (after the last tile).
    __device__ void reduce_sums() {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        }
    }
};

// Q of the group's heads as the A operand (raw bf16, zero past the group). q_row: the
// sequence's query row, head0: the group's first head.
template <int kD, bool kBig>
__device__ __forceinline__ void load_q(const bf16* __restrict__ q, std::int64_t q_row,
                                       int num_heads, int head0, int group, const Lane<kD>& ln,
                                       unsigned (&qa)[Shape<kD>::kKSteps][4]) {
    const unsigned* words =
        reinterpret_cast<const unsigned*>(q + (q_row * num_heads + head0) * kD);
#pragma unroll
    for (int ks = 0; ks < Shape<kD>::kKSteps; ++ks) {
        const int w = ks * 8 + ln.t;  // word of dims (16 ks + 2t, +1)
        qa[ks][0] = ln.g < group ? __ldg(words + ln.g * (kD / 2) + w) : 0u;
        qa[ks][2] = ln.g < group ? __ldg(words + ln.g * (kD / 2) + w + 4) : 0u;
        if (kBig) {
            const int r = ln.g + 8;
            qa[ks][1] = r < group ? __ldg(words + r * (kD / 2) + w) : 0u;
            qa[ks][3] = r < group ? __ldg(words + r * (kD / 2) + w + 4) : 0u;
        } else {
            qa[ks][1] = 0u;
            qa[ks][3] = 0u;
        }
    }
}

__device__ __forceinline__ uint4 ld_shared16(unsigned addr) {
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(addr)
                 : "memory");
    return v;
}

// FP8 (E4M3) pages: a tile's rows are copied raw (16 tokens x kD bytes, row-major) into the
// upper half of the stage's K tile and of its V tile, then widen_fp8_stage turns them into the
// bf16 tiles the products read, in place. Each lane copies 16-byte chunk `lane % kRawChunks`
// of rows lane / kRawChunks + kRowsPerCopy c.
template <int kD>
struct Fp8Shape {
    static constexpr int kRawChunks = kD / 16;            // 16-byte chunks per E4M3 row
    static constexpr int kRowsPerCopy = 32 / kRawChunks;  // rows one warp copy covers
    static constexpr int kCopies = kTileTokens / kRowsPerCopy;
    static constexpr int kRawOffset = Shape<kD>::kMatBytes / 2;
    static constexpr int kChunksPerLane = kTileTokens * kRawChunks / 32;
};

// Issues the raw copies of one FP8 tile; `row_offset(r)` is the element (= byte) offset of tile
// row r's dim 0 of the head, asked only for rows below `valid` (the others are zero-filled).
template <int kD, class RowOffset>
__device__ __forceinline__ void issue_fp8_tile(unsigned stage_addr, const PagedKvView& kv,
                                               int valid, int lane, const RowOffset& row_offset) {
    using F = Fp8Shape<kD>;
    const int chunk = lane % F::kRawChunks, row0 = lane / F::kRawChunks;
    const auto* k = static_cast<const std::uint8_t*>(kv.k);
    const auto* v = static_cast<const std::uint8_t*>(kv.v);
#pragma unroll
    for (int c = 0; c < F::kCopies; ++c) {
        const int r = row0 + c * F::kRowsPerCopy;
        const bool ok = r < valid;
        const std::int64_t off = ok ? row_offset(r) + chunk * 16 : 0;
        const unsigned dst = stage_addr + F::kRawOffset + r * kD + chunk * 16;
        cp_async16(dst, k + off, ok);
        cp_async16(dst + Shape<kD>::kMatBytes, v + off, ok);
    }
}

// Widens the landed raw FP8 tiles of a stage into its bf16 K and V tiles (exactly: bf16 holds
// every E4M3 value). Warp-collective; the stage's copies must have landed for the whole warp.
template <int kD>
__device__ __forceinline__ void widen_fp8_stage(unsigned stage_addr, int lane) {
    using F = Fp8Shape<kD>;
    constexpr int kMat = Shape<kD>::kMatBytes;
    uint4 raw[2][F::kChunksPerLane];
#pragma unroll
    for (int u = 0; u < F::kChunksPerLane; ++u) {
        const int i = lane + 32 * u;
        const unsigned src =
            stage_addr + F::kRawOffset + (i / F::kRawChunks) * kD + (i % F::kRawChunks) * 16;
        raw[0][u] = ld_shared16(src);
        raw[1][u] = ld_shared16(src + kMat);
    }
    __syncwarp();  // every raw byte is read before the bf16 tiles overwrite them
#pragma unroll
    for (int u = 0; u < F::kChunksPerLane; ++u) {
        const int i = lane + 32 * u;
        const int row = i / F::kRawChunks, c = i % F::kRawChunks;
#pragma unroll
        for (int m = 0; m < 2; ++m) {
            const unsigned tile = stage_addr + m * kMat;
            st_shared16(tile + tile_offset<kD>(row, 2 * c),
                        widen_e4m3x8(make_uint2(raw[m][u].x, raw[m][u].y)));
            st_shared16(tile + tile_offset<kD>(row, 2 * c + 1),
                        widen_e4m3x8(make_uint2(raw[m][u].z, raw[m][u].w)));
        }
    }
    __syncwarp();  // the bf16 tiles are complete before any lane reads them
}

// Issues the copies of a tile that lies in one page: rows [0, 16) of kv head `kv_head` start
// at row `in_page` of page `page`; rows at or past `valid` are zero-filled.
template <int kD>
__device__ __forceinline__ void issue_page_tile(unsigned stage_addr, const PagedKvView& kv,
                                                int kv_head, std::int32_t page, int in_page,
                                                int valid, const Lane<kD>& ln,
                                                const StageOffsets<kD>& so) {
    using S = Shape<kD>;
    if (page < 0 || page >= kv.num_blocks) __trap();  // page id outside the pool: a bug
    const std::int64_t row_stride = static_cast<std::int64_t>(kv.kv_heads) * kD;
    if (kv.fp8) {
        const std::int64_t first =
            (static_cast<std::int64_t>(page) * kv.block_size + in_page) * row_stride +
            static_cast<std::int64_t>(kv_head) * kD;
        issue_fp8_tile<kD>(stage_addr, kv, valid, 4 * ln.g + ln.t,
                           [&](int r) { return first + r * row_stride; });
        return;
    }
    const std::int64_t first = (static_cast<std::int64_t>(page) * kv.block_size + in_page +
                                ln.copy_row0) * row_stride +
                               static_cast<std::int64_t>(kv_head) * kD + ln.copy_chunk * 8;
    const bf16* k = static_cast<const bf16*>(kv.k) + first;
    const bf16* v = static_cast<const bf16*>(kv.v) + first;
    const std::int64_t step = S::kRowsPerCopy * row_stride;  // between a lane's copies
    if (valid >= kTileTokens) {  // warp-uniform: every row is in range
#pragma unroll
        for (int c = 0; c < S::kCopies; ++c) {
            cp_async16(stage_addr + so.copy[c], k + c * step, true);
            cp_async16(stage_addr + so.copy[c] + S::kMatBytes, v + c * step, true);
        }
        return;
    }
#pragma unroll
    for (int c = 0; c < S::kCopies; ++c) {
        const bool ok = ln.copy_row0 + c * S::kRowsPerCopy < valid;
        const std::int64_t off = ok ? c * step : 0;
        cp_async16(stage_addr + so.copy[c], k + off, ok);
        cp_async16(stage_addr + so.copy[c] + S::kMatBytes, v + off, ok);
    }
}

// Issues the copies of tokens [t0, t0 + 16) of kv head `kv_head` (rows at or past `end` are
// zero-filled) into the ring stage at shared address `stage_addr`. t0 is a multiple of 16, so
// when the block size is too the tile lies in one page and takes one page-id read.
template <int kD>
__device__ __forceinline__ void issue_tile(unsigned stage_addr, const SeqInfo& s,
                                           const PagedKvView& kv, int kv_head, int t0, int end,
                                           const Lane<kD>& ln, const StageOffsets<kD>& so) {
    using S = Shape<kD>;
    const int bs = kv.block_size;
    if (bs % kTileTokens == 0) {
        issue_page_tile<kD>(stage_addr, kv, kv_head, s.pages[t0 / bs], t0 % bs, end - t0, ln,
                            so);
        return;
    }
    const std::int64_t row_stride = static_cast<std::int64_t>(kv.kv_heads) * kD;
    if (kv.fp8) {
        issue_fp8_tile<kD>(stage_addr, kv, end - t0, 4 * ln.g + ln.t, [&](int r) {
            const int j = t0 + r;
            const std::int32_t page = s.pages[j / bs];
            if (page < 0 || page >= kv.num_blocks) __trap();
            return (static_cast<std::int64_t>(page) * bs + j % bs) * row_stride +
                   static_cast<std::int64_t>(kv_head) * kD;
        });
        return;
    }
    const bf16* k_pages = static_cast<const bf16*>(kv.k);
    const bf16* v_pages = static_cast<const bf16*>(kv.v);
    const std::int64_t col = static_cast<std::int64_t>(kv_head) * kD + ln.copy_chunk * 8;
#pragma unroll
    for (int c = 0; c < S::kCopies; ++c) {
        const int j = t0 + ln.copy_row0 + c * S::kRowsPerCopy;
        const bool valid = j < end;
        std::int64_t off = 0;
        if (valid) {
            const std::int32_t page = s.pages[j / bs];
            if (page < 0 || page >= kv.num_blocks) __trap();
            off = (static_cast<std::int64_t>(page) * bs + j % bs) * row_stride + col;
        }
        cp_async16(stage_addr + so.copy[c], k_pages + off, valid);
        cp_async16(stage_addr + so.copy[c] + S::kMatBytes, v_pages + off, valid);
    }
}

// A warp's look-ahead over one sequence's page table, for tiles that each lie in one page:
// lane l holds the ids at index base + l (the window in use) and base + 32 + l (the next), so
// a tile's page id is a shuffle, and the table is read 32 entries at a time one window ahead
// of need instead of once per tile on the copy-issue path. Ids past the table read as -1.
struct PageWindow {
    const std::int32_t* pages = nullptr;
    int num_pages = 0, base = 0;
    std::int32_t cur = -1, next = -1;

    __device__ __forceinline__ std::int32_t fetch(int index) const {
        return index < num_pages ? __ldg(pages + index) : -1;
    }
    // Points the window at page index `first` of sequence s (warp-uniform).
    __device__ __forceinline__ void start(const SeqInfo& s, int block_size, int first, int lane) {
        pages = s.pages;
        num_pages = (s.kv_len + block_size - 1) / block_size;
        base = first;
        cur = fetch(first + lane);
        next = fetch(first + 32 + lane);
    }
    // The id at page index `index` (warp-uniform, at most one window past the last call's).
    __device__ __forceinline__ std::int32_t at(int index, int lane) {
        if (index - base >= 32) {
            base += 32;
            cur = next;
            next = fetch(base + 32 + lane);
        }
        return __shfl_sync(0xffffffffu, cur, index - base);
    }
};

// 2^x on the special-function unit, denormal results flushed to zero: softmax weights that
// small are zero after the bf16 rounding anyway.
__device__ __forceinline__ float exp2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// Folds a tile's row maxima (rows g and g + 8, this lane's share) into the running maxima m:
// reduces them over the quad and gives the base to subtract from the tile's scaled scores
// (scale * max; 0 while a row has seen nothing, which keeps exp2 at 0) and the factor that
// rescales the older state. Maxima are kept in the scores' own units; `scale` (log2 units per
// score unit) is applied here, so a kernel may scale each score inside its exp2's FMA.
// Only the first kRows rows are live (the others are left as they are).
template <int kRows = 2>
__device__ __forceinline__ void advance_max(const float (&tile_max)[2], float (&m)[2],
                                            float (&base)[2], float (&corr)[2], float scale) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        float mx = tile_max[r];
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float new_max = fmaxf(m[r], mx);
        // Unfused products: an unchanged maximum gives corr exactly 1.
        base[r] = new_max == -INFINITY ? 0.0f : __fmul_rn(new_max, scale);
        corr[r] = exp2f(__fmul_rn(m[r], scale) - base[r]);
        m[r] = new_max;
    }
}

// The softmax weight of raw score s: 2^(s * scale - base), one FMA and one exp2 (base from
// advance_max).
__device__ __forceinline__ float softmax_weight(float s, float scale, float base) {
    return exp2_approx(fmaf(s, scale, -base));
}

// Rescales the output accumulators of rows g (and g + 8 when kRows is 2) by advance_max's
// factors. Later tiles rarely raise a row's maximum: the warp skips the rescale when no lane's
// did (corr is exactly 1 then).
template <int kRows, int kNTiles>
__device__ __forceinline__ void rescale_rows(float (&o)[kNTiles][4], const float (&corr)[2]) {
    if (!__any_sync(0xffffffffu, corr[0] != 1.0f || (kRows > 1 && corr[1] != 1.0f))) return;
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) {
        o[n][0] *= corr[0];
        o[n][1] *= corr[0];
        if (kRows > 1) {
            o[n][2] *= corr[1];
            o[n][3] *= corr[1];
        }
    }
}

// Folds the landed tile at `stage_addr` (its first `valid` tokens are real, valid > 0) into
// st. Maxima are taken on raw scores and the scale folds into each weight's exp2 FMA; only
// the rows of live heads (g, and g + 8 when kBig) are worked on; a tile that raised no row's
// maximum skips the output rescale (warp-uniform).
template <int kD, bool kBig>
__device__ __forceinline__ void attend_tile(unsigned stage_addr, const StageOffsets<kD>& so,
                                            const unsigned (&qa)[Shape<kD>::kKSteps][4],
                                            int valid, float scale_log2, const Lane<kD>& ln,
                                            State<kD>& st) {
    using S = Shape<kD>;
    constexpr int kRows = kBig ? 2 : 1;
    // S = Q K^T: sc[0] tokens 0-7, sc[1] tokens 8-15 of the tile.
    float sc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int ks = 0; ks < S::kKSteps; ++ks) {
        unsigned b[4];
        ldmatrix_x4(stage_addr + so.k[ks], b);
        mma_bf16(sc[0], qa[ks], b[0], b[1]);
        mma_bf16(sc[1], qa[ks], b[2], b[3]);
    }

    if (valid < kTileTokens) {  // warp-uniform: the sequence's last tile
#pragma unroll
        for (int n = 0; n < 2; ++n) {
#pragma unroll
            for (int e = 0; e < 2 * kRows; ++e) {
                if (n * 8 + 2 * ln.t + (e & 1) >= valid) sc[n][e] = -INFINITY;
            }
        }
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 2; ++n) {
#pragma unroll
        for (int e = 0; e < 2 * kRows; ++e) tile_max[e >> 1] = fmaxf(tile_max[e >> 1], sc[n][e]);
    }
    float corr[2] = {1.0f, 1.0f}, base[2] = {0.0f, 0.0f};
    advance_max<kRows>(tile_max, st.m, base, corr, scale_log2);  // finite: token 0 is real
    const auto weight = [&](float x, int r) { return softmax_weight(x, scale_log2, base[r]); };
    unsigned pa[4];
    float sum0 = 0.0f, sum1 = 0.0f;
    pa[0] = pack_bf16(weight(sc[0][0], 0), weight(sc[0][1], 0), sum0);
    pa[2] = pack_bf16(weight(sc[1][0], 0), weight(sc[1][1], 0), sum0);
    if (kBig) {
        pa[1] = pack_bf16(weight(sc[0][2], 1), weight(sc[0][3], 1), sum1);
        pa[3] = pack_bf16(weight(sc[1][2], 1), weight(sc[1][3], 1), sum1);
    } else {
        pa[1] = 0u;
        pa[3] = 0u;
    }
    st.l[0] = st.l[0] * corr[0] + sum0;
    if (kBig) st.l[1] = st.l[1] * corr[1] + sum1;
    rescale_rows<kRows>(st.o, corr);

    // O += P V, two 8-dim output tiles per ldmatrix.
#pragma unroll
    for (int np = 0; np < S::kNTiles / 2; ++np) {
        unsigned b[4];
        ldmatrix_x4_trans(stage_addr + so.v[np], b);
        mma_bf16(st.o[2 * np], pa, b[0], b[1]);
        mma_bf16(st.o[2 * np + 1], pa, b[2], b[3]);
    }
}

}  // namespace inferscale::backends::cuda::tc
