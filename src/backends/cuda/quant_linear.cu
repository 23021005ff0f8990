// Linears over block-quantized weights kept as the file's blocks (quant_blocks.cuh).
//
// quant_gemv: a few tokens, where a linear streams its weight once, so the kernel reads the
// blocks and dequantizes in registers, with int8 dot products (dp4a) as llama.cpp's CUDA
// backend runs them: the activations are first quantized per 32 elements (quantize_rows:
// scale amax / 127, quants round(x * 127 / amax), half to even). A CTA of 8 warps owns a few
// output rows; each warp takes kRowsPerWarp rows and a 1/warps_per_row share of each: the
// K-quants' super-blocks 8 lanes to one (quant_superblock_runs.cuh: whole 16-byte spans per
// lane), every other type by 8-element pieces (quant_blocks.cuh). Every unit of a row meets
// every token's activations. Warp sums, then one sum per row and token across the warps of
// the row through shared memory, in warp order: results do not depend on timing.
//
// dequantize_rows: rows of the blocks into bf16 or f32, for the tensor-core GEMM of a prefill
// and for embedding lookups; bit-exact with tensor::dequantize_blocks before the rounding.

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/device_utils.cuh"
#include "backends/cuda/quant_activations.cuh"
#include "backends/cuda/quant_blocks.cuh"
#include "backends/cuda/quant_superblock_runs.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kGemvThreads = 256, kGemvWarps = kGemvThreads / 32, kRowsPerWarp = 2;

// One thread per 32 activations: their scale and int8 quants.
__global__ void quantize_rows_kernel(const bf16* x, std::int64_t groups, std::int8_t* q,
                                     float* scale) {
    allow_next_launch();
    wait_for_inputs();
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t g = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         g < groups; g += stride) {
        scale[g] = quantize_group32(x + g * 32, q + g * 32);
    }
}

struct GemvArgs {
    const std::uint8_t* w;
    std::int64_t row_bytes, out, in;
    const std::int8_t* xq;  // [n, in]
    const float* xscale;    // [n, in / 32]
    int n;
    const void* bias;
    bool bias_f32;
    void* y;
    bool y_f32;
    int warps_per_row;  // 1, 2, 4 or 8
};

// The rows a warp owns and its share of them: CTA blockIdx.x holds `groups` groups of
// warps_per_row warps, each group kRowsPerWarp rows; `slice` is the warp's place in its group.
struct WarpRows {
    int warp, lane, groups, group, slice;
    const std::uint8_t* rows[kRowsPerWarp];

    __device__ explicit WarpRows(const GemvArgs& a)
        : warp(static_cast<int>(threadIdx.x) / 32),
          lane(static_cast<int>(threadIdx.x) % 32),
          groups(kGemvWarps / a.warps_per_row),
          group(warp / a.warps_per_row),
          slice(warp % a.warps_per_row) {
        const std::int64_t row0 =
            (static_cast<std::int64_t>(blockIdx.x) * groups + group) * kRowsPerWarp;
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
            // A row past the end reads the last one; its sums are not written.
            const std::int64_t row = row0 + r < a.out ? row0 + r : a.out - 1;
            rows[r] = a.w + row * a.row_bytes;
        }
    }
};

