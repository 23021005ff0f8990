#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "kv/kv_storage.h"

namespace inferscale::kv {
namespace {

TEST(BlockPool, AllocatesUntilExhaustedThenFailsPlainly) {
    BlockPool pool(3);
    EXPECT_EQ(pool.num_free(), 3);
    std::vector<BlockId> got;
    for (int i = 0; i < 3; ++i) {
        auto b = pool.allocate();
        ASSERT_TRUE(b.has_value());
        got.push_back(*b);
    }
    EXPECT_EQ(got, (std::vector<BlockId>{0, 1, 2}));
    EXPECT_EQ(pool.num_free(), 0);
    EXPECT_FALSE(pool.allocate().has_value());  // exhaustion is a value, not a crash
    pool.release(1);
    EXPECT_EQ(pool.num_free(), 1);
    EXPECT_EQ(pool.allocate(), std::optional<BlockId>(1));
}

TEST(BlockPool, BulkAllocationIsAllOrNothing) {
    BlockPool pool(4);
    std::vector<BlockId> a;
    EXPECT_TRUE(pool.allocate(3, a));
    EXPECT_EQ(a.size(), 3u);
    std::vector<BlockId> b{42};
    EXPECT_FALSE(pool.allocate(2, b));
    EXPECT_EQ(b, (std::vector<BlockId>{42}));  // untouched
    EXPECT_EQ(pool.num_free(), 1);
    pool.release(a);
    EXPECT_EQ(pool.num_free(), 4);
    EXPECT_TRUE(pool.allocate(0, b));
}

TEST(BlockPool, RefCountsKeepSharedBlocksAlive) {
    BlockPool pool(2);
    const BlockId b = *pool.allocate();
    pool.add_ref(b);
    EXPECT_EQ(pool.ref_count(b), 2);
    pool.release(b);
    EXPECT_EQ(pool.ref_count(b), 1);
    EXPECT_EQ(pool.num_free(), 1);
    pool.release(b);
    EXPECT_EQ(pool.ref_count(b), 0);
    EXPECT_EQ(pool.num_free(), 2);
}

TEST(BlockPoolDeathTest, DoubleReleaseIsABug) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");  // OpenBLAS may have started threads
    BlockPool pool(1);
    const BlockId b = *pool.allocate();
    pool.release(b);
    EXPECT_DEATH(pool.release(b), "release of free block");
}

TEST(KvStorage, PagesAreDisjointPerLayerAndZeroed) {
    backends::cpu::CpuBackend be;
    auto kv = KvStorage::create(be, KvLayout{2, 5, 16, 2, 8});
    ASSERT_TRUE(kv.ok()) << kv.error().message;
    const tensor::KvPages l0 = kv->pages(0), l1 = kv->pages(1);
    EXPECT_EQ(l0.k.shape, (std::array<std::int64_t, 4>{5, 16, 2, 8}));
    EXPECT_EQ(l0.k.dtype, tensor::DType::F32);
    const auto* base = static_cast<const char*>(l0.k.data);
    EXPECT_EQ(static_cast<const char*>(l0.v.data), base + l0.k.nbytes());
    EXPECT_EQ(static_cast<const char*>(l1.k.data), base + 2 * l0.k.nbytes());
    for (std::int64_t i = 0; i < l1.v.numel(); ++i) ASSERT_EQ(l1.v.as<float>()[i], 0.0f);
    EXPECT_FALSE(KvStorage::create(be, KvLayout{2, 0, 16, 2, 8}).ok());
}

}  // namespace
}  // namespace inferscale::kv
