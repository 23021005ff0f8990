// ItemShare (backends/cuda/item_share.h), the stream linear's split of (tile, k block) items
// over its grid: shares cover the items once, in order, differ by at most one item, and owner()
// names the share that holds each item; for the shapes the linears take and for edge cases.

#include "backends/cuda/item_share.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace inferscale::backends::cuda {
namespace {

void expect_share(int items, int ctas) {
    const ItemShare share{items, ctas};
    ASSERT_EQ(share.begin(0), 0);
    ASSERT_EQ(share.begin(ctas), items);
    const int low = items / ctas;
    for (int c = 0; c < ctas; ++c) {
        const int size = share.begin(c + 1) - share.begin(c);
        ASSERT_TRUE(size == low || size == low + 1) << items << " items, " << ctas << " CTAs";
        for (int i = share.begin(c); i < share.begin(c + 1); ++i) {
            ASSERT_EQ(share.owner(i), c) << "item " << i << " of " << items << ", " << ctas;
        }
    }
}

TEST(ItemShareTest, CoversEveryItemOnceInOrder) {
    for (int items = 1; items <= 300; ++items) {
        for (int ctas = 1; ctas <= items && ctas <= 140; ++ctas) expect_share(items, ctas);
    }
    // (tiles x k blocks) of the Llama-3.1-8B linears on 132 SMs: q/k/v, o, gate/up, down,
    // lm_head; and a large list.
    const std::vector<std::pair<int, int>> shapes = {
        {48 * 64, 132}, {32 * 64, 132}, {224 * 64, 132}, {32 * 224, 132}, {1002 * 64, 132},
        {(1 << 30) - 1, 132}};
    for (const auto& [items, ctas] : shapes) {
        const ItemShare share{items, ctas};
        for (int c = 0; c < ctas; ++c) {
            const int b = share.begin(c), e = share.begin(c + 1);
            ASSERT_LT(b, e);
            ASSERT_EQ(share.owner(b), c);
            ASSERT_EQ(share.owner(e - 1), c);
        }
    }
}

}  // namespace
}  // namespace inferscale::backends::cuda
