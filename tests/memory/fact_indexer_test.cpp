// The BM25 index kept in step with the store, and absolute per-user isolation under random
// adds, updates and deletes.

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "memory/fact_indexer.h"
#include "memory/temp_dir.h"

namespace inferscale::memory {
namespace {

using testing::TempDir;

TEST(FactIndexer, FollowsTheStore) {
    TempDir dir;
    auto store = std::move(MemoryStore::open(dir.file("m.db"))).value();
    const FactId early = store->add_fact("u", {"Ann likes green tea", {}, ""})->id;
    retrieval::Bm25Index index;
    auto indexer = std::move(FactIndexer::attach(*store, index)).value();
    ASSERT_EQ(index.search("u", "tea", 5).size(), 1u);  // replayed at attach
    EXPECT_EQ(index.search("u", "tea", 5).front().fact_id, early);

    const FactId b = store->add_fact("u", {"Ann plays chess", {}, ""})->id;
    EXPECT_EQ(index.search("u", "chess", 5).front().fact_id, b);
    ASSERT_TRUE(store->update_fact(b, "Ann plays the violin").ok());
    EXPECT_TRUE(index.search("u", "chess", 5).empty());
    EXPECT_EQ(index.search("u", "violin", 5).size(), 1u);
    ASSERT_TRUE(store->delete_fact(b).ok());
    EXPECT_TRUE(index.search("u", "violin", 5).empty());
    ASSERT_TRUE(store->delete_user("u").ok());
    EXPECT_EQ(index.size(), 0u);

    indexer.reset();  // detaches
    ASSERT_TRUE(store->add_fact("u", {"tea again", {}, ""}).ok());
    EXPECT_EQ(index.size(), 0u);
}

TEST(FactIndexer, StoredFactsAndQueriesAreStemmedAlike) {
    TempDir dir;
    FactId allergy = 0;
    {
        auto store = std::move(MemoryStore::open(dir.file("m.db"))).value();
        allergy = store->add_fact("u", {"Bob has a peanut allergy", {}, ""})->id;
    }
    // A reopened database is indexed from its facts' text at attach: nothing stale survives.
    auto store = std::move(MemoryStore::open(dir.file("m.db"))).value();
    retrieval::Bm25Index index;
    auto indexer = std::move(FactIndexer::attach(*store, index)).value();
    const FactId painting = store->add_fact("u", {"Bob went painting", {}, ""})->id;
    ASSERT_EQ(index.search("u", "allergies to peanuts", 5).size(), 1u);
    EXPECT_EQ(index.search("u", "allergies to peanuts", 5).front().fact_id, allergy);
    ASSERT_EQ(index.search("u", "paints", 5).size(), 1u);
    EXPECT_EQ(index.search("u", "paints", 5).front().fact_id, painting);
}

TEST(FactIndexer, RandomizedSearchesNeverCrossUsers) {
    TempDir dir;
    auto store = std::move(MemoryStore::open(dir.file("m.db"))).value();
    retrieval::Bm25Index index;
    auto indexer = std::move(FactIndexer::attach(*store, index)).value();

    std::mt19937 rng(1234);
    // A small shared vocabulary so every user's facts overlap every other user's.
    const std::vector<std::string> words = {"tea", "chess", "dog", "paris", "guitar", "run",
                                            "book", "cat", "lake", "red", "blue", "garden"};
    auto sentence = [&] {
        std::string s;
        const int n = 2 + static_cast<int>(rng() % 5);
        for (int i = 0; i < n; ++i) s += (i ? " " : "") + words[rng() % words.size()];
        return s;
    };
    constexpr int kUsers = 12;
    std::map<FactId, std::string> owner;           // the truth, kept by the test
    std::map<std::string, std::set<FactId>> live;  // per user
    for (int step = 0; step < 600; ++step) {
        const std::string user = "user-" + std::to_string(rng() % kUsers);
        const unsigned op = rng() % 10;
        if (op < 6 || live[user].empty()) {
            auto fact = store->add_fact(user, {sentence(), {}, ""});
            ASSERT_TRUE(fact.ok());
            owner[fact->id] = user;
            live[user].insert(fact->id);
        } else if (op < 8) {
            auto it = std::next(live[user].begin(), static_cast<long>(rng() % live[user].size()));
            ASSERT_TRUE(store->update_fact(*it, sentence()).ok());
        } else if (op < 9) {
            auto it = std::next(live[user].begin(), static_cast<long>(rng() % live[user].size()));
            ASSERT_TRUE(store->delete_fact(*it).ok());
            live[user].erase(it);
        } else {
            ASSERT_TRUE(store->delete_user(user).ok());
            live[user].clear();
        }
        // Search as a random user (two never exist) with a random query: every hit is that
        // user's live fact.
        const std::string who = "user-" + std::to_string(rng() % (kUsers + 2));
        for (const auto& hit : index.search(who, sentence(), 1 + rng() % 20)) {
            ASSERT_EQ(owner.at(hit.fact_id), who);
            ASSERT_TRUE(live[who].contains(hit.fact_id));
        }
    }
    // And the index agrees with the store on what each user has.
    for (const auto& [user, ids] : live) EXPECT_EQ(index.size(user), ids.size()) << user;
}

}  // namespace
}  // namespace inferscale::memory
