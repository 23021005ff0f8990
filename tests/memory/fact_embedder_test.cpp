// FactEmbedder keeps the store's embeddings and the dense index in step with the facts: after
// any sequence of adds, changes and deletes (also while encoding runs beside them), the index
// equals one built from scratch from the live facts' text, the store holds each live fact's
// vector, and a restart indexes from the stored vectors without encoding anything.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <thread>

#include "memory/fact_embedder.h"
#include "memory/temp_dir.h"
#include "retrieval/letter_embedding.h"
#include "retrieval/vector_index.h"

namespace inferscale::memory {
namespace {

using testing::TempDir;

constexpr std::size_t kDim = 16;

std::vector<float> letters(std::string_view text) {
    return retrieval::testing::letter_embedding(text, kDim);
}

// The embedding model: `letters` of each text, counting its calls.
struct CountingEncoder {
    std::atomic<int> texts{0};
    std::chrono::microseconds delay{0};
    TextEncoder fn() {
        return [this](std::span<const std::string> batch) -> Result<std::vector<float>> {
            texts += static_cast<int>(batch.size());
            if (delay.count() > 0) std::this_thread::sleep_for(delay);
            std::vector<float> out;
            for (const std::string& t : batch) {
                const auto v = letters(t);
                out.insert(out.end(), v.begin(), v.end());
            }
            return out;
        };
    }
};

// The index built from scratch: every live fact of the store, by its text.
void expect_index_matches_store(MemoryStore& store, retrieval::VectorIndex& index,
                                const std::vector<std::string>& users) {
    retrieval::VectorIndex reference(kDim);
    std::size_t live = 0;
    for (const std::string& user : users) {
        auto facts = store.list_facts(user);
        if (!facts.ok()) continue;  // deleted user
        for (const Fact& f : *facts) {
            reference.upsert(user, f.id, letters(f.text));
            ++live;
        }
        auto stored = store.list_embeddings(user, "letters");
        ASSERT_TRUE(stored.ok());
        ASSERT_EQ(stored->size(), facts->size()) << user;
        for (const FactEmbedding& e : *stored) {
            const auto it = std::find_if(facts->begin(), facts->end(),
                                         [&](const Fact& f) { return f.id == e.id; });
            ASSERT_NE(it, facts->end());
            EXPECT_EQ(e.vector, letters(it->text)) << "fact " << e.id;
        }
    }
    ASSERT_EQ(index.size(), live);
    for (const std::string& user : users) {
        ASSERT_EQ(index.size(user), reference.size(user)) << user;
        for (const char* q : {"tea", "Berlin", "chess and music", "a"})
            EXPECT_EQ(index.search(user, letters(q), 100), reference.search(user, letters(q), 100))
                << user << " " << q;
    }
}

TEST(FactEmbedder, FollowsTheStoreAndRestartsFromStoredVectors) {
    TempDir dir;
    const std::vector<std::string> users = {"ann", "bob"};
    {
        auto store = std::move(MemoryStore::open(dir.file("m.db"))).value();
        ASSERT_TRUE(store->add_fact("ann", {"Ann likes green tea", {}, ""}).ok());
        retrieval::VectorIndex index(kDim);
        CountingEncoder encoder;
        auto embedder = std::move(FactEmbedder::attach(*store, {&index}, encoder.fn(),
                                                       {.model = "letters", .dim = kDim}))
                            .value();
        const FactId chess = store->add_fact("ann", {"Ann plays chess", {}, ""})->id;
        const FactId gone = store->add_fact("ann", {"Ann moved to Berlin", {}, ""})->id;
        ASSERT_TRUE(store->add_fact("bob", {"Bob teaches music", {}, ""}).ok());
        ASSERT_TRUE(store->add_fact("bob", {"Bob drinks tea", {}, ""}).ok());
        ASSERT_TRUE(store->update_fact(chess, "Ann plays the violin").ok());
        ASSERT_TRUE(store->delete_fact(gone).ok());
        embedder->wait_idle();
        expect_index_matches_store(*store, index, users);
        EXPECT_EQ(embedder->failures(), 0u);
    }
    auto store = std::move(MemoryStore::open(dir.file("m.db"))).value();
    retrieval::VectorIndex index(kDim);
    CountingEncoder encoder;
    auto embedder = std::move(FactEmbedder::attach(*store, {&index}, encoder.fn(),
                                                   {.model = "letters", .dim = kDim}))
                        .value();
    embedder->wait_idle();
    EXPECT_EQ(encoder.texts, 0);  // every vector came from the store
    expect_index_matches_store(*store, index, users);
    ASSERT_TRUE(store->add_fact("bob", {"Bob visited Lisbon", {}, ""}).ok());
    ASSERT_TRUE(store->delete_user("ann").ok());
    embedder->wait_idle();
    EXPECT_EQ(encoder.texts, 1);
    expect_index_matches_store(*store, index, users);
    EXPECT_EQ(index.size("ann"), 0u);
}

TEST(FactEmbedder, ChangesDuringEncodingNeverLeaveAStaleVector) {
    TempDir dir;
    auto store = std::move(MemoryStore::open(dir.file("m.db"))).value();
    retrieval::VectorIndex index(kDim), second(kDim);
    CountingEncoder encoder;
    encoder.delay = std::chrono::microseconds(300);
    auto embedder = std::move(FactEmbedder::attach(*store, {&index, &second}, encoder.fn(),
                                                   {.model = "letters", .dim = kDim, .batch = 4}))
                        .value();
    const std::vector<std::string> users = {"u0", "u1", "u2"};
    const std::vector<std::string> words = {"tea", "chess", "Berlin", "music", "cat", "May"};
    std::mt19937 rng(7);
    std::vector<FactId> live;
    for (int step = 0; step < 400; ++step) {
        const int op = static_cast<int>(rng() % 10);
        if (live.empty() || op < 5) {
            const std::string& user = users[rng() % users.size()];
            const std::string text =
                "likes " + words[rng() % words.size()] + " " + std::to_string(step);
            live.push_back(store->add_fact(user, {text, {}, ""})->id);
        } else if (op < 8) {
            const FactId id = live[rng() % live.size()];
            ASSERT_TRUE(
                store->update_fact(id, "now " + words[rng() % words.size()] + std::to_string(step))
                    .ok());
        } else {
            const std::size_t i = rng() % live.size();
            ASSERT_TRUE(store->delete_fact(live[i]).ok());
            live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
        }
    }
    ASSERT_TRUE(embedder->wait_until_current(std::chrono::seconds(60)));
    expect_index_matches_store(*store, index, users);
    expect_index_matches_store(*store, second, users);
}

TEST(FactEmbedder, AFailedBatchIsCountedAndALaterChangeEncodesAgain) {
    TempDir dir;
    auto store = std::move(MemoryStore::open(dir.file("m.db"))).value();
    retrieval::VectorIndex index(kDim);
    std::atomic<bool> fail{true};
    CountingEncoder good;
    auto embedder =
        std::move(
            FactEmbedder::attach(*store, {&index},
                                 [&](std::span<const std::string> t) -> Result<std::vector<float>> {
                                     if (fail) return make_error("device lost");
                                     return good.fn()(t);
                                 },
                                 {.model = "letters", .dim = kDim}))
            .value();
    const FactId id = store->add_fact("ann", {"Ann likes tea", {}, ""})->id;
    embedder->wait_idle();
    EXPECT_EQ(embedder->failures(), 1u);
    EXPECT_EQ(index.size(), 0u);
    fail = false;
    ASSERT_TRUE(store->update_fact(id, "Ann likes coffee").ok());
    embedder->wait_idle();
    expect_index_matches_store(*store, index, {"ann"});
}

}  // namespace
}  // namespace inferscale::memory
