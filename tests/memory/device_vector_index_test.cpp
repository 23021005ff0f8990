// DeviceVectorIndex on the CPU backend against retrieval::VectorIndex fed the same updates: the CPU
// op shares VectorIndex's arithmetic, so the Hits must be identical, scores included. Random normal
// vectors check the scores; vectors of multiples of 1/8 and runs of duplicate vectors make tie
// groups larger than k, which the index must order by fact id, not by row.

#include <gtest/gtest.h>

#include <random>

#include "backends/cpu/cpu_backend.h"
#include "memory/device_vector_index.h"
#include "retrieval/vector_index.h"

namespace inferscale::memory {
namespace {

using retrieval::FactId;

class DeviceVectorIndexTest : public ::testing::Test {
  protected:
    std::vector<float> normal(std::size_t dim) {
        std::normal_distribution<float> dist;
        std::vector<float> v(dim);
        for (float& x : v) x = dist(rng_);
        return v;
    }
    std::vector<float> eighths(std::size_t dim) {
        std::uniform_int_distribution<int> dist(-1, 1);
        std::vector<float> v(dim);
        for (float& x : v) x = static_cast<float>(dist(rng_)) / 8.0f;
        return v;
    }

    backends::cpu::CpuBackend cpu_;
    std::mt19937 rng_{99};
};

TEST_F(DeviceVectorIndexTest, MatchesVectorIndexThroughUpdatesAndGrowth) {
    for (const bool ties : {false, true}) {
        const std::size_t dim = ties ? 8 : 48;
        auto created = DeviceVectorIndex::create(cpu_, dim, /*capacity=*/2);
        ASSERT_TRUE(created.ok()) << created.error().message;
        DeviceVectorIndex& device = **created;
        retrieval::VectorIndex host(dim);
        const auto vec = [&] { return ties ? eighths(dim) : normal(dim); };
        for (int step = 0; step < 4000; ++step) {
            const FactId id = static_cast<FactId>(rng_() % 700);
            if (rng_() % 4 == 0) {
                EXPECT_EQ(device.remove(id), host.remove(id));
            } else {
                const auto v = vec();
                ASSERT_TRUE(device.upsert(id, v).ok());
                host.upsert("u", id, v);
            }
            if (step % 250 == 0) {
                const auto q = vec();
                for (std::size_t k : {1, 5, 64, 1000}) {
                    EXPECT_EQ(device.search(q, k), host.search("u", q, k))
                        << "ties " << ties << " step " << step << " k " << k;
                }
            }
        }
        EXPECT_EQ(device.size(), host.size("u"));
        EXPECT_GE(device.capacity(), device.size());
    }
}

TEST_F(DeviceVectorIndexTest, TieGroupsWiderThanKAreOrderedByFactId) {
    const std::size_t dim = 16;
    auto created = DeviceVectorIndex::create(cpu_, dim, 4);
    ASSERT_TRUE(created.ok());
    DeviceVectorIndex& device = **created;
    retrieval::VectorIndex host(dim);
    const auto best = normal(dim), other = normal(dim);
    // 40 copies of one vector inserted with descending ids, so row order is the reverse of the id
    // order, among 200 other facts.
    for (FactId id = 1000; id > 960; --id) {
        ASSERT_TRUE(device.upsert(id, best).ok());
        host.upsert("u", id, best);
    }
    for (FactId id = 0; id < 200; ++id) {
        const auto v = id % 2 == 0 ? other : normal(dim);
        ASSERT_TRUE(device.upsert(id, v).ok());
        host.upsert("u", id, v);
    }
    for (std::size_t k : {1, 3, 10, 39, 40, 41, 100}) {
        EXPECT_EQ(device.search(best, k), host.search("u", best, k)) << "k " << k;
        EXPECT_EQ(device.search(other, k), host.search("u", other, k)) << "k " << k;
    }
}

TEST_F(DeviceVectorIndexTest, EmptyAndCleared) {
    auto created = DeviceVectorIndex::create(cpu_, 4);
    ASSERT_TRUE(created.ok());
    DeviceVectorIndex& device = **created;
    const std::vector<float> v = {0, 1, 0, 0};
    EXPECT_TRUE(device.search(v, 3).empty());
    ASSERT_TRUE(device.upsert(5, v).ok());
    EXPECT_TRUE(device.search(v, 0).empty());
    EXPECT_EQ(device.search(v, 3), (std::vector<retrieval::Hit>{{5, 1.0}}));
    device.clear();
    EXPECT_EQ(device.size(), 0u);
    EXPECT_TRUE(device.search(v, 3).empty());
    EXPECT_FALSE(device.remove(5));
}

}  // namespace
}  // namespace inferscale::memory
