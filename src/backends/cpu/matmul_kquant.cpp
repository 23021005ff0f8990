// Linear layers on super-block weights (Q2_K ... Q6_K, IQ4_XS) with the f32 arithmetic of ggml's
// x86 kernels (ggml_vec_dot_q{2,3,4,5,6}_K_q8_K and ggml_vec_dot_iq4_xs_q8_K, AVX2 branch, which
// the AVX-512 build of llama.cpp runs too: these kernels have no AVX-512 variant). Per
// super-block of 256:
//   1. activations are Q8_K (tensor/quantized.h); d = d_a * d_w, dmin = -d_a * dmin_w;
//   2. the weight-by-activation products are summed exactly in integers into 8 lanes, lane l
//      holding elements 4l..4l+3 of every 32 (each 4-element sum times its sub-block scale);
//      per super-block, lane = fma(d, lane_sum, lane);
//   3. Q4_K's minimums: 4 f32 lanes, lane k = fma(dmin, m[2k] * s[2k] + m[2k+1] * s[2k+1], lane)
//      (s[j]: the activation quants' sum over sub-block j), reduced as (k0 + k2) + (k1 + k3)
//      at the end; Q5_K's: one f32 summs = fma(dmin, sum_j m[j] * s[j], summs) (ggml's binary
//      fuses that multiply-add);
//   4. result = hsum_float_8(lanes) + the minimum term. Q6_K has none: its quants enter the
//      lane sums unsigned (0..63), and lane l subtracts its share of the -32 offset as ggml
//      does, 32 * (sc[2l] * s[2l] + sc[2l + 1] * s[2l + 1]) with s[j] the activation quants'
//      sum over 16-element sub-block j. The integer total is the same either way, but not the
//      lanes, and so not the f32 rounding. Q3_K has none either: its -4 offsets stay with their
//      elements (signed quants), nor has IQ4_XS (its grid values are signed). Q2_K's minimums
//      go into the same 8 lanes, before step 2's multiply-add: lane l = fma(dmin, m[2l] * s[2l]
//      + m[2l + 1] * s[2l + 1], lane), s[j] over 16-element sub-blocks.
// The integer sums are exact, so the same f32 steps in the same order give identical bits; they
// are computed with AVX2 integer instructions or, without AVX2, element by element; the f32 steps
// are plain lane-by-lane code either way. Built with -ffp-contract=off.

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/quant_rows.h"
#include "base/check.h"
#include "tensor/quantized.h"

