#pragma once
// An even share of a list of work items among a persistent grid's CTAs: CTA c of `ctas` takes
// items [begin(c), begin(c + 1)), begin(c) = floor(items c / ctas), so shares differ by at most
// one item and follow one another in item order. owner(i) inverts it: the CTA whose share holds
// item i. Plain C++ where no CUDA compiler reads it, so the host builds and tests it.

#include <cstdint>

#if defined(__CUDACC__)
#define IS_ITEM_SHARE_FN __host__ __device__ __forceinline__
#else
#define IS_ITEM_SHARE_FN inline
#endif

namespace inferscale::backends::cuda {

struct ItemShare {
    int items = 0, ctas = 1;  // 1 <= ctas <= items < 2^30

    IS_ITEM_SHARE_FN int begin(int c) const {
        return static_cast<int>(static_cast<std::int64_t>(items) * c / ctas);
    }
    // The largest c with begin(c) <= item: begin(c) <= i exactly when c < (i + 1) ctas / items.
    IS_ITEM_SHARE_FN int owner(int item) const {
        return static_cast<int>(
                   (static_cast<std::int64_t>(item + 1) * ctas + items - 1) / items) -
               1;
    }
};

}  // namespace inferscale::backends::cuda

#undef IS_ITEM_SHARE_FN