// Warp sums, then per row and token the sum over the row's warps in warp order, the bias, y.
template <int N>
__device__ void finish_rows(const GemvArgs& a, const WarpRows& w,
                            const float (&acc)[kRowsPerWarp][N]) {
    __shared__ float partial[kGemvWarps][kRowsPerWarp][N];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
        for (int t = 0; t < N; ++t) {
            const float s = warp_sum(acc[r][t]);
            if (w.lane == 0) partial[w.warp][r][t] = s;
        }
    }
    __syncthreads();
    for (int i = static_cast<int>(threadIdx.x); i < w.groups * kRowsPerWarp * N;
         i += kGemvThreads) {
        const int g = i / (kRowsPerWarp * N), r = i / N % kRowsPerWarp, t = i % N;
        const std::int64_t row =
            (static_cast<std::int64_t>(blockIdx.x) * w.groups + g) * kRowsPerWarp + r;
        if (t >= a.n || row >= a.out) continue;
        float sum = 0.0f;
        for (int s = 0; s < a.warps_per_row; ++s) sum += partial[g * a.warps_per_row + s][r][t];
        if (a.bias != nullptr) {
            sum += a.bias_f32 ? static_cast<const float*>(a.bias)[row]
                              : to_f32(static_cast<const bf16*>(a.bias)[row]);
        }
        const std::int64_t at = t * a.out + row;
        if (a.y_f32) {
            static_cast<float*>(a.y)[at] = sum;
        } else {
            static_cast<bf16*>(a.y)[at] = from_f32<bf16>(sum);
        }
    }
}

// Every block type, a lane per 8-element piece (lane l of a warp on piece p, p + 32 *
// warps_per_row, ...).
template <class Codec, int N>
__global__ void __launch_bounds__(kGemvThreads) quant_gemv_kernel(GemvArgs a) {
    allow_next_launch();
    wait_for_inputs();
    const WarpRows w(a);
    float acc[kRowsPerWarp][N] = {};
    const std::int64_t pieces = a.in / 8, stride = 32 * a.warps_per_row, groups32 = a.in / 32;
#pragma unroll 2
    for (std::int64_t p = w.slice * 32 + w.lane; p < pieces; p += stride) {
        const std::int64_t e0 = p * 8;
        uint2 xq[N];
        float xsum[N], xscale[N];
#pragma unroll
        for (int t = 0; t < N; ++t) {
            if (t < a.n) {
                xq[t] = *reinterpret_cast<const uint2*>(a.xq + t * a.in + e0);
                xscale[t] = a.xscale[t * groups32 + e0 / 32];
            } else {
                xq[t] = make_uint2(0, 0);
                xscale[t] = 0.0f;
            }
            xsum[t] = static_cast<float>(
                quant_detail::sum_bytes(xq[t].x, quant_detail::sum_bytes(xq[t].y, 0)));
        }
        const std::int64_t block = e0 / Codec::kElems;
        const int o = static_cast<int>(e0 % Codec::kElems);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
            const QuantPiece q = Codec::piece(w.rows[r] + block * Codec::kBytes, o);
#pragma unroll
            for (int t = 0; t < N; ++t) {
                const int dot = __dp4a(static_cast<int>(q.lo), static_cast<int>(xq[t].x),
                                       __dp4a(static_cast<int>(q.hi), static_cast<int>(xq[t].y), 0));
                acc[r][t] = fmaf(xscale[t], fmaf(q.scale, static_cast<float>(dot), q.offset * xsum[t]),
                                 acc[r][t]);
            }
        }
    }
    finish_rows<N>(a, w, acc);
}