namespace inferscale::backends::cpu {
namespace {

using tensor::DType;

constexpr int kSuper = 256;
constexpr std::size_t kActBytes = tensor::kQ8_KBlockBytes;

float load_half(const std::uint8_t* p) {
    return tensor::f16_to_f32(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
}

// Weights whose unpacked quants are signed (the others' are unsigned).
constexpr bool signed_quants(DType w) { return w == DType::Q3_K || w == DType::IQ4_XS; }
// Weights with 8 sub-blocks of 32 (the others have 16 of 16).
constexpr bool subblocks_of_32(DType w) {
    return w == DType::Q4_K || w == DType::Q5_K || w == DType::IQ4_XS;
}

// One weight super-block unpacked: the quants as integers (IQ4_XS: its grid values), and the
// scales.
struct WeightBlock {
    float d = 0.0f, dmin = 0.0f;
    std::int8_t q[kSuper];
    int sc[16];  // Q4_K/Q5_K/IQ4_XS: 8 sub-blocks of 32; Q2_K/Q3_K/Q6_K: 16 sub-blocks of 16
    int m[16];   // Q4_K/Q5_K (8) and Q2_K (16) minimums
};

template <DType W>
void unpack(const std::uint8_t* blk, WeightBlock& wb) {
    if constexpr (W == DType::Q2_K) {
        const std::uint8_t* qs = blk + 16;
        for (int e = 0; e < kSuper; ++e) {
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            wb.q[e] = static_cast<std::int8_t>((qs[32 * h + l] >> (2 * k)) & 3);
        }
        for (int j = 0; j < 16; ++j) wb.sc[j] = blk[j] & 0x0f, wb.m[j] = blk[j] >> 4;
        wb.d = load_half(blk + 80);
        wb.dmin = load_half(blk + 82);
    } else if constexpr (W == DType::Q3_K) {
        const std::uint8_t* hmask = blk;
        const std::uint8_t* qs = blk + 32;
        for (int e = 0; e < kSuper; ++e) {
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            const int low = (qs[32 * h + l] >> (2 * k)) & 3;
            wb.q[e] = static_cast<std::int8_t>(low - (((hmask[l] >> (e / 32)) & 1) != 0 ? 0 : 4));
        }
        tensor::unpack_q3_k_scales(blk + 96, wb.sc);
        wb.d = load_half(blk + 108);
    } else if constexpr (W == DType::Q6_K) {
        const std::uint8_t* ql = blk;
        const std::uint8_t* qh = blk + 128;
        for (int e = 0; e < kSuper; ++e) {
            const int h = e / 128, c = (e % 128) / 32, l = e % 32;
            const std::uint8_t low = ql[64 * h + 32 * (c % 2) + l];
            const int lo = c < 2 ? (low & 0x0f) : (low >> 4);
            const int hi = (qh[32 * h + l] >> (2 * c)) & 3;
            wb.q[e] = static_cast<std::int8_t>(lo | hi << 4);
        }
        for (int j = 0; j < 16; ++j) wb.sc[j] = static_cast<std::int8_t>(blk[192 + j]);
        wb.d = load_half(blk + 208);
    } else if constexpr (W == DType::IQ4_XS) {
        const std::uint8_t* qs = blk + 8;
        for (int e = 0; e < kSuper; ++e) {
            const std::uint8_t byte = qs[16 * (e / 32) + e % 16];
            wb.q[e] = tensor::kIq4NlValues[e % 32 < 16 ? (byte & 0x0f) : (byte >> 4)];
        }
        tensor::unpack_iq4_xs_scales(blk, wb.sc);
        wb.d = load_half(blk);
    } else {
        wb.d = load_half(blk);
        wb.dmin = load_half(blk + 2);
        std::uint8_t sc[8], m[8];
        tensor::unpack_k_scales(blk + 4, sc, m);
        for (int j = 0; j < 8; ++j) wb.sc[j] = sc[j], wb.m[j] = m[j];
        const std::uint8_t* qs = blk + (W == DType::Q5_K ? 48 : 16);
        for (int e = 0; e < kSuper; ++e) {
            const int g = e / 64, r = e % 64;
            const std::uint8_t byte = qs[32 * g + r % 32];
            int q = r < 32 ? (byte & 0x0f) : (byte >> 4);
            if constexpr (W == DType::Q5_K) q |= ((blk[16 + e % 32] >> (e / 32)) & 1) << 4;
            wb.q[e] = static_cast<std::int8_t>(q);
        }
    }
}

// Q6_K's share of the -32 offset per lane (step 4).
inline int q6_offset(const WeightBlock& wb, const std::int16_t* bsums, int l) {
    return 32 * (wb.sc[2 * l] * bsums[2 * l] + wb.sc[2 * l + 1] * bsums[2 * l + 1]);
}

// The 8 integer lane sums of one super-block (step 2).
#if defined(__AVX2__)
template <DType W>
void lane_sums(const WeightBlock& wb, const std::int8_t* a, const std::int16_t* bsums, int* lanes) {
    __m256i sum = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.q + 32 * c));
        const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 32 * c));
        // Unsigned weights (at most 63) times signed activations: pairs fit in 16 bits. Signed
        // weights move their sign onto the activations first (exact: |q| <= 127, and a pair of
        // products at most 2 * 127 * 127 fits too).
        const __m256i pairs =
            signed_quants(W)
                ? _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q))
                : _mm256_maddubs_epi16(q, y);
        const __m256i scale =
            subblocks_of_32(W)
                ? _mm256_set1_epi16(static_cast<std::int16_t>(wb.sc[c]))
                : _mm256_setr_m128i(_mm_set1_epi16(static_cast<std::int16_t>(wb.sc[2 * c])),
                                    _mm_set1_epi16(static_cast<std::int16_t>(wb.sc[2 * c + 1])));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(scale, pairs));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), sum);
    if constexpr (W == DType::Q6_K) {
        for (int l = 0; l < 8; ++l) lanes[l] -= q6_offset(wb, bsums, l);
    }
}
#else
template <DType W>
void lane_sums(const WeightBlock& wb, const std::int8_t* a, const std::int16_t* bsums, int* lanes) {
    int quad[64];  // products summed over elements 4k..4k+3
    for (int k = 0; k < 64; ++k) {
        int s = 0;
        for (int e = 4 * k; e < 4 * k + 4; ++e) s += wb.q[e] * a[e];
        quad[k] = s;
    }
    for (int l = 0; l < 8; ++l) {
        int s = 0;
        for (int c = 0; c < 8; ++c) {
            // quad 8c + l covers elements 32c + 4l..: sub-block c of 32, or 2c + l / 4 of 16.
            const int scale = subblocks_of_32(W) ? wb.sc[c] : wb.sc[2 * c + l / 4];
            s += scale * quad[8 * c + l];
        }
        if constexpr (W == DType::Q6_K) s -= q6_offset(wb, bsums, l);
        lanes[l] = s;
    }
}
#endif

