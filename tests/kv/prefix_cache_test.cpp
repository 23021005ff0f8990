#include "kv/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>

namespace inferscale::kv {
namespace {

std::vector<std::int32_t> iota_tokens(std::int32_t n, std::int32_t first) {
    std::vector<std::int32_t> t(static_cast<std::size_t>(n));
    std::iota(t.begin(), t.end(), first);
    return t;
}

TEST(PrefixCache, MatchesOnlyTheSameChainOfTokensAndExtras) {
    BlockPool pool(8);
    PrefixCache cache(pool, true);
    const auto a = iota_tokens(4, 0), b = iota_tokens(4, 100);
    std::vector<BlockId> blocks;
    ASSERT_TRUE(cache.allocate(2, blocks));
    cache.insert(blocks, 0, {a, "u1"});
    cache.insert(blocks, 1, {b, "u1"});
    EXPECT_EQ(cache.num_cached(), 2);
    EXPECT_EQ(pool.ref_count(blocks[0]), 2);

    const BlockContent same[] = {{a, "u1"}, {b, "u1"}};
    std::vector<BlockId> got;
    EXPECT_EQ(cache.match(same, &got), 2u);
    EXPECT_EQ(got, blocks);
    EXPECT_EQ(pool.ref_count(blocks[1]), 3);
    pool.release(got);

    const BlockContent other_salt[] = {{a, "u2"}, {b, "u2"}};
    EXPECT_EQ(cache.match(other_salt, nullptr), 0u);
    // The second block alone (without its parent) is not a prefix.
    const BlockContent second_only[] = {{b, "u1"}};
    EXPECT_EQ(cache.match(second_only, nullptr), 0u);
    const BlockContent diverging[] = {{a, "u1"}, {a, "u1"}};
    EXPECT_EQ(cache.match(diverging, nullptr), 1u);
    pool.release(blocks);
}

TEST(PrefixCache, EvictsUnusedBlocksLeastRecentlyUsedFirstWithTheirChildren) {
    BlockPool pool(4);
    PrefixCache cache(pool, true);
    const auto t0 = iota_tokens(2, 0), t1 = iota_tokens(2, 10), t2 = iota_tokens(2, 20);
    std::vector<BlockId> s1, s2;
    ASSERT_TRUE(cache.allocate(2, s1));
    cache.insert(s1, 0, {t0, ""});
    cache.insert(s1, 1, {t1, ""});
    ASSERT_TRUE(cache.allocate(1, s2));
    cache.insert(s2, 0, {t2, ""});
    pool.release(s1);
    pool.release(s2);
    EXPECT_EQ(pool.num_free(), 1);
    EXPECT_EQ(cache.num_available(), 4);

    // Touch t2's chain so that t0's is the least recently used.
    const BlockContent c2[] = {{t2, ""}};
    std::vector<BlockId> hold;
    EXPECT_EQ(cache.match(c2, &hold), 1u);
    // Needing 2 free blocks evicts t0 and, with it, its child t1; t2 is in use and stays.
    std::vector<BlockId> fresh;
    ASSERT_TRUE(cache.allocate(3, fresh));
    EXPECT_EQ(cache.num_cached(), 1);
    EXPECT_EQ(cache.stats().evictions, 2u);
    const BlockContent c0[] = {{t0, ""}};
    EXPECT_EQ(cache.match(c0, nullptr), 0u);
    EXPECT_FALSE(cache.allocate(1, fresh));  // t2 is in use: nothing left to evict
    pool.release(fresh);
    pool.release(hold);
    cache.evict_all();
    EXPECT_EQ(pool.num_free(), 4);
}

TEST(PrefixCache, EvictionThatReachesAChildBeforeItsParentFreesEachBlockOnce) {
    BlockPool pool(4);
    PrefixCache cache(pool, true);
    const auto a = iota_tokens(2, 0), b = iota_tokens(2, 10), c = iota_tokens(2, 20);
    std::vector<BlockId> s;
    ASSERT_TRUE(cache.allocate(3, s));
    cache.insert(s, 0, {a, ""});
    cache.insert(s, 1, {b, ""});
    cache.insert(s, 2, {c, ""});
    pool.release(s);
    // Touching a and b leaves the chain's tail c least recently used, behind its ancestors.
    const BlockContent ab[] = {{a, ""}, {b, ""}};
    std::vector<BlockId> touched;
    EXPECT_EQ(cache.match(ab, &touched), 2u);
    pool.release(touched);
    EXPECT_EQ(pool.num_free(), 1);
    // Four free blocks: c first, then a with b (c already taken): three evictions, not four.
    std::vector<BlockId> fresh;
    ASSERT_TRUE(cache.allocate(4, fresh));
    EXPECT_EQ(cache.num_cached(), 0);
    EXPECT_EQ(cache.stats().evictions, 3u);
    pool.release(fresh);
    EXPECT_EQ(pool.num_free(), 4);
}

TEST(PrefixCache, DisabledCacheKeepsNothing) {
    BlockPool pool(2);
    PrefixCache cache(pool, false);
    const auto t = iota_tokens(2, 0);
    std::vector<BlockId> b;
    ASSERT_TRUE(cache.allocate(1, b));
    cache.insert(b, 0, {t, ""});
    const BlockContent c[] = {{t, ""}};
    EXPECT_EQ(cache.match(c, nullptr), 0u);
    pool.release(b);
    EXPECT_EQ(pool.num_free(), 2);
}

}  // namespace
}  // namespace inferscale::kv
