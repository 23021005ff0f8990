// Linears over block-quantized weights kept as the file's blocks (quant_blocks.cuh).
//
// quant_gemv: a few tokens, where a linear streams its weight once, so the kernel reads the
// blocks and dequantizes in registers, with int8 dot products (dp4a) as llama.cpp's CUDA
// backend runs them: the activations are first quantized per 32 elements (quantize_rows:
// scale amax / 127, quants round(x * 127 / amax), half to even). A CTA of 8 warps owns a few
// output rows; each warp takes kRowsPerWarp rows and a 1/warps_per_row share of the
// 8-element pieces of `in` (lane l of a warp on piece p, p + 32 * warps_per_row, ...), and
// every piece of a row meets every token's activations. Warp sums, then one sum per row and
// token across the warps of the row through shared memory, in warp order: results do not
// depend on timing.
//
// dequantize_rows: rows of the blocks into bf16 or f32, for the tensor-core GEMM of a prefill
// and for embedding lookups; bit-exact with tensor::dequantize_blocks before the rounding.

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_utils.cuh"
#include "backends/cuda/quant_blocks.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kGemvThreads = 256, kGemvWarps = kGemvThreads / 32, kRowsPerWarp = 2;
constexpr std::uint32_t kOnes = 0x01010101u;  // dp4a with it sums 4 int8 lanes

// One thread per 32 activations: their scale and int8 quants.
__global__ void quantize_rows_kernel(const bf16* x, std::int64_t groups, std::int8_t* q,
                                     float* scale) {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t g = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         g < groups; g += stride) {
        float v[32];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float part[8];
            load8(x + g * 32 + 8 * i, part);
#pragma unroll
            for (int j = 0; j < 8; ++j) v[8 * i + j] = part[j];
        }
        float amax = 0.0f;
#pragma unroll
        for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(v[j]));
        const float inverse = amax != 0.0f ? 127.0f / amax : 0.0f;
        std::uint32_t words[8];
#pragma unroll
        for (int w = 0; w < 8; ++w) {
            std::uint32_t word = 0;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int quant = __float2int_rn(v[4 * w + j] * inverse);
                word |= (static_cast<std::uint32_t>(quant) & 0xffu) << (8 * j);
            }
            words[w] = word;
        }
        auto* out = reinterpret_cast<uint4*>(q + g * 32);
        out[0] = make_uint4(words[0], words[1], words[2], words[3]);
        out[1] = make_uint4(words[4], words[5], words[6], words[7]);
        scale[g] = amax / 127.0f;
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

template <class Codec, int N>
__global__ void __launch_bounds__(kGemvThreads) quant_gemv_kernel(GemvArgs a) {
    __shared__ float partial[kGemvWarps][kRowsPerWarp][N];
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const int groups = kGemvWarps / a.warps_per_row;
    const int group = warp / a.warps_per_row, slice = warp % a.warps_per_row;
    const std::int64_t row0 =
        (static_cast<std::int64_t>(blockIdx.x) * groups + group) * kRowsPerWarp;
    const std::uint8_t* rows[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const std::int64_t row = row0 + r < a.out ? row0 + r : a.out - 1;  // written only if real
        rows[r] = a.w + row * a.row_bytes;
    }
    float acc[kRowsPerWarp][N] = {};
    const std::int64_t pieces = a.in / 8, stride = 32 * a.warps_per_row, groups32 = a.in / 32;
#pragma unroll 2
    for (std::int64_t p = slice * 32 + lane; p < pieces; p += stride) {
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
                __dp4a(static_cast<int>(xq[t].x), static_cast<int>(kOnes),
                       __dp4a(static_cast<int>(xq[t].y), static_cast<int>(kOnes), 0)));
        }
        const std::int64_t block = e0 / Codec::kElems;
        const int o = static_cast<int>(e0 % Codec::kElems);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
            const QuantPiece q = Codec::piece(rows[r] + block * Codec::kBytes, o);
#pragma unroll
            for (int t = 0; t < N; ++t) {
                const int dot = __dp4a(static_cast<int>(q.lo), static_cast<int>(xq[t].x),
                                       __dp4a(static_cast<int>(q.hi), static_cast<int>(xq[t].y), 0));
                acc[r][t] = fmaf(xscale[t], fmaf(q.scale, static_cast<float>(dot), q.offset * xsum[t]),
                                 acc[r][t]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
        for (int t = 0; t < N; ++t) {
            const float s = warp_sum(acc[r][t]);
            if (lane == 0) partial[warp][r][t] = s;
        }
    }
    __syncthreads();
    for (int i = static_cast<int>(threadIdx.x); i < groups * kRowsPerWarp * N; i += kGemvThreads) {
        const int g = i / (kRowsPerWarp * N), r = i / N % kRowsPerWarp, t = i % N;
        const std::int64_t row =
            (static_cast<std::int64_t>(blockIdx.x) * groups + g) * kRowsPerWarp + r;
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

// The pieces of a warp's share should keep every lane busy for a few steps.
int warps_per_row(std::int64_t in) {
    const std::int64_t steps = in / 8 / (32 * 4);
    return steps >= 8 ? 8 : steps >= 4 ? 4 : steps >= 2 ? 2 : 1;
}

template <class Codec, int N>
void gemv(const GemvArgs& a, cudaStream_t stream) {
    const std::int64_t rows_per_cta = kRowsPerWarp * (kGemvWarps / a.warps_per_row);
    const auto grid = static_cast<unsigned>((a.out + rows_per_cta - 1) / rows_per_cta);
    quant_gemv_kernel<Codec, N><<<grid, kGemvThreads, 0, stream>>>(a);
}

}  // namespace

void launch_quantize_activations(const void* x, std::int64_t n, std::int64_t in,
                                 const QuantActivations& out, cudaStream_t stream) {
    IS_CHECK(in % 32 == 0) << "quantized activations of " << in << " columns";
    const std::int64_t groups = n * in / 32;
    if (groups == 0) return;
    constexpr int kThreads = 128;
    quantize_rows_kernel<<<grid_for(groups, kThreads), kThreads, 0, stream>>>(
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
               warps_per_row(in)};
    const bool known = with_block_codec(t.dtype, [&](auto codec) {
        using Codec = decltype(codec);
        if (n == 1) {
            gemv<Codec, 1>(a, stream);
        } else if (n == 2) {
            gemv<Codec, 2>(a, stream);
        } else if (n <= 4) {
            gemv<Codec, 4>(a, stream);
        } else {
            gemv<Codec, 8>(a, stream);
        }
    });
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