// The K-quants (quant_superblock_runs.cuh): 8 lanes per 256-element super-block, a warp on 4
// super-blocks at a time (lanes 8s..8s+7 on super-block 4i + s of the warp's share), each lane
// on its two 16-element runs.
template <class Runs, int N>
__global__ void __launch_bounds__(kGemvThreads) quant_gemv_superblock_kernel(GemvArgs a) {
    allow_next_launch();
    const WarpRows w(a);
    const int j = w.lane % 8;
    const int start[2] = {Runs::start(j, 0), Runs::start(j, 1)};
    const std::int64_t blocks = a.in / 256, stride = 4 * a.warps_per_row, groups32 = a.in / 32;
    const std::int64_t first = w.slice * 4 + w.lane / 8;
    // The first super-blocks' weights are read before the kernels ahead have finished
    // (dependent_launch.cuh): no kernel writes them.
    QuantRuns head[kRowsPerWarp];
    if (first < blocks) {
#pragma unroll
        for (int row = 0; row < kRowsPerWarp; ++row) {
            head[row] = Runs::load(w.rows[row] + first * Runs::kBytes, j);
        }
    }
    wait_for_inputs();
    float acc[kRowsPerWarp][N] = {};
    // Super-block b of the rows, whose runs are u, against every token's activations, a token
    // at a time (its 32 quants are all the registers it takes).
    const auto step = [&](std::int64_t b, const QuantRuns(&u)[kRowsPerWarp]) {
#pragma unroll
        for (int t = 0; t < N; ++t) {
            if (t >= a.n) break;
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const std::int64_t e0 = b * 256 + start[r];
                std::uint32_t x[4];
                quant_detail::words(*reinterpret_cast<const uint4*>(a.xq + t * a.in + e0), x);
                const float xscale = a.xscale[t * groups32 + e0 / 32];
                const int xsum = Runs::kOffset ? sum_bytes16(x) : 0;
#pragma unroll
                for (int row = 0; row < kRowsPerWarp; ++row) {
                    acc[row][t] = fmaf(xscale, run_dot<Runs>(u[row], r, x, xsum), acc[row][t]);
                }
            }
        }
    };
    if (first < blocks) {
        step(first, head);
#pragma unroll 2
        for (std::int64_t b = first + stride; b < blocks; b += stride) {
            QuantRuns u[kRowsPerWarp];
#pragma unroll
            for (int row = 0; row < kRowsPerWarp; ++row) {
                u[row] = Runs::load(w.rows[row] + b * Runs::kBytes, j);
            }
            step(b, u);
        }
    }
    finish_rows<N>(a, w, acc);
}

template <class Codec, class TOut>
__global__ void dequantize_rows_kernel(const std::uint8_t* w, std::int64_t row_bytes,
                                       std::int64_t in, std::int64_t num_rows,
                                       const std::int32_t* row_ids, std::int64_t id_limit,
                                       TOut* out) {
    const std::int64_t row_pieces = in / 8, total = num_rows * row_pieces;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < total; i += stride) {
        const std::int64_t r = i / row_pieces, e0 = i % row_pieces * 8;
        std::int64_t src = r;
        if (row_ids != nullptr) {
            src = row_ids[r];
            if (src < 0 || src >= id_limit) __trap();  // out-of-range token id: a bug upstream
        }
        const QuantPiece q = Codec::piece(w + src * row_bytes + e0 / Codec::kElems * Codec::kBytes,
                                          static_cast<int>(e0 % Codec::kElems));
        float v[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = piece_value(q, j);
        store8(out + r * in + e0, v);
    }
}

// Each warp's share of a row should keep its lanes busy for a few steps: `units` pieces (or
// super-blocks) per row, `per_step` of them per warp step.
int warps_per_row(std::int64_t units, std::int64_t per_step) {
    const std::int64_t steps = units / per_step / 4;
    return steps >= 8 ? 8 : steps >= 4 ? 4 : steps >= 2 ? 2 : 1;
}

// The kernel instance for n tokens: N = 1, 2, 4 or 8.
template <template <class, int> class Launch, class Codec>
void for_tokens(std::int64_t n, const GemvArgs& a, cudaStream_t stream) {
    if (n == 1) {
        Launch<Codec, 1>::run(a, stream);
    } else if (n == 2) {
        Launch<Codec, 2>::run(a, stream);
    } else if (n <= 4) {
        Launch<Codec, 4>::run(a, stream);
    } else {
        Launch<Codec, 8>::run(a, stream);
    }
}

unsigned gemv_grid(const GemvArgs& a) {
    const std::int64_t rows_per_cta = kRowsPerWarp * (kGemvWarps / a.warps_per_row);
    return static_cast<unsigned>((a.out + rows_per_cta - 1) / rows_per_cta);
}

