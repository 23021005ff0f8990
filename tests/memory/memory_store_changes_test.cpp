// MemoryStore, schema version 2: history rows, batches applied all or nothing, scoped and paged
// listings, deletes by scope, embeddings and reset (the upgrade: memory_store_upgrade_test.cpp).

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "memory/memory_store.h"
#include "memory/sqlite_db.h"
#include "memory/temp_dir.h"

namespace inferscale::memory {
namespace {

using testing::TempDir;

constexpr const char* kTime = "2024-01-02T03:04:05.000Z";

std::unique_ptr<MemoryStore> open_ok(const std::string& path) {
    MemoryStoreOptions options;
    options.clock = [] { return std::string(kTime); };
    auto store = MemoryStore::open(path, options);
    EXPECT_TRUE(store.ok()) << store.error().message;
    return std::move(store).value();
}

NewFact scoped(const std::string& text, const std::string& agent, const std::string& run,
               const std::string& metadata = "") {
    NewFact f;
    f.text = text;
    f.agent_id = agent;
    f.run_id = run;
    f.metadata = metadata;
    return f;
}

FactHistoryEntry row(FactId id, const std::string& user, FactEvent event,
                     std::optional<std::string> old_text, std::optional<std::string> new_text) {
    return {0, id, user, event, std::move(old_text), std::move(new_text), kTime};
}

// History rows without their row ids (those are the store's to number).
std::vector<FactHistoryEntry> history_of(MemoryStore& store, FactId id) {
    auto rows = store.history(id);
    EXPECT_TRUE(rows.ok()) << rows.error().message;
    std::vector<FactHistoryEntry> out = rows.ok() ? *rows : std::vector<FactHistoryEntry>{};
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (i > 0) {
            EXPECT_GT(out[i].id, out[i - 1].id);
        }
        out[i].id = 0;
    }
    return out;
}

// Everything a store holds, as one comparable value: every user's facts and every fact's history.
struct Snapshot {
    std::vector<Fact> facts;
    std::map<FactId, std::vector<FactHistoryEntry>> history;
    bool operator==(const Snapshot&) const = default;
};

Snapshot snapshot(MemoryStore& store, FactId max_id) {
    Snapshot s;
    // Each Result held by name: a range-for over *temporary would outlive the temporary.
    const std::vector<std::string> users = *store.list_users();
    for (const std::string& user : users) {
        const std::vector<Fact> facts = *store.list_facts(user);
        s.facts.insert(s.facts.end(), facts.begin(), facts.end());
    }
    for (FactId id = 1; id <= max_id; ++id) s.history[id] = *store.history(id);
    return s;
}

struct RecordingListener : FactListener {
    std::vector<std::string> events;
    void on_fact_added(const Fact& f) override { events.push_back("add " + f.text); }
    void on_fact_changed(const Fact& f) override { events.push_back("change " + f.text); }
    void on_fact_deleted(const std::string& user, FactId id) override {
        events.push_back("delete " + user + " " + std::to_string(id));
    }
    void on_user_deleted(const std::string& user, const std::vector<FactId>& ids) override {
        events.push_back("user " + user + " " + std::to_string(ids.size()));
    }
};

TEST(MemoryStoreChanges, EveryChangeWritesHistoryThatOutlivesTheFact) {
    TempDir dir;
    auto store = open_ok(dir.file("m.db"));
    const Fact a = *store->add_fact("u", {"Alice likes tea.", {}, ""});
    const Fact other = *store->add_fact("v", {"Victor likes coffee.", {}, ""});
    ASSERT_TRUE(store->update_fact(a.id, "Alice likes green tea.").ok());
    ASSERT_TRUE(store->update_fact(a.id, "Alice likes green tea.", R"({"k":1})").ok());
    ASSERT_TRUE(store->delete_fact(a.id).ok());
    const std::vector<FactHistoryEntry> expected = {
        row(a.id, "u", FactEvent::Add, {}, "Alice likes tea."),
        row(a.id, "u", FactEvent::Update, "Alice likes tea.", "Alice likes green tea."),
        row(a.id, "u", FactEvent::Update, "Alice likes green tea.", "Alice likes green tea."),
        row(a.id, "u", FactEvent::Delete, "Alice likes green tea.", {})};
    EXPECT_EQ(history_of(*store, a.id), expected);
    EXPECT_TRUE(history_of(*store, 987654).empty());
    // Deleting the user deletes their history, and only theirs.
    ASSERT_TRUE(store->delete_user("u").ok());
    EXPECT_TRUE(history_of(*store, a.id).empty());
    EXPECT_EQ(history_of(*store, other.id),
              (std::vector{row(other.id, "v", FactEvent::Add, {}, "Victor likes coffee.")}));
}

TEST(MemoryStoreChanges, ScopesAndMetadataPersist) {
    TempDir dir;
    const std::string path = dir.file("m.db");
    Fact added;
    {
        auto store = open_ok(path);
        added = *store->add_fact("u", scoped("x", "agent-1", "run-7", R"({"topic": "food"})"));
        EXPECT_EQ(added.metadata, R"({"topic": "food"})");
        EXPECT_EQ(store->add_fact("u", scoped("y", "", ""))->metadata, "{}");
    }
    auto store = open_ok(path);
    EXPECT_EQ(*store->get_fact(added.id), added);
    EXPECT_EQ(added.agent_id, "agent-1");
    EXPECT_EQ(added.run_id, "run-7");
    EXPECT_FALSE(store->add_fact("u", scoped("x", "bad\nagent", "")).ok());
    EXPECT_FALSE(store->add_fact("u", scoped("x", "", std::string(300, 'r'))).ok());
    EXPECT_FALSE(store
                     ->add_fact("u", scoped("x", "", "",
                                            std::string(MemoryStore::kMaxMetadataBytes + 1, ' ')))
                     .ok());
    EXPECT_FALSE(
        store->update_fact(added.id, "x", std::string(MemoryStore::kMaxMetadataBytes + 1, ' '))
            .ok());
    EXPECT_EQ(*store->get_fact(added.id),
              added);  // the failed update changed nothing
}

// A filtered page equals the same filter applied to the full listing, then sliced.
TEST(MemoryStoreChanges, FilteredPagesEqualTheFilteredFullListing) {
    TempDir dir;
    auto store = open_ok(dir.file("m.db"));
    const std::vector<std::string> agents = {"", "a1", "a2"}, runs = {"", "r1", "r2", "r3"};
    for (int i = 0; i < 60; ++i) {
        const std::string user = i % 5 == 0 ? "other" : "u";
        ASSERT_TRUE(store
                        ->add_fact(user, scoped("fact " + std::to_string(i), agents[i * 7 % 3],
                                                runs[i * 11 % 4]))
                        .ok());
    }
    const std::vector<Fact> all = *store->list_facts("u");
    ASSERT_TRUE(std::is_sorted(all.begin(), all.end(),
                               [](const Fact& a, const Fact& b) { return a.id < b.id; }));
    for (const std::string& agent : agents) {
        for (const std::string& run : runs) {
            std::vector<Fact> expected;
            for (const Fact& f : all)
                if ((agent.empty() || f.agent_id == agent) && (run.empty() || f.run_id == run))
                    expected.push_back(f);
            EXPECT_EQ(*store->list_facts(FactFilter{"u", agent, run}), expected);
            for (const std::size_t page_size : {1u, 3u, 7u}) {
                std::vector<Fact> paged;
                for (std::size_t offset = 0;; offset += page_size) {
                    auto page = store->list_facts(FactFilter{"u", agent, run, offset, page_size});
                    ASSERT_TRUE(page.ok());
                    ASSERT_LE(page->size(), page_size);
                    if (page->empty()) break;
                    paged.insert(paged.end(), page->begin(), page->end());
                }
                EXPECT_EQ(paged, expected) << agent << "/" << run << " by " << page_size;
            }
        }
    }
    EXPECT_FALSE(store->list_facts(FactFilter{"nobody"}).ok());
}

TEST(MemoryStoreChanges, DeleteFactsByScopeKeepsTheRest) {
    TempDir dir;
    auto store = open_ok(dir.file("m.db"));
    const FactId keep = store->add_fact("u", scoped("keep", "a1", "r1"))->id;
    const FactId drop1 = store->add_fact("u", scoped("drop one", "a2", "r1"))->id;
    const FactId drop2 = store->add_fact("u", scoped("drop two", "a2", ""))->id;
    const FactId other = store->add_fact("v", scoped("other user", "a2", ""))->id;
    RecordingListener listener;
    ASSERT_TRUE(store->add_listener(&listener, false).ok());
    EXPECT_EQ(*store->delete_facts(FactFilter{"u", "a2"}), (std::vector<FactId>{drop1, drop2}));
    EXPECT_EQ(listener.events, (std::vector<std::string>{"delete u " + std::to_string(drop1),
                                                         "delete u " + std::to_string(drop2)}));
    EXPECT_EQ(store->list_facts("u")->size(), 1u);
    EXPECT_TRUE(store->get_fact(keep).ok());
    EXPECT_TRUE(store->get_fact(other).ok());
    EXPECT_EQ(history_of(*store, drop2).back(), row(drop2, "u", FactEvent::Delete, "drop two", {}));
    EXPECT_TRUE(store->delete_facts(FactFilter{"nobody"})->empty());
    store->remove_listener(&listener);
}

TEST(MemoryStoreChanges, ApplyChangesIsOneTransactionInOrder) {
    TempDir dir;
    auto store = open_ok(dir.file("m.db"));
    const FactId a = store->add_fact("u", {"Alice lives in Paris.", {}, ""})->id;
    const FactId b = store->add_fact("u", {"Alice has a cat.", {}, ""})->id;
    RecordingListener listener;
    ASSERT_TRUE(store->add_listener(&listener, false).ok());
    FactChange meta = FactChange::update(b, "Alice has a cat.");
    meta.metadata = R"({"pet": true})";
    const std::vector<FactChange> changes = {
        FactChange::add(scoped("Alice moved to Lyon.", "agent", "")),
        FactChange::update(a, "Alice lived in Paris."), meta, FactChange::remove(a)};
    auto applied = store->apply_changes("u", changes);
    ASSERT_TRUE(applied.ok()) << applied.error().message;
    ASSERT_EQ(applied->size(), 4u);
    const Fact& added = (*applied)[0].fact;
    EXPECT_EQ((*applied)[0].event, FactEvent::Add);
    EXPECT_EQ(added.agent_id, "agent");
    EXPECT_EQ(*store->get_fact(added.id), added);
    EXPECT_EQ((*applied)[1].event, FactEvent::Update);
    EXPECT_EQ((*applied)[1].fact.text, "Alice lived in Paris.");
    EXPECT_EQ((*applied)[2].fact, *store->get_fact(b));
    EXPECT_EQ(store->get_fact(b)->metadata, R"({"pet": true})");
    EXPECT_EQ((*applied)[3].event, FactEvent::Delete);
    EXPECT_EQ((*applied)[3].fact.id, a);
    EXPECT_FALSE(store->get_fact(a).ok());
    // The metadata-only update kept the text, so the listener hears nothing of it.
    EXPECT_EQ(listener.events,
              (std::vector<std::string>{"add Alice moved to Lyon.", "change Alice lived in Paris.",
                                        "delete u " + std::to_string(a)}));
    EXPECT_EQ(history_of(*store, a),
              (std::vector{
                  row(a, "u", FactEvent::Add, {}, "Alice lives in Paris."),
                  row(a, "u", FactEvent::Update, "Alice lives in Paris.", "Alice lived in Paris."),
                  row(a, "u", FactEvent::Delete, "Alice lived in Paris.", {})}));
    EXPECT_TRUE(store->apply_changes("u", {})->empty());
    store->remove_listener(&listener);
}

// A failing change anywhere in a batch leaves every fact and every history row as it was, and
// listeners hear nothing.
TEST(MemoryStoreChanges, ApplyChangesIsAllOrNothing) {
    TempDir dir;
    auto store = open_ok(dir.file("m.db"));
    const FactId mine = store->add_fact("u", {"mine", {}, ""})->id;
    const FactId theirs = store->add_fact("v", {"theirs", {}, ""})->id;
    RecordingListener listener;
    ASSERT_TRUE(store->add_listener(&listener, false).ok());
    const Snapshot before = snapshot(*store, theirs + 8);
    const std::vector<std::vector<FactChange>> bad_batches = {
        {FactChange::add({"new", {}, ""}), FactChange::update(theirs, "stolen")},
        {FactChange::update(mine, "changed"), FactChange::remove(theirs)},
        {FactChange::remove(mine), FactChange::remove(424242)},
        {FactChange::remove(mine), FactChange::update(mine, "after delete")},
        {FactChange::add({"ok", {}, ""}), FactChange::add({"   ", {}, ""})},
        {FactChange::update(mine, "ok"), FactChange::add(scoped("x", "bad\tagent", ""))},
    };
    for (const auto& batch : bad_batches) {
        auto result = store->apply_changes("u", batch);
        ASSERT_FALSE(result.ok());
        EXPECT_NE(result.error().message.find("change 1"), std::string::npos)
            << result.error().message;
        EXPECT_EQ(snapshot(*store, theirs + 8), before);
    }
    // Another user's id reads as unknown: the error does not tell it exists.
    auto stolen = store->apply_changes("u", std::vector{FactChange::remove(theirs)});
    ASSERT_FALSE(stolen.ok());
    EXPECT_EQ(stolen.error().kind, ErrorKind::NotFound);
    EXPECT_EQ(stolen.error().message, "change 0: unknown fact id " + std::to_string(theirs));
    EXPECT_FALSE(store->apply_changes("", std::vector{FactChange::add({"x", {}, ""})}).ok());
    EXPECT_FALSE(store->has_user("w").value());
    EXPECT_FALSE(store->apply_changes("w", std::vector{FactChange::remove(mine)}).ok());
    EXPECT_FALSE(store->has_user("w").value());
    EXPECT_TRUE(listener.events.empty());
    store->remove_listener(&listener);
}

TEST(MemoryStoreChanges, EmbeddingsRoundTripAndGoStaleWithTheirText) {
    TempDir dir;
    const std::string path = dir.file("m.db");
    const std::vector<float> v1 = {0.25f, -1.5f, 3.0e-8f, 1.0e30f}, v2 = {1.0f, 2.0f, 3.0f, 4.0f};
    FactId a = 0, b = 0, c = 0;
    {
        auto store = open_ok(path);
        a = store->add_fact("u", {"a", {}, ""})->id;
        b = store->add_fact("u", {"b", {}, ""})->id;
        c = store->add_fact("v", {"c", {}, ""})->id;
        ASSERT_TRUE(store->set_embedding(b, "m1", v2).ok());
        ASSERT_TRUE(store->set_embedding(a, "m1", v2).ok());
        ASSERT_TRUE(store->set_embedding(a, "m1", v1).ok());  // replaces
        ASSERT_TRUE(store->set_embedding(a, "m2", v2).ok());
        ASSERT_TRUE(store->set_embedding(c, "m1", v1).ok());
    }
    auto store = open_ok(path);
    const auto listed = [&](const std::string& user, const std::string& model) {
        std::vector<std::pair<FactId, std::vector<float>>> out;
        const std::vector<FactEmbedding> embeddings = *store->list_embeddings(user, model);
        for (const FactEmbedding& e : embeddings) out.emplace_back(e.id, e.vector);
        return out;
    };
    using Rows = std::vector<std::pair<FactId, std::vector<float>>>;
    EXPECT_EQ(listed("u", "m1"), (Rows{{a, v1}, {b, v2}}));
    EXPECT_EQ(listed("u", "m2"), (Rows{{a, v2}}));
    EXPECT_EQ(listed("v", "m1"), (Rows{{c, v1}}));
    EXPECT_TRUE(listed("nobody", "m1").empty());
    // Same text: still valid. New text: stale in every model, dropped with the change.
    ASSERT_TRUE(store->update_fact(a, "a").ok());
    EXPECT_EQ(listed("u", "m2"), (Rows{{a, v2}}));
    ASSERT_TRUE(store->apply_changes("u", std::vector{FactChange::update(a, "a, revised")}).ok());
    EXPECT_EQ(listed("u", "m1"), (Rows{{b, v2}}));
    EXPECT_TRUE(listed("u", "m2").empty());
    ASSERT_TRUE(store->delete_fact(b).ok());
    EXPECT_TRUE(listed("u", "m1").empty());
    EXPECT_FALSE(store->set_embedding(b, "m1", v1).ok());  // deleted
    EXPECT_FALSE(store->set_embedding(c, "", v1).ok());
    EXPECT_FALSE(store->set_embedding(c, "m1", {}).ok());
    EXPECT_FALSE(
        store->set_embedding(c, "m1", std::vector<float>(MemoryStore::kMaxEmbeddingDims + 1)).ok());
    ASSERT_TRUE(store->delete_user("v").ok());
    EXPECT_TRUE(listed("v", "m1").empty());
    auto db = SqliteDb::open(path);
    EXPECT_EQ(*db->query_int64("SELECT count(*) FROM fact_embeddings"), 0);
}

TEST(MemoryStoreChanges, ResetDeletesEverythingAndIdsStayUnused) {
    TempDir dir;
    const std::string path = dir.file("m.db");
    auto store = open_ok(path);
    Turn turn{"s", 1, 0, "Alice", "hi", "", "", ""};
    ASSERT_TRUE(store->add_turns("u", {turn}).ok());
    const FactId a = store->add_fact("u", {"a", TurnRef{"s", 0}, ""})->id;
    ASSERT_TRUE(store->add_fact("u", {"b", {}, ""}).ok());
    const FactId c = store->add_fact("v", {"c", {}, ""})->id;
    ASSERT_TRUE(store->set_embedding(c, "m", std::vector<float>{1.0f}).ok());
    ASSERT_TRUE(store->add_user("empty").ok());
    RecordingListener listener;
    ASSERT_TRUE(store->add_listener(&listener, false).ok());
    ASSERT_TRUE(store->reset().ok());
    EXPECT_EQ(listener.events, (std::vector<std::string>{"user empty 0", "user u 2", "user v 1"}));
    store->remove_listener(&listener);
    EXPECT_TRUE(store->list_users()->empty());
    EXPECT_TRUE(store->history(a)->empty());
    auto db = SqliteDb::open(path);
    for (const char* table : {"users", "turns", "facts", "fact_history", "fact_embeddings"})
        EXPECT_EQ(*db->query_int64((std::string("SELECT count(*) FROM ") + table).c_str()), 0)
            << table;
    EXPECT_GT(store->add_fact("u", {"after", {}, ""})->id, c);
}

}  // namespace
}  // namespace inferscale::memory