template <DType W>
void dot_tile(const std::uint8_t* w, const std::uint8_t* const* act, int rows, std::int64_t blocks,
              float* out) {
    const std::size_t wbytes = tensor::dtype_block_bytes(W);
    float acc[kQuantTileRows][8] = {};
    float acc_m[kQuantTileRows][4] = {};
    float summs[kQuantTileRows] = {};
    WeightBlock wb;
    for (std::int64_t b = 0; b < blocks; ++b) {
        unpack<W>(w + b * wbytes, wb);
        for (int t = 0; t < rows; ++t) {
            const std::uint8_t* ab = act[t] + b * kActBytes;
            float da;
            std::memcpy(&da, ab, 4);
            const auto* aq = reinterpret_cast<const std::int8_t*>(ab + 4);
            std::int16_t bsums[16];
            std::memcpy(bsums, ab + 4 + kSuper, sizeof(bsums));
            const float d = da * wb.d;
            if constexpr (W == DType::Q2_K) {
                const float dmin = -da * wb.dmin;
                for (int l = 0; l < 8; ++l) {
                    const int prod =
                        wb.m[2 * l] * bsums[2 * l] + wb.m[2 * l + 1] * bsums[2 * l + 1];
                    acc[t][l] = std::fma(dmin, static_cast<float>(prod), acc[t][l]);
                }
            }
            int lanes[8];
            lane_sums<W>(wb, aq, bsums, lanes);
            for (int l = 0; l < 8; ++l)
                acc[t][l] = std::fma(d, static_cast<float>(lanes[l]), acc[t][l]);
            if constexpr (W == DType::Q4_K || W == DType::Q5_K) {
                const float dmin = -da * wb.dmin;
                int prod[4];
                for (int k = 0; k < 4; ++k) {
                    const int s0 = bsums[4 * k] + bsums[4 * k + 1];
                    const int s1 = bsums[4 * k + 2] + bsums[4 * k + 3];
                    prod[k] = wb.m[2 * k] * s0 + wb.m[2 * k + 1] * s1;
                }
                if constexpr (W == DType::Q4_K) {
                    for (int k = 0; k < 4; ++k)
                        acc_m[t][k] = std::fma(dmin, static_cast<float>(prod[k]), acc_m[t][k]);
                } else {
                    const int all = (prod[0] + prod[1]) + (prod[2] + prod[3]);
                    summs[t] = std::fma(dmin, static_cast<float>(all), summs[t]);
                }
            }
        }
    }
    for (int t = 0; t < rows; ++t) {
        const float* l = acc[t];
        const float lanes = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
        const float* m = acc_m[t];
        if constexpr (W == DType::Q4_K) {
            out[t] = lanes + ((m[0] + m[2]) + (m[1] + m[3]));
        } else if constexpr (W == DType::Q5_K) {
            out[t] = lanes + summs[t];
        } else {  // Q2_K, Q3_K, Q6_K, IQ4_XS
            out[t] = lanes;
        }
    }
}

template <DType W>
void gemm_rows(const std::uint8_t* act, std::int64_t n, std::int64_t in, const std::uint8_t* w,
               std::int64_t out, const float* bias, float* y) {
    const std::int64_t blocks = in / kSuper;
    quant_gemm_rows(act, static_cast<std::size_t>(blocks) * kActBytes, n, w,
                    tensor::dtype_row_bytes(W, in), out, bias, y,
                    [blocks](const std::uint8_t* wr, const std::uint8_t* const* tile, int rows,
                             float* dots) { dot_tile<W>(wr, tile, rows, blocks, dots); });
}

}  // namespace

void linear_kquant(const float* x, std::int64_t n, std::int64_t in, const void* w, DType w_dtype,
                   std::int64_t out, const float* bias, float* y,
                   std::vector<std::uint8_t>& scratch) {
    if (n == 0) return;
    IS_CHECK(in % kSuper == 0) << "in " << in;
    const std::size_t a_row = static_cast<std::size_t>(in / kSuper) * kActBytes;
    if (scratch.size() < static_cast<std::size_t>(n) * a_row) scratch.resize(n * a_row);
    std::uint8_t* act = scratch.data();
#pragma omp parallel for schedule(static) if (n > kQuantTileRows)
    for (std::int64_t t = 0; t < n; ++t) tensor::quantize_row_q8_K(x + t * in, act + t * a_row, in);
    const auto* wb = static_cast<const std::uint8_t*>(w);
    switch (w_dtype) {
        case DType::Q2_K:
            gemm_rows<DType::Q2_K>(act, n, in, wb, out, bias, y);
            return;
        case DType::Q3_K:
            gemm_rows<DType::Q3_K>(act, n, in, wb, out, bias, y);
            return;
        case DType::Q4_K:
            gemm_rows<DType::Q4_K>(act, n, in, wb, out, bias, y);
            return;
        case DType::Q5_K:
            gemm_rows<DType::Q5_K>(act, n, in, wb, out, bias, y);
            return;
        case DType::Q6_K:
            gemm_rows<DType::Q6_K>(act, n, in, wb, out, bias, y);
            return;
        case DType::IQ4_XS:
            gemm_rows<DType::IQ4_XS>(act, n, in, wb, out, bias, y);
            return;
        default:
            break;
    }
    IS_CHECK(false) << "linear_kquant: weight dtype " << tensor::dtype_name(w_dtype);
}

}  // namespace inferscale::backends::cpu