template <class Codec, int N>
struct PieceGemv {
    static void run(const GemvArgs& a, cudaStream_t stream) {
        launch_dependent(quant_gemv_kernel<Codec, N>, gemv_grid(a), kGemvThreads, 0, stream, a);
    }
};

template <class Runs, int N>
struct SuperblockGemv {
    static void run(const GemvArgs& a, cudaStream_t stream) {
        launch_dependent(quant_gemv_superblock_kernel<Runs, N>, gemv_grid(a), kGemvThreads, 0,
                         stream, a);
    }
};

}  // namespace

void launch_quantize_activations(const void* x, std::int64_t n, std::int64_t in,
                                 const QuantActivations& out, cudaStream_t stream) {
    IS_CHECK(in % 32 == 0) << "quantized activations of " << in << " columns";
    const std::int64_t groups = n * in / 32;
    if (groups == 0) return;
    constexpr int kThreads = 128;
    launch_dependent(quantize_rows_kernel, grid_for(groups, kThreads), kThreads, 0, stream,
                     static_cast<const bf16*>(x), groups, out.quants, out.scales);
    IS_CUDA_CHECK_LAUNCH();
}

void launch_quant_gemv(const QuantActivations& x, std::int64_t n, std::int64_t in,
                       const QuantLinearTarget& t, bool y_f32, cudaStream_t stream) {
    IS_CHECK(n >= 1 && n <= kQuantGemvMaxRows && in % 32 == 0)
        << "quant gemv: " << n << " x " << in;
    GemvArgs a{static_cast<const std::uint8_t*>(t.w),
               static_cast<std::int64_t>(tensor::dtype_row_bytes(t.dtype, in)),
               t.out,
               in,
               x.quants,
               x.scales,
               static_cast<int>(n),
               t.bias,
               t.bias_f32,
               t.y,
               y_f32,
               1};
    bool known = with_superblock_runs(t.dtype, [&](auto runs) {
        a.warps_per_row = warps_per_row(in / 256, 4);
        for_tokens<SuperblockGemv, decltype(runs)>(n, a, stream);
    });
    if (!known) {
        known = with_block_codec(t.dtype, [&](auto codec) {
            a.warps_per_row = warps_per_row(in / 8, 32);
            for_tokens<PieceGemv, decltype(codec)>(n, a, stream);
        });
    }
    IS_CHECK(known) << "quant gemv of " << tensor::dtype_name(t.dtype);
    IS_CUDA_CHECK_LAUNCH();
}

void launch_dequantize_rows(const void* w, DType dtype, std::int64_t in, std::int64_t num_rows,
                            const std::int32_t* row_ids, std::int64_t id_limit, void* out,
                            DType out_dtype, cudaStream_t stream) {
    IS_CHECK(in % 8 == 0) << "dequantize_rows of " << in << " columns";
    if (num_rows == 0) return;
    constexpr int kThreads = 256;
    const unsigned grid = grid_for(num_rows * (in / 8), kThreads);
    const auto* src = static_cast<const std::uint8_t*>(w);
    const auto row_bytes = static_cast<std::int64_t>(tensor::dtype_row_bytes(dtype, in));
    const bool known = with_block_codec(dtype, [&](auto codec) {
        using Codec = decltype(codec);
        if (out_dtype == DType::F32) {
            dequantize_rows_kernel<Codec><<<grid, kThreads, 0, stream>>>(
                src, row_bytes, in, num_rows, row_ids, id_limit, static_cast<float*>(out));
        } else {
            IS_CHECK(out_dtype == DType::BF16) << "dequantize_rows into "
                                               << tensor::dtype_name(out_dtype);
            dequantize_rows_kernel<Codec><<<grid, kThreads, 0, stream>>>(
                src, row_bytes, in, num_rows, row_ids, id_limit, static_cast<bf16*>(out));
        }
    });
    IS_CHECK(known) << "dequantize_rows of " << tensor::dtype_name(dtype);
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace inferscale::backends::cuda
