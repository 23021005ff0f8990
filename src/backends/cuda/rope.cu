// RoPE in the Hugging Face rotate_half convention: dim i pairs with dim i + d/2 and both use
// the angle of column i of the f32 tables. One thread per (token, head, pair) rotates its pair
// in place, so no two threads touch the same element.
// When d/2 is a multiple of 8 (every model head_dim) and the pointers are aligned, a thread
// rotates 8 pairs instead: 16-byte loads of both halves and of the cos/sin rows, and one index
// decomposition per 8 pairs rather than per pair (decode rotates 32 heads x 64 pairs per call,
// 256 threads in 128-thread blocks).
// Q and K rotate in one launch: the index space runs over Q's rows, then K's (`RopeRows` pairs
// each buffer with its head count; a single tensor leaves the second empty). A decode layer
// also writes K and V to the pages in that launch (rope_write_kv_kernel).

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/device_utils.cuh"
#include "backends/cuda/fast_divisor.h"

namespace inferscale::backends::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kVecThreads = 128;

template <class T>
struct RopeRows {
    T* x = nullptr;
    std::int64_t heads = 0;  // rows per token
};

// The row `row` of the pair (Q's rows first) and its token: sets v to the row's first element.
template <class T>
__device__ __forceinline__ std::int64_t locate(const RopeRows<T>& a, const RopeRows<T>& b,
                                               std::int64_t n, std::int64_t row, int width,
                                               T*& v) {
    const std::int64_t rows_a = n * a.heads;
    if (row < rows_a) {
        v = a.x + row * width;
        return row / a.heads;
    }
    row -= rows_a;
    v = b.x + row * width;
    return row / b.heads;
}

// The angles of pairs i .. i + 7 at position `pos`, from the f32 tables.
struct Angles8 {
    float c[8], s[8];
};
__device__ __forceinline__ Angles8 load_angles(std::int32_t pos, int i, int half,
                                               const float* cos_table, const float* sin_table,
                                               std::int64_t max_positions) {
    if (pos < 0 || pos >= max_positions) __trap();  // beyond the tables: a bug upstream
    Angles8 a;
    load8(cos_table + static_cast<std::int64_t>(pos) * half + i, a.c);
    load8(sin_table + static_cast<std::int64_t>(pos) * half + i, a.s);
    return a;
}

// Pairs i .. i + 7 of the row at x (dims i.. with dims i + half..) rotated by `a`, into r0
// (first halves) and r1 (second halves); x is not written.
template <class T>
__device__ __forceinline__ void rotate8(const T* x, int i, int half, const Angles8& a,
                                        float (&r0)[8], float (&r1)[8]) {
    float x0[8], x1[8];
    load8(x + i, x0);
    load8(x + i + half, x1);
#pragma unroll
    for (int e = 0; e < 8; ++e) rope_rotate(x0[e], x1[e], a.c[e], a.s[e], r0[e], r1[e]);
}

template <class T>
__global__ void rope_vec_kernel(RopeRows<T> a, RopeRows<T> b, std::int64_t n, int half,
                                const std::int32_t* positions, const float* cos_table,
                                const float* sin_table, std::int64_t max_positions) {
    allow_next_launch();
    wait_for_inputs();
    const int groups = half / 8;
    const std::int64_t count = n * (a.heads + b.heads) * groups;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         idx < count; idx += stride) {
        const int i = static_cast<int>(idx % groups) * 8;
        T* v = nullptr;
        const std::int64_t t = locate(a, b, n, idx / groups, 2 * half, v);
        float r0[8], r1[8];
        rotate8(v, i, half, load_angles(positions[t], i, half, cos_table, sin_table, max_positions),
                r0, r1);
        store8(v + i, r0);
        store8(v + i + half, r1);
    }
}

template <class T>
__global__ void rope_kernel(RopeRows<T> a, RopeRows<T> b, std::int64_t n, std::int64_t half,
                            const std::int32_t* positions, const float* cos_table,
                            const float* sin_table, std::int64_t max_positions) {
    allow_next_launch();
    wait_for_inputs();
    const std::int64_t count = n * (a.heads + b.heads) * half;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         idx < count; idx += stride) {
        const std::int64_t i = idx % half;
        T* v = nullptr;
        const std::int64_t t = locate(a, b, n, idx / half, static_cast<int>(2 * half), v);
        const std::int32_t pos = positions[t];
        if (pos < 0 || pos >= max_positions) __trap();  // beyond the tables: a bug upstream
        const float c = cos_table[pos * half + i];
        const float s = sin_table[pos * half + i];
        float r0, r1;
        rope_rotate(to_f32(v[i]), to_f32(v[i + half]), c, s, r0, r1);
        v[i] = from_f32<T>(r0);
        v[i + half] = from_f32<T>(r1);
    }
}

