#pragma once
// The row loop the block-quantized matmuls share (matmul_quantized.cpp, matmul_kquant.cpp):
// each thread owns a contiguous range of output features; every weight row is read once and
// dotted with all activation rows, kQuantTileRows at a time (the rows stay in L1/L2).

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace inferscale::backends::cpu {

// Activation rows dotted per pass over a weight row: decode (1-4 rows) streams the weight once.
inline constexpr int kQuantTileRows = 4;

// y[t][o] = dot(weight row o, activation row t) + bias[o] (bias may be null). `act` holds n
// quantized activation rows of `act_row` bytes, `w` `out` weight rows of `w_row` bytes;
// `dot(weight_row, rows, count, dots)` dots one weight row with `count` <= kQuantTileRows
// activation rows into dots[0..count).
template <class Dot>
void quant_gemm_rows(const std::uint8_t* act, std::size_t act_row, std::int64_t n,
                     const std::uint8_t* w, std::size_t w_row, std::int64_t out,
                     const float* bias, float* y, Dot dot) {
#pragma omp parallel for schedule(static)
    for (std::int64_t o = 0; o < out; ++o) {
        const std::uint8_t* wr = w + static_cast<std::size_t>(o) * w_row;
        const float b = bias != nullptr ? bias[o] : 0.0f;
        for (std::int64_t t0 = 0; t0 < n; t0 += kQuantTileRows) {
            const int rows = static_cast<int>(std::min<std::int64_t>(kQuantTileRows, n - t0));
            const std::uint8_t* tile[kQuantTileRows];
            for (int t = 0; t < rows; ++t)
                tile[t] = act + static_cast<std::size_t>(t0 + t) * act_row;
            float dots[kQuantTileRows];
            dot(wr, tile, rows, dots);
            for (int t = 0; t < rows; ++t) y[(t0 + t) * out + o] = dots[t] + b;
        }
    }
}

}  // namespace inferscale::backends::cpu
