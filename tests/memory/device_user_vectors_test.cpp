// DeviceUserVectors on the CPU backend against retrieval::VectorIndex fed the same random puts,
// erases, moves between users and user deletions: every user's search must give the same hits
// (the CPU op shares VectorIndex's arithmetic), up to max_k.

#include <gtest/gtest.h>

#include <random>

#include "backends/cpu/cpu_backend.h"
#include "memory/device_user_vectors.h"
#include "retrieval/vector_index.h"

namespace inferscale::memory {
namespace {

TEST(DeviceUserVectors, MatchesVectorIndexAcrossUsers) {
    constexpr std::size_t kDim = 24;
    backends::cpu::CpuBackend cpu;
    DeviceUserVectors device(cpu, kDim);
    retrieval::VectorIndex host(kDim);
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    const auto vec = [&] {
        std::vector<float> v(kDim);
        for (float& x : v) x = normal(rng);
        return v;
    };
    const std::vector<std::string> users = {"a", "b", "c", "d"};
    for (int step = 0; step < 3000; ++step) {
        const int op = static_cast<int>(rng() % 100);
        const retrieval::FactId id = static_cast<retrieval::FactId>(rng() % 400);
        const std::string& user = users[rng() % users.size()];
        if (op < 70) {  // add, replace, or move to another user
            const auto v = vec();
            ASSERT_TRUE(device.put(user, id, v).ok());
            ASSERT_TRUE(host.put(user, id, v).ok());
        } else if (op < 98) {
            device.erase(id);
            host.erase(id);
        } else {
            device.erase_user(user);
            host.erase_user(user);
        }
        if (step % 100 == 99) {
            const auto q = vec();
            for (const std::string& u : users)
                for (std::size_t k : {std::size_t{1}, std::size_t{7}, std::size_t{500}})
                    ASSERT_EQ(*device.nearest(u, q, k), host.search(u, q, k))
                        << "step " << step << " user " << u << " k " << k;
        }
    }
    EXPECT_TRUE(device.nearest("nobody", vec(), 5)->empty());
    EXPECT_EQ(device.max_k(), static_cast<std::size_t>(tensor::Backend::kDotTopKMax));
}

}  // namespace
}  // namespace inferscale::memory