template <class T>
void rope_typed(RopeRows<T> a, RopeRows<T> b, std::int64_t n, std::int64_t half,
                const std::int32_t* positions, const float* cos, const float* sin,
                std::int64_t max_positions, cudaStream_t stream) {
    const std::int64_t rows = n * (a.heads + b.heads);
    if (half % 8 == 0 && half <= 0x7fffffff && aligned16(a.x) &&
        (b.heads == 0 || aligned16(b.x)) && aligned16(cos) && aligned16(sin)) {
        const std::int64_t count = rows * (half / 8);
        launch_dependent(rope_vec_kernel<T>, grid_for(count, kVecThreads), kVecThreads, 0, stream,
                         a, b, n, static_cast<int>(half), positions, cos, sin, max_positions);
    } else {
        const std::int64_t count = rows * half;
        launch_dependent(rope_kernel<T>, grid_for(count, kThreads), kThreads, 0, stream, a, b, n,
                         half, positions, cos, sin, max_positions);
    }
}

// rope_vec_kernel over Q and K, and write_kv, in one pass: the index space runs token by token
// over its Q rows, K rows and V rows, 8 pairs a thread. Q and K rotate with the same arithmetic
// as rope_vec_kernel, from QkvRows' sources into its outputs (in place for the projections' own
// buffers); K's rotated and V's rows also go to the token's slot (-1: padding, not written).
// Units are counted in 32 bits (the launcher refuses 2^30 of them, so a grid stride past the
// last stays in range) and split into (token, row, pairs) by fast divisors: a launch after a
// GEMM that cannot start it early runs this whole index decomposition on the critical path.
__global__ void rope_write_kv_kernel(QkvRows rows, int q_heads, int kv_heads, int count,
                                     FastDivisor groups_div, FastDivisor heads_div,
                                     const std::int32_t* positions, const float* cos_table,
                                     const float* sin_table, std::int64_t max_positions,
                                     const std::int32_t* slots, std::int64_t num_slots,
                                     bf16* k_pages, bf16* v_pages) {
    allow_next_launch();
    const int half = 8 * static_cast<int>(groups_div.divisor), width = 2 * half;
    const int stride = static_cast<int>(gridDim.x * blockDim.x);
    const auto* q = static_cast<const bf16*>(rows.q);
    const auto* k = static_cast<const bf16*>(rows.k);
    const auto* v = static_cast<const bf16*>(rows.v);
    // Index idx's token, row (Q's heads, then K's, then V's) and pairs, with what the unit
    // needs that no kernel of this step writes: the token's slot (K and V rows) and angles (Q
    // and K rows).
    struct Unit {
        std::int64_t t;
        int i, h, kv_head;
        std::int32_t slot;
        Angles8 angles;
    };
    const auto locate_unit = [&](int idx) {
        Unit u;
        const FastDivisor::Split row = groups_div.split(idx);  // row of the token-major rows
        u.i = row.rem * 8;
        const FastDivisor::Split th = heads_div.split(row.quot);
        u.t = th.quot;
        u.h = th.rem;
        u.kv_head = u.h - q_heads - (u.h >= q_heads + kv_heads ? kv_heads : 0);
        u.slot = -1;
        if (u.h >= q_heads) {
            u.slot = slots[u.t];
            if (u.slot != -1 && (u.slot < 0 || u.slot >= num_slots)) __trap();  // off the pages
        }
        if (u.h < q_heads + kv_heads) {
            u.angles = load_angles(positions[u.t], u.i, half, cos_table, sin_table, max_positions);
        }
        return u;
    };
    // A thread's first unit (usually its only one) is located before the projections are
    // ready (dependent_launch.cuh).
    const int first = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    Unit u;
    if (first < count) u = locate_unit(first);
    wait_for_inputs();
    for (int idx = first; idx < count; idx += stride) {
        if (idx != first) u = locate_unit(idx);
        const int i = u.i, kv_head = u.kv_head;
        const std::int64_t t = u.t;
        const std::int64_t page_row =
            (static_cast<std::int64_t>(u.slot) * kv_heads + kv_head) * width;
        if (u.h >= q_heads + kv_heads) {  // V: copied as it is
            if (u.slot == -1) continue;
            const bf16* src = v + t * rows.v_stride + kv_head * width;
            *reinterpret_cast<uint4*>(v_pages + page_row + i) =
                *reinterpret_cast<const uint4*>(src + i);
            *reinterpret_cast<uint4*>(v_pages + page_row + i + half) =
                *reinterpret_cast<const uint4*>(src + i + half);
            continue;
        }
        const int h = u.h;
        const bool is_q = h < q_heads;
        const bf16* src = is_q ? q + t * rows.q_stride + h * width
                               : k + t * rows.k_stride + kv_head * width;
        float r0[8], r1[8];
        rotate8(src, i, half, u.angles, r0, r1);
        bf16* dst = nullptr;
        if (is_q) {
            dst = static_cast<bf16*>(rows.q_out) + t * rows.q_out_stride + h * width;
        } else if (rows.k_out != nullptr) {
            dst = static_cast<bf16*>(rows.k_out) + t * rows.k_out_stride + kv_head * width;
        }
        if (dst != nullptr) {
            store8(dst + i, r0);
            store8(dst + i + half, r1);
        }
        if (u.slot != -1) {
            store8(k_pages + page_row + i, r0);
            store8(k_pages + page_row + i + half, r1);
        }
    }
}

}  // namespace

