// VectorIndex against a brute-force reference: every fact scored in double precision and sorted.
// Vectors with components in multiples of 1/8 make every f32 dot product exact in any summation
// order, so scores match the reference exactly and ties (frequent with such vectors) test the tie
// order; random unit vectors check lane_dot's rounding against double sums.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <random>
#include <thread>

#include "retrieval/vector_index.h"

namespace inferscale::retrieval {
namespace {

std::vector<float> eighths(std::size_t dim, std::mt19937& rng) {
    std::uniform_int_distribution<int> dist(-3, 3);
    std::vector<float> v(dim);
    for (float& x : v) x = static_cast<float>(dist(rng)) / 8.0f;
    return v;
}

// Reference: facts as a plain map, scored in double and fully sorted.
struct Reference {
    std::map<FactId, std::pair<std::string, std::vector<float>>> facts;

    std::vector<Hit> search(const std::string& user, const std::vector<float>& q,
                            std::size_t k) const {
        std::vector<Hit> all;
        for (const auto& [id, fact] : facts) {
            if (fact.first != user) continue;
            double s = 0.0;
            for (std::size_t i = 0; i < q.size(); ++i) s += double{fact.second[i]} * q[i];
            all.push_back({id, s});
        }
        std::sort(all.begin(), all.end(), [](const Hit& a, const Hit& b) {
            return a.score != b.score ? a.score > b.score : a.fact_id < b.fact_id;
        });
        if (all.size() > k) all.resize(k);
        return all;
    }
};

TEST(VectorIndexTest, MatchesBruteForceWithTiesSmallAndLargeUsers) {
    constexpr std::size_t kDim = 384;
    std::mt19937 rng(7);
    VectorIndex index(kDim);
    Reference ref;
    // "big" crosses kParallelRows, so its scan runs on the OpenMP team.
    const std::vector<std::pair<std::string, std::size_t>> users = {
        {"small", 40}, {"big", VectorIndex::kParallelRows + 300}};
    FactId next = 1;
    for (const auto& [user, n] : users) {
        for (std::size_t i = 0; i < n; ++i) {
            // Ids not in row order, so ties by id differ from ties by row.
            const FactId id = static_cast<FactId>((next++ * 7919) % 100003);
            auto v = eighths(kDim, rng);
            index.upsert(user, id, v);
            ref.facts[id] = {user, v};
        }
    }
    for (const auto& [user, n] : users) {
        EXPECT_EQ(index.size(user), n);
        for (int trial = 0; trial < 3; ++trial) {
            const auto q = eighths(kDim, rng);
            for (std::size_t k : {std::size_t{1}, std::size_t{10}, std::size_t{100}, n + 5}) {
                EXPECT_EQ(index.search(user, q, k), ref.search(user, q, k)) << user << " k " << k;
            }
        }
    }
    EXPECT_EQ(index.size(), ref.facts.size());
}

TEST(VectorIndexTest, LaneDotRoundsLikeAnF32Sum) {
    std::mt19937 rng(3);
    std::normal_distribution<float> dist;
    for (std::size_t n : {1, 15, 16, 37, 384, 1000}) {
        std::vector<float> a(n), b(n);
        double ref = 0.0, magnitude = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            a[i] = dist(rng);
            b[i] = dist(rng);
            ref += double{a[i]} * b[i];
            magnitude += std::abs(double{a[i]} * b[i]);
        }
        // f32 summation: error bounded by about n * eps * sum |a_i b_i|.
        EXPECT_NEAR(lane_dot(a.data(), b.data(), n), ref, 1e-7 * (n + 2) * magnitude) << n;
    }
}

TEST(VectorIndexTest, UpdatesKeepRowsInStepWithTheReference) {
    constexpr std::size_t kDim = 20;  // not a multiple of the lanes
    std::mt19937 rng(11);
    VectorIndex index(kDim);
    Reference ref;
    const std::vector<std::string> users = {"a", "b", "c"};
    for (int step = 0; step < 3000; ++step) {
        const FactId id = static_cast<FactId>(rng() % 200);
        const std::string& user = users[rng() % users.size()];
        switch (rng() % 6) {
            case 0: EXPECT_EQ(index.remove(id), ref.facts.erase(id) == 1); break;
            case 1:
                if (step % 50 == 0) {
                    std::size_t n = 0;
                    for (auto it = ref.facts.begin(); it != ref.facts.end();) {
                        if (it->second.first == user) {
                            it = ref.facts.erase(it);
                            ++n;
                        } else {
                            ++it;
                        }
                    }
                    EXPECT_EQ(index.remove_user(user), n);
                }
                break;
            default: {
                // Replaces in place, or moves the fact to another user.
                auto v = eighths(kDim, rng);
                index.upsert(user, id, v);
                ref.facts[id] = {user, v};
            }
        }
        if (step % 100 == 0) {
            const auto q = eighths(kDim, rng);
            for (const std::string& u : users) {
                EXPECT_EQ(index.search(u, q, 1000), ref.search(u, q, 1000)) << "step " << step;
                EXPECT_EQ(index.search(u, q, 7), ref.search(u, q, 7)) << "step " << step;
            }
        }
    }
    EXPECT_EQ(index.size(), ref.facts.size());
}

TEST(VectorIndexTest, EmptyResults) {
    VectorIndex index(4);
    const std::vector<float> v = {1, 0, 0, 0};
    EXPECT_TRUE(index.search("nobody", v, 5).empty());
    index.upsert("u", 1, v);
    EXPECT_TRUE(index.search("u", v, 0).empty());
    EXPECT_TRUE(index.search("other", v, 5).empty());
    EXPECT_EQ(index.search("u", v, 5), (std::vector<Hit>{{1, 1.0}}));
    EXPECT_TRUE(index.remove(1));
    EXPECT_FALSE(index.remove(1));
    EXPECT_TRUE(index.search("u", v, 5).empty());
    EXPECT_EQ(index.size(), 0u);
}

TEST(VectorIndexTest, TopKHitsNeverRanksNaNAboveANumber) {
    const float nan = std::nanf("");
    const std::vector<float> scores = {nan, -5.0f, nan, 2.0f};
    const std::vector<FactId> ids = {1, 2, 3, 4};
    const auto hits = top_k_hits(scores, ids, 4);
    ASSERT_EQ(hits.size(), 4u);
    EXPECT_EQ(hits[0].fact_id, 4);
    EXPECT_EQ(hits[1].fact_id, 2);
    EXPECT_EQ(hits[2].fact_id, 1);
    EXPECT_EQ(hits[3].fact_id, 3);
}

TEST(VectorIndexTest, SearchesRunBesideUpdates) {
    constexpr std::size_t kDim = 32;
    VectorIndex index(kDim);
    std::mt19937 rng(5);
    // "stable" never changes, so every concurrent search must give the same answer.
    Reference ref;
    for (FactId id = 0; id < 300; ++id) {
        auto v = eighths(kDim, rng);
        index.upsert("stable", id, v);
        ref.facts[id] = {"stable", v};
    }
    const auto q = eighths(kDim, rng);
    const auto expected = ref.search("stable", q, 10);
    std::atomic<bool> stop{false};
    std::thread writer([&] {
        std::mt19937 wrng(9);
        for (int i = 0; i < 20000; ++i) {
            const FactId id = 1000 + static_cast<FactId>(wrng() % 500);
            if (wrng() % 3 == 0) {
                index.remove(id);
            } else {
                index.upsert("churn", id, eighths(kDim, wrng));
            }
        }
        stop = true;
    });
    int mismatches = 0;
    while (!stop) {
        if (index.search("stable", q, 10) != expected) ++mismatches;
        for (const Hit& h : index.search("churn", q, 10)) {
            if (h.fact_id < 1000) ++mismatches;
        }
    }
    writer.join();
    EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace inferscale::retrieval
