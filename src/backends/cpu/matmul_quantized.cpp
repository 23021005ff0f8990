// Linear layers on block-quantized weights, with ggml's CPU arithmetic so that greedy decoding
// agrees with llama.cpp token for token. As ggml does on x86 (AVX2, quants.c):
//   1. each activation row is quantized per 32-block: Q8_1 for Q4_1 and Q5_1 weights, Q8_0
//      otherwise (tensor/quantized.h);
//   2. a weight row dotted with an activation row keeps 8 f32 lanes, lane l holding the integer
//      sum of elements 4l..4l+3 of each block; per block, lane = fma(d_w * d_a, lane_sum, lane);
//   3. the lanes are summed as hsum_float_8 does, ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7));
//   4. Q4_1 and Q5_1 add their minimum term, accumulated separately as
//      summs = fma(m_w, s_a, summs) (ggml's binary fuses that multiply-add), after the lanes.
// Q5_0 and Q5_1 are Q4_0 and Q4_1 with a fifth bit per quant (ggml_vec_dot_q5_{0,1}_q8_{0,1}).
// IQ4_NL is Q4_0 with its nibbles looked up in kIq4NlValues, except that ggml_vec_dot_iq4_nl_q8_0
// keeps two sets of lanes in step 2, one for the even blocks and one for the odd, adds them lane
// by lane before step 3, and with an odd number of blocks takes the last one on its own after
// step 3: result = fma(d_w * d_a, its integer sum, result).
// These kernels have no AVX-512 variant in ggml: its AVX-512 build runs the same AVX2 code.
// K-quants and IQ4_XS live in matmul_kquant.cpp.
// The integer block sums are exact, so only these f32 steps decide the result, and the AVX2
// kernels and the portable fallback perform them in the same order: both give identical bits.
// Built with -ffp-contract=off so the compiler adds no fusions of its own.

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define IS_QUANT_AVX2 1
#endif

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/quant_rows.h"
#include "base/check.h"
#include "tensor/quantized.h"

namespace inferscale::backends::cpu {
namespace {

using tensor::DType;

constexpr std::size_t kQ8_0Bytes = 34;
constexpr std::size_t kQ8_1Bytes = tensor::kQ8_1BlockBytes;

// Where a weight row's per-block fields sit.
struct WeightLayout {
    std::size_t block_bytes;
    std::size_t quant_offset;  // first quant byte
    std::size_t high_offset;   // Q5_0/Q5_1: the fifth bits (u32 qh)
};

constexpr WeightLayout weight_layout(DType t) {
    switch (t) {
        case DType::Q8_0: return {34, 2, 0};
        case DType::Q4_0: return {18, 2, 0};
        case DType::Q4_1: return {20, 4, 0};
        case DType::Q5_0: return {22, 6, 2};
        case DType::Q5_1: return {24, 8, 4};
        case DType::IQ4_NL: return {18, 2, 0};
        default: return {0, 0, 0};
    }
}

// Weights with a minimum (Q4_1, Q5_1) take Q8_1 activations (d, s, quants); the others Q8_0
// (d, quants).
constexpr bool with_min(DType w) { return w == DType::Q4_1 || w == DType::Q5_1; }
constexpr std::size_t act_block_bytes(DType w) { return with_min(w) ? kQ8_1Bytes : kQ8_0Bytes; }
constexpr std::size_t act_quant_offset(DType w) { return with_min(w) ? 4 : 2; }

// Sets of f32 lanes a dot keeps (step 2): IQ4_NL's even and odd blocks, one set otherwise.
constexpr int lane_sets(DType w) { return w == DType::IQ4_NL ? 2 : 1; }
// The blocks summed into the lane sets: IQ4_NL's last block of an odd count is summed apart.
constexpr std::int64_t laned_blocks(DType w, std::int64_t blocks) {
    return blocks - blocks % lane_sets(w);
}

inline std::uint16_t load_u16(const std::uint8_t* p) {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

#if IS_QUANT_AVX2

inline float half_to_f32(const std::uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// 0x10 in byte j where bit j of the 32 bits at `p` is set, else 0.
inline __m256i fifth_bits(const std::uint8_t* p) {
    std::uint32_t bits;
    std::memcpy(&bits, p, 4);
    // Byte j takes byte j / 8 of `bits`, then keeps its bit j % 8.
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(bits)),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// The 32 weight quants of one block as signed bytes, or (Q4_1, Q5_1) unsigned.
template <DType W>
inline __m256i load_weight_quants(const std::uint8_t* blk) {
    constexpr WeightLayout wl = weight_layout(W);
    const std::uint8_t* q = blk + wl.quant_offset;
    if constexpr (W == DType::Q8_0) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
    } else {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
        const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(raw),
                                                     _mm_srli_epi16(raw, 4), 1);
        __m256i nib = _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
        if constexpr (W == DType::Q5_0 || W == DType::Q5_1) {
            nib = _mm256_or_si256(nib, fifth_bits(blk + wl.high_offset));
        }
        if constexpr (W == DType::Q4_0) return _mm256_sub_epi8(nib, _mm256_set1_epi8(8));
        if constexpr (W == DType::Q5_0) return _mm256_sub_epi8(nib, _mm256_set1_epi8(16));
        if constexpr (W == DType::IQ4_NL) {
            const __m128i grid =
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(tensor::kIq4NlValues));
            return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(grid), nib);
        }
        return nib;
    }
}