bool launch_rope_write_kv(const QkvRows& rows, std::int64_t q_heads, std::int64_t n,
                          const std::int32_t* positions, const float* cos, const float* sin,
                          std::int64_t max_positions, const std::int32_t* slots,
                          const PagedKvView& pages, cudaStream_t stream) {
    const std::int64_t half = pages.head_dim / 2;
    const std::int64_t count = n * (q_heads + 2 * pages.kv_heads) * (half / 8);
    const auto row_aligned = [](const void* p, std::int64_t stride) {
        return aligned16(p) && stride % 8 == 0;
    };
    if (pages.fp8 || half % 8 != 0 || q_heads > (1 << 20) || count >= (std::int64_t{1} << 30) ||
        !row_aligned(rows.q, rows.q_stride) || !row_aligned(rows.k, rows.k_stride) ||
        !row_aligned(rows.v, rows.v_stride) || !row_aligned(rows.q_out, rows.q_out_stride) ||
        (rows.k_out != nullptr && !row_aligned(rows.k_out, rows.k_out_stride)) || !aligned16(cos) ||
        !aligned16(sin) || !aligned16(pages.k) || !aligned16(pages.v)) {
        return false;
    }
    if (count == 0) return true;
    const FastDivisor groups(static_cast<std::uint32_t>(half / 8));
    const FastDivisor heads(static_cast<std::uint32_t>(q_heads + 2 * pages.kv_heads));
    launch_dependent(rope_write_kv_kernel, grid_for(count, kVecThreads), kVecThreads, 0, stream,
                     rows, static_cast<int>(q_heads), pages.kv_heads, static_cast<int>(count),
                     groups, heads, positions, cos, sin, max_positions, slots,
                     pages.num_blocks * pages.block_size, static_cast<bf16*>(pages.k),
                     static_cast<bf16*>(pages.v));
    return true;
}

void launch_rope(void* q, std::int64_t q_heads, void* k, std::int64_t k_heads, DType dtype,
                 std::int64_t n, std::int64_t head_dim, const std::int32_t* positions,
                 const float* cos, const float* sin, std::int64_t max_positions,
                 cudaStream_t stream) {
    const std::int64_t half = head_dim / 2;
    if (n * (q_heads + k_heads) * half == 0) return;
    if (dtype == DType::BF16) {
        rope_typed<bf16>({static_cast<bf16*>(q), q_heads}, {static_cast<bf16*>(k), k_heads}, n,
                         half, positions, cos, sin, max_positions, stream);
    } else {
        IS_CHECK(dtype == DType::F32) << "rope dtype " << tensor::dtype_name(dtype);
        rope_typed<float>({static_cast<float*>(q), q_heads}, {static_cast<float*>(k), k_heads}, n,
                          half, positions, cos, sin, max_positions, stream);
    }
}

}  // namespace inferscale::backends::cuda
