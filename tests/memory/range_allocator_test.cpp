// RangeAllocator against a byte map of the slab: best fit, merging on free, alignment, and the
// last-use marks a range carries (the later of merged ranges'), in a randomized run.

#include "memory/range_allocator.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace inferscale::memory {
namespace {

constexpr std::size_t kA = RangeAllocator::kAlign;

TEST(RangeAllocator, BestFitAndMerging) {
    RangeAllocator slab(10 * kA);
    auto a = slab.allocate(2 * kA), b = slab.allocate(3 * kA), c = slab.allocate(1 * kA);
    ASSERT_TRUE(a && b && c);
    EXPECT_EQ(a->offset, 0u);
    EXPECT_EQ(b->offset, 2 * kA);
    EXPECT_EQ(c->offset, 5 * kA);
    EXPECT_EQ(slab.used(), 6 * kA);
    slab.free(b->offset, b->bytes, {5, 9});
    // Free: [2, 5) and [6, 10). One unit goes to the tighter hole... of 3 against 4: the 3.
    auto d = slab.allocate(kA / 2);  // rounds up to one unit
    ASSERT_TRUE(d);
    EXPECT_EQ(d->offset, 2 * kA);
    EXPECT_EQ(d->last_use.fence, 5u);
    EXPECT_EQ(d->last_use.ticket, 9u);
    EXPECT_FALSE(slab.allocate(5 * kA));     // 2 + 4 free, but not side by side
    slab.free(c->offset, c->bytes, {7, 1});  // [3, 10) merges into one range of 7
    EXPECT_EQ(slab.largest_free(), 7 * kA);
    auto e = slab.allocate(7 * kA);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->offset, 3 * kA);
    EXPECT_EQ(e->last_use.fence, 7u);  // the later of the merged ranges' marks
    EXPECT_EQ(e->last_use.ticket, 9u);
    slab.free(a->offset, a->bytes, {});
    slab.free(d->offset, d->bytes, {});
    slab.free(e->offset, e->bytes, {});
    EXPECT_EQ(slab.used(), 0u);
    EXPECT_EQ(slab.free_ranges(), 1u);
    EXPECT_EQ(slab.largest_free(), 10 * kA);
}

TEST(RangeAllocator, RandomizedAgainstAByteMap) {
    const std::size_t units = 64;
    RangeAllocator slab(units * kA + kA / 2);  // a partial unit at the end is never used
    EXPECT_EQ(slab.capacity(), units * kA);
    std::vector<int> owner(units, -1);
    std::vector<Range> live;
    std::mt19937 rng(3);
    for (int step = 0; step < 5000; ++step) {
        if (live.empty() || rng() % 2 == 0) {
            const std::size_t bytes = 1 + rng() % (6 * kA);
            std::optional<Range> r = slab.allocate(bytes);
            const std::size_t need = RangeAllocator::aligned(bytes) / kA;
            if (!r) {
                // Nothing free of that length anywhere.
                std::size_t run = 0, best = 0;
                for (int o : owner) best = std::max(best, run = o < 0 ? run + 1 : 0);
                ASSERT_LT(best, need) << step;
                continue;
            }
            ASSERT_EQ(r->offset % kA, 0u);
            for (std::size_t u = r->offset / kA; u < r->offset / kA + need; ++u) {
                ASSERT_LT(u, units);
                ASSERT_EQ(owner[u], -1) << "unit " << u << " handed out twice";
                owner[u] = step;
            }
            live.push_back(*r);
        } else {
            const std::size_t i = rng() % live.size();
            const Range r = live[i];
            for (std::size_t u = r.offset / kA;
                 u < r.offset / kA + RangeAllocator::aligned(r.bytes) / kA; ++u)
                owner[u] = -1;
            slab.free(r.offset, r.bytes, {static_cast<std::uint64_t>(step), 0});
            live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
        }
        std::size_t used = 0;
        for (int o : owner) used += o >= 0 ? kA : 0;
        ASSERT_EQ(slab.used(), used);
    }
}

}  // namespace
}  // namespace inferscale::memory