// Integer lane sums of 4 products each. maddubs wants an unsigned first operand: Q4_1's and
// Q5_1's quants already are; signed weights move their sign onto the activation (exact, |q| <= 127,
// so no pair of products saturates the 16-bit intermediate).
template <DType W>
inline __m256i lane_sums(__m256i wq, __m256i aq) {
    __m256i prod;
    if constexpr (with_min(W)) {
        prod = _mm256_maddubs_epi16(wq, aq);
    } else {
        prod = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(aq, wq));
    }
    return _mm256_madd_epi16(prod, _mm256_set1_epi16(1));
}

template <DType W>
void dot_tile(const std::uint8_t* w, const std::uint8_t* const* act, int rows, std::int64_t blocks,
              float* out) {
    constexpr WeightLayout wl = weight_layout(W);
    constexpr std::size_t ab = act_block_bytes(W), aq = act_quant_offset(W);
    constexpr int kSets = lane_sets(W);
    const std::int64_t laned = laned_blocks(W, blocks);
    __m256 acc[kQuantTileRows][kSets];
    float summs[kQuantTileRows];
    for (int t = 0; t < rows; ++t) {
        for (__m256& set : acc[t]) set = _mm256_setzero_ps();
        summs[t] = 0.0f;
    }
    for (std::int64_t b = 0; b < laned; ++b) {
        const std::uint8_t* wb = w + b * wl.block_bytes;
        const float dw = half_to_f32(wb);
        const __m256i wq = load_weight_quants<W>(wb);
        for (int t = 0; t < rows; ++t) {
            const std::uint8_t* a = act[t] + b * ab;
            if constexpr (with_min(W)) {
                summs[t] = std::fma(half_to_f32(wb + 2), half_to_f32(a + 2), summs[t]);
            }
            const __m256 d = _mm256_set1_ps(dw * half_to_f32(a));
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + aq));
            __m256& set = acc[t][b % kSets];
            set = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lane_sums<W>(wq, q)), set);
        }
    }
    for (int t = 0; t < rows; ++t) {
        if constexpr (kSets == 2) {
            out[t] = hsum(_mm256_add_ps(acc[t][0], acc[t][1]));
        } else {
            out[t] = hsum(acc[t][0]) + summs[t];
        }
    }
    if (laned == blocks) return;
    const std::uint8_t* wb = w + laned * wl.block_bytes;
    const __m256i wq = load_weight_quants<W>(wb);
    for (int t = 0; t < rows; ++t) {
        const std::uint8_t* a = act[t] + laned * ab;
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + aq));
        int lanes[8];
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), lane_sums<W>(wq, q));
        int sum = 0;
        for (int lane : lanes) sum += lane;
        out[t] = std::fma(half_to_f32(wb) * half_to_f32(a), static_cast<float>(sum), out[t]);
    }
}

#else  // portable fallback (Debug/ASan builds without -march): the same f32 steps, lane by lane

inline float half_to_f32(const std::uint8_t* p) { return tensor::f16_to_f32(load_u16(p)); }

template <DType W>
inline void unpack_weight(const std::uint8_t* blk, int* out) {
    constexpr WeightLayout wl = weight_layout(W);
    const std::uint8_t* q = blk + wl.quant_offset;
    std::uint32_t high = 0;
    if constexpr (W == DType::Q5_0 || W == DType::Q5_1) std::memcpy(&high, blk + wl.high_offset, 4);
    for (int j = 0; j < 32; ++j) {
        if constexpr (W == DType::Q8_0) {
            out[j] = static_cast<std::int8_t>(q[j]);
        } else {
            const int nib = (j < 16 ? (q[j] & 0x0f) : (q[j - 16] >> 4)) |
                            static_cast<int>(((high >> j) & 1u) << 4);
            if constexpr (W == DType::Q4_0) out[j] = nib - 8;
            if constexpr (W == DType::Q5_0) out[j] = nib - 16;
            if constexpr (W == DType::IQ4_NL) out[j] = tensor::kIq4NlValues[nib];
            if constexpr (with_min(W)) out[j] = nib;
        }
    }
}

// The integer sum of the products of elements 4l..4l+3, lane l.
inline int lane_sum(const int* wq, const std::int8_t* q, int l) {
    int sum = 0;
    for (int e = 4 * l; e < 4 * l + 4; ++e) sum += wq[e] * q[e];
    return sum;
}

