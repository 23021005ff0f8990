#pragma once
// Metadata-only reshapes of Tensor views (no memory is touched): the model uses them to cut a
// batch-sized slice out of a capacity-sized workspace tensor and to see [n, h * d] as [n, h, d].

#include <initializer_list>

#include "tensor/tensor.h"

namespace inferscale::tensor {

// The first `n` entries along dim 0 (row-major, so the slice is contiguous).
inline Tensor leading(const Tensor& t, std::int64_t n) {
    IS_CHECK(t.rank >= 1 && n >= 0 && n <= t.shape[0]) << "leading " << n << " of " << t.shape[0];
    Tensor r = t;
    r.shape[0] = n;
    return r;
}

// Entry `i` of dim 0, one rank lower.
inline Tensor index0(const Tensor& t, std::int64_t i) {
    IS_CHECK(t.rank >= 2 && i >= 0 && i < t.shape[0]) << "index " << i << " of " << t.shape[0];
    Tensor r = t;
    std::int64_t inner = 1;
    for (int d = 1; d < t.rank; ++d) inner *= t.shape[d];
    r.data =
        static_cast<char*>(t.data) + i * inner * static_cast<std::int64_t>(dtype_size(t.dtype));
    r.rank = t.rank - 1;
    for (int d = 0; d < 3; ++d) r.shape[d] = t.shape[d + 1];
    r.shape[3] = 0;
    return r;
}

// Rows [begin, begin + count) of dim 0: contiguous, so the view is exact for block-quantized
// dtypes too (a row is whole blocks).
inline Tensor rows(const Tensor& t, std::int64_t begin, std::int64_t count) {
    IS_CHECK(t.rank >= 1 && begin >= 0 && count >= 0 && begin + count <= t.shape[0])
        << "rows " << begin << "+" << count << " of " << (t.rank >= 1 ? t.shape[0] : 0);
    std::int64_t inner = 1;
    for (int d = 1; d < t.rank; ++d) inner *= t.shape[d];
    Tensor r = t;
    r.data = static_cast<char*>(t.data) +
             static_cast<std::int64_t>(dtype_row_bytes(t.dtype, inner)) * begin;
    r.shape[0] = count;
    return r;
}

// The same memory with another shape of equal element count.
inline Tensor reshaped(const Tensor& t, std::initializer_list<std::int64_t> dims) {
    Tensor r(t.data, t.dtype, dims, t.device);
    IS_CHECK(r.numel() == t.numel()) << "reshape " << t.numel() << " to " << r.numel();
    return r;
}

}  // namespace inferscale::tensor