template <DType W>
void dot_tile(const std::uint8_t* w, const std::uint8_t* const* act, int rows, std::int64_t blocks,
              float* out) {
    constexpr WeightLayout wl = weight_layout(W);
    constexpr std::size_t ab = act_block_bytes(W), aq = act_quant_offset(W);
    constexpr int kSets = lane_sets(W);
    const std::int64_t laned = laned_blocks(W, blocks);
    float acc[kQuantTileRows][kSets][8] = {};
    float summs[kQuantTileRows] = {};
    int wq[32];
    for (std::int64_t b = 0; b < laned; ++b) {
        const std::uint8_t* wb = w + b * wl.block_bytes;
        const float dw = half_to_f32(wb);
        unpack_weight<W>(wb, wq);
        for (int t = 0; t < rows; ++t) {
            const std::uint8_t* a = act[t] + b * ab;
            if constexpr (with_min(W)) {
                summs[t] = std::fma(half_to_f32(wb + 2), half_to_f32(a + 2), summs[t]);
            }
            const float d = dw * half_to_f32(a);
            const auto* q = reinterpret_cast<const std::int8_t*>(a + aq);
            float* set = acc[t][b % kSets];
            for (int l = 0; l < 8; ++l)
                set[l] = std::fma(d, static_cast<float>(lane_sum(wq, q, l)), set[l]);
        }
    }
    for (int t = 0; t < rows; ++t) {
        float l[8];
        for (int i = 0; i < 8; ++i) l[i] = acc[t][0][i];
        if constexpr (kSets == 2) {
            for (int i = 0; i < 8; ++i) l[i] += acc[t][1][i];
        }
        const float lanes = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
        out[t] = kSets == 2 ? lanes : lanes + summs[t];
    }
    if (laned == blocks) return;
    const std::uint8_t* wb = w + laned * wl.block_bytes;
    unpack_weight<W>(wb, wq);
    for (int t = 0; t < rows; ++t) {
        const std::uint8_t* a = act[t] + laned * ab;
        const auto* q = reinterpret_cast<const std::int8_t*>(a + aq);
        int sum = 0;
        for (int l = 0; l < 8; ++l) sum += lane_sum(wq, q, l);
        out[t] = std::fma(half_to_f32(wb) * half_to_f32(a), static_cast<float>(sum), out[t]);
    }
}

#endif

template <DType W>
void gemm_rows(const std::uint8_t* act, std::int64_t n, std::int64_t in, const std::uint8_t* w,
               std::int64_t out, const float* bias, float* y) {
    const std::int64_t blocks = in / tensor::kQuantBlock;
    quant_gemm_rows(act, static_cast<std::size_t>(blocks) * act_block_bytes(W), n, w,
                    static_cast<std::size_t>(blocks) * weight_layout(W).block_bytes, out, bias, y,
                    [blocks](const std::uint8_t* wr, const std::uint8_t* const* tile, int rows,
                             float* dots) { dot_tile<W>(wr, tile, rows, blocks, dots); });
}

}  // namespace

void linear_quantized(const float* x, std::int64_t n, std::int64_t in, const void* w,
                      DType w_dtype, std::int64_t out, const float* bias, float* y,
                      std::vector<std::uint8_t>& scratch) {
    if (n == 0) return;
    if (tensor::is_super_block(w_dtype)) {
        linear_kquant(x, n, in, w, w_dtype, out, bias, y, scratch);
        return;
    }
    IS_CHECK(in % tensor::kQuantBlock == 0) << "in " << in;
    const std::size_t a_row =
        static_cast<std::size_t>(in / tensor::kQuantBlock) * act_block_bytes(w_dtype);
    if (scratch.size() < static_cast<std::size_t>(n) * a_row) scratch.resize(n * a_row);
    std::uint8_t* act = scratch.data();
    const bool q8_1 = with_min(w_dtype);
#pragma omp parallel for schedule(static) if (n > kQuantTileRows)
    for (std::int64_t t = 0; t < n; ++t) {
        if (q8_1) {
            tensor::quantize_row_q8_1(x + t * in, act + t * a_row, in);
        } else {
            tensor::quantize_row_q8_0(x + t * in, act + t * a_row, in);
        }
    }
    const auto* wb = static_cast<const std::uint8_t*>(w);
    switch (w_dtype) {
        case DType::Q8_0: gemm_rows<DType::Q8_0>(act, n, in, wb, out, bias, y); return;
        case DType::Q4_0: gemm_rows<DType::Q4_0>(act, n, in, wb, out, bias, y); return;
        case DType::Q4_1: gemm_rows<DType::Q4_1>(act, n, in, wb, out, bias, y); return;
        case DType::Q5_0: gemm_rows<DType::Q5_0>(act, n, in, wb, out, bias, y); return;
        case DType::Q5_1: gemm_rows<DType::Q5_1>(act, n, in, wb, out, bias, y); return;
        case DType::IQ4_NL: gemm_rows<DType::IQ4_NL>(act, n, in, wb, out, bias, y); return;
        default: break;
    }
    IS_CHECK(false) << "linear_quantized: weight dtype " << tensor::dtype_name(w_dtype);
}

}  // namespace inferscale::backends::cpu
