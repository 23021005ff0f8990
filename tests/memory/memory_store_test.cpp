// MemoryStore: persistence across reopen, updates, cascading deletes, listeners, bad input and
// bad files.

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "memory/memory_store.h"
#include "memory/sqlite_db.h"
#include "memory/temp_dir.h"

namespace inferscale::memory {
namespace {

using testing::TempDir;

std::unique_ptr<MemoryStore> open_ok(const std::string& path) {
    MemoryStoreOptions options;
    options.clock = [] { return std::string("2024-01-02T03:04:05.000Z"); };
    auto store = MemoryStore::open(path, options);
    EXPECT_TRUE(store.ok()) << store.error().message;
    return std::move(store).value();
}

Turn make_turn(const std::string& session, int session_index, int turn_index,
               const std::string& text) {
    Turn t;
    t.session_id = session;
    t.session_index = session_index;
    t.turn_index = turn_index;
    t.speaker = turn_index % 2 ? "Bob" : "Alice";
    t.text = text;
    t.timestamp = "1:56 pm on 8 May, 2023";
    return t;
}

struct RecordingListener : FactListener {
    std::vector<std::string> events;
    void on_fact_added(const Fact& f) override { events.push_back("add " + std::to_string(f.id)); }
    void on_fact_changed(const Fact& f) override {
        events.push_back("change " + std::to_string(f.id) + " " + f.text);
    }
    void on_fact_deleted(const std::string& user, FactId id) override {
        events.push_back("delete " + user + " " + std::to_string(id));
    }
    void on_user_deleted(const std::string& user, const std::vector<FactId>& ids) override {
        std::string e = "user " + user;
        for (FactId id : ids) e += " " + std::to_string(id);
        events.push_back(e);
    }
};

TEST(MemoryStore, PersistsAcrossReopen) {
    TempDir dir;
    const std::string path = dir.file("memory.db");
    FactId id = 0;
    {
        auto store = open_ok(path);
        ASSERT_TRUE(store->add_turns("u1", {make_turn("session_1", 1, 0, "hi"),
                                            make_turn("session_1", 1, 1, "hello")})
                        .ok());
        auto fact = store->add_fact("u1", {"  Alice  likes\n tea. ", TurnRef{"session_1", 1}, ""});
        ASSERT_TRUE(fact.ok()) << fact.error().message;
        EXPECT_EQ(fact->text, "Alice likes tea.");
        EXPECT_EQ(fact->created_at, "2024-01-02T03:04:05.000Z");
        id = fact->id;
    }
    auto store = open_ok(path);
    auto facts = store->list_facts("u1");
    ASSERT_TRUE(facts.ok());
    ASSERT_EQ(facts->size(), 1u);
    const Fact& f = facts->front();
    EXPECT_EQ(f.id, id);
    EXPECT_EQ(f.user, "u1");
    EXPECT_EQ(f.text, "Alice likes tea.");
    ASSERT_TRUE(f.source.has_value());
    EXPECT_EQ(*f.source, (TurnRef{"session_1", 1}));
    EXPECT_EQ(*store->get_fact(id), f);
    auto turns = store->list_turns("u1");
    ASSERT_TRUE(turns.ok());
    ASSERT_EQ(turns->size(), 2u);
    EXPECT_EQ((*turns)[1], make_turn("session_1", 1, 1, "hello"));
    EXPECT_EQ(*store->list_users(), std::vector<std::string>{"u1"});
}

// A batch read returns exactly what one get_fact per id would, in the order asked, and skips
// ids that do not exist (deleted since a search found them).
TEST(MemoryStore, GetFactsMatchesGetFactInRequestOrder) {
    TempDir dir;
    auto store = open_ok(dir.file("m.db"));
    std::vector<FactId> ids;
    for (int i = 0; i < 12; ++i)
        ids.push_back(
            store->add_fact(i % 2 ? "u" : "v", {"fact " + std::to_string(i), {}, ""})->id);
    ASSERT_TRUE(store->delete_fact(ids[4]).ok());
    const std::vector<FactId> asked{ids[7], ids[4], ids[0], 999999, ids[11], ids[3]};
    auto got = store->get_facts(asked);
    ASSERT_TRUE(got.ok()) << got.error().message;
    std::vector<Fact> expected;
    for (const FactId id : asked)
        if (auto f = store->get_fact(id); f.ok()) expected.push_back(*f);
    EXPECT_EQ(expected.size(), 4u);
    EXPECT_EQ(*got, expected);
    EXPECT_TRUE(store->get_facts({})->empty());
}

TEST(MemoryStore, UpdateAndDelete) {
    TempDir dir;
    const std::string path = dir.file("m.db");
    {
        auto store = open_ok(path);
        const FactId a = store->add_fact("u", {"first", {}, "2020-01-01T00:00:00.000Z"})->id;
        const FactId b = store->add_fact("u", {"second", {}, ""})->id;
        EXPECT_LT(a, b);
        auto updated = store->update_fact(a, "first, revised");
        ASSERT_TRUE(updated.ok());
        EXPECT_EQ(updated->created_at, "2020-01-01T00:00:00.000Z");
        EXPECT_EQ(updated->updated_at, "2024-01-02T03:04:05.000Z");
        ASSERT_TRUE(store->delete_fact(b).ok());
        EXPECT_FALSE(store->get_fact(b).ok());
        EXPECT_FALSE(store->delete_fact(b).ok());
    }
    auto store = open_ok(path);
    auto facts = store->list_facts("u");
    ASSERT_EQ(facts->size(), 1u);
    EXPECT_EQ(facts->front().text, "first, revised");
    // Ids are never reused, even after the newest fact was deleted and the file reopened.
    EXPECT_GT(store->add_fact("u", {"third", {}, ""})->id, 2);
}

TEST(MemoryStore, DeleteUserCascades) {
    TempDir dir;
    const std::string path = dir.file("m.db");
    auto store = open_ok(path);
    ASSERT_TRUE(store->add_turns("a", {make_turn("s", 1, 0, "x")}).ok());
    ASSERT_TRUE(store->add_fact("a", {"fa", TurnRef{"s", 0}, ""}).ok());
    ASSERT_TRUE(store->add_fact("b", {"fb", {}, ""}).ok());
    ASSERT_TRUE(store->delete_user("a").ok());
    EXPECT_FALSE(store->list_facts("a").ok());
    EXPECT_FALSE(store->list_turns("a").ok());
    EXPECT_FALSE(store->delete_user("a").ok());
    EXPECT_EQ(store->list_facts("b")->size(), 1u);
    store.reset();
    store = open_ok(path);
    EXPECT_EQ(*store->list_users(), std::vector<std::string>{"b"});
    // The user can come back with a fresh conversation.
    EXPECT_TRUE(store->add_turns("a", {make_turn("s", 1, 0, "x")}).ok());
}

// has_facts is what decides whether a request gets memory: only a stored fact counts, not the
// user's turns or a user whose facts are all deleted.
TEST(MemoryStore, HasFactsOnlyWhileOneIsStored) {
    TempDir dir;
    auto store = open_ok(dir.file("m.db"));
    EXPECT_FALSE(store->has_facts("u").value());
    ASSERT_TRUE(store->add_turns("u", {make_turn("s", 1, 0, "x")}).ok());
    EXPECT_FALSE(store->has_facts("u").value());
    const FactId id = store->add_fact("u", {"fa", TurnRef{"s", 0}, ""})->id;
    EXPECT_TRUE(store->has_facts("u").value());
    EXPECT_FALSE(store->has_facts("v").value());
    ASSERT_TRUE(store->delete_fact(id).ok());
    EXPECT_FALSE(store->has_facts("u").value());
    EXPECT_TRUE(store->has_user("u").value());
}

TEST(MemoryStore, ListenersHearCommittedChanges) {
    TempDir dir;
    auto store = open_ok(dir.file("m.db"));
    const FactId existing = store->add_fact("u", {"before", {}, ""})->id;
    RecordingListener listener;
    ASSERT_TRUE(store->add_listener(&listener, /*replay_existing=*/true).ok());
    const FactId a = store->add_fact("u", {"a", {}, ""})->id;
    ASSERT_TRUE(store->update_fact(a, "a2").ok());
    ASSERT_TRUE(store->update_fact(a, "a2").ok());  // same text: nothing to hear
    ASSERT_TRUE(store->delete_fact(a).ok());
    const FactId b = store->add_fact("v", {"b", {}, ""})->id;
    ASSERT_TRUE(store->delete_user("u").ok());
    EXPECT_FALSE(store->add_fact("u", {"   ", {}, ""}).ok());  // failed writes are silent
    const auto s = [](FactId id) { return std::to_string(id); };
    EXPECT_EQ(listener.events, (std::vector<std::string>{
                                   "add " + s(existing), "add " + s(a), "change " + s(a) + " a2",
                                   "delete u " + s(a), "add " + s(b), "user u " + s(existing)}));
    store->remove_listener(&listener);
    ASSERT_TRUE(store->add_fact("v", {"c", {}, ""}).ok());
    EXPECT_EQ(listener.events.size(), 6u);
}

TEST(MemoryStore, BadInputIsAnError) {
    TempDir dir;
    auto store = open_ok(dir.file("m.db"));
    EXPECT_FALSE(store->add_fact("u", {"", {}, ""}).ok());
    EXPECT_FALSE(store->add_fact("u", {" \n\t", {}, ""}).ok());
    EXPECT_FALSE(store->add_fact("", {"text", {}, ""}).ok());
    EXPECT_FALSE(store->add_fact("bad\nuser", {"text", {}, ""}).ok());
    EXPECT_FALSE(store->add_fact("u", {"\xff\xfe", {}, ""}).ok());
    EXPECT_FALSE(
        store->add_fact("u", {std::string(MemoryStore::kMaxFactBytes + 1, 'x'), {}, ""}).ok());
    EXPECT_FALSE(store->add_fact("u", {"text", TurnRef{"session_9", 0}, ""}).ok());
    EXPECT_FALSE(store->update_fact(424242, "text").ok());
    EXPECT_FALSE(store->delete_fact(-1).ok());
    EXPECT_FALSE(store->get_fact(0).ok());
    EXPECT_FALSE(store->list_facts("nobody").ok());
    EXPECT_FALSE(store->delete_user("nobody").ok());
    // A failed batch adds nothing.
    ASSERT_TRUE(store->add_turns("t", {make_turn("s", 1, 0, "x")}).ok());
    EXPECT_FALSE(
        store->add_turns("t", {make_turn("s", 1, 1, "y"), make_turn("s", 1, 0, "dup")}).ok());
    EXPECT_EQ(store->list_turns("t")->size(), 1u);
    EXPECT_FALSE(store->add_turns("t", {make_turn("s", 1, 5, "")}).ok());
    // A source turn of another user is not a source turn of this one.
    EXPECT_FALSE(store->add_fact("u", {"text", TurnRef{"s", 0}, ""}).ok());
    auto facts = store->list_facts("u");  // "u" exists only if a failed add leaked it
    EXPECT_TRUE(!facts.ok() || facts->empty());
    EXPECT_FALSE(store->has_user("u").value());
}

TEST(MemoryStore, ConversationImportIsAllOrNothing) {
    TempDir dir;
    auto store = open_ok(dir.file("m.db"));
    const std::vector<Turn> turns = {make_turn("s", 1, 0, "x"), make_turn("s", 1, 1, "y")};
    std::vector<NewFact> facts = {{"ok", TurnRef{"s", 1}, ""}, {"bad", TurnRef{"s", 7}, ""}};
    EXPECT_FALSE(store->add_conversation("u", turns, facts).ok());
    EXPECT_FALSE(store->has_user("u").value());
    facts.pop_back();
    std::size_t last_done = 0, last_total = 0;
    auto added = store->add_conversation("u", turns, facts, [&](std::size_t d, std::size_t t) {
        last_done = d;
        last_total = t;
    });
    ASSERT_TRUE(added.ok()) << added.error().message;
    EXPECT_EQ(added->size(), 1u);
    EXPECT_EQ(last_done, 3u);
    EXPECT_EQ(last_total, 3u);
    EXPECT_FALSE(store->add_conversation("u", turns, facts).ok());  // already has turns
}

TEST(MemoryStore, CorruptFileIsAnErrorAtOpen) {
    TempDir dir;
    const std::string garbage = dir.file("garbage.db");
    {
        std::ofstream out(garbage, std::ios::binary);
        for (int i = 0; i < 4096; ++i) out.put(static_cast<char>(i * 7919 % 251));
    }
    auto store = MemoryStore::open(garbage);
    ASSERT_FALSE(store.ok());
    EXPECT_NE(store.error().message.find(garbage), std::string::npos) << store.error().message;

    // A real store whose pages are then overwritten: the header is fine, the b-trees are not.
    const std::string damaged = dir.file("damaged.db");
    {
        auto good = open_ok(damaged);
        for (int i = 0; i < 300; ++i)
            ASSERT_TRUE(good->add_fact("u" + std::to_string(i % 7),
                                       {std::string(200, static_cast<char>('a' + i % 26)), {}, ""})
                            .ok());
    }
    {
        std::fstream f(damaged, std::ios::binary | std::ios::in | std::ios::out);
        f.seekp(4096 + 100);
        for (int i = 0; i < 3 * 4096; ++i) f.put(static_cast<char>(0xA5));
    }
    store = MemoryStore::open(damaged);
    ASSERT_FALSE(store.ok());
    EXPECT_NE(store.error().message.find(damaged), std::string::npos) << store.error().message;

    EXPECT_FALSE(MemoryStore::open(dir.file("no/such/folder/m.db")).ok());
}

TEST(MemoryStore, ForeignAndNewerFilesAreRefused) {
    TempDir dir;
    const std::string foreign = dir.file("foreign.db");
    {
        auto db = SqliteDb::open(foreign);
        ASSERT_TRUE(db.ok());
        ASSERT_TRUE(db->exec("CREATE TABLE t (x)").ok());
    }
    auto store = MemoryStore::open(foreign);
    ASSERT_FALSE(store.ok());
    EXPECT_NE(store.error().message.find("not an inferscale"), std::string::npos);

    const std::string newer = dir.file("newer.db");
    open_ok(newer).reset();
    {
        auto db = SqliteDb::open(newer);
        ASSERT_TRUE(db->exec("PRAGMA user_version = 99").ok());
    }
    store = MemoryStore::open(newer);
    ASSERT_FALSE(store.ok());
    EXPECT_NE(store.error().message.find("newer"), std::string::npos);
}

TEST(MemoryStore, FileIsWalAndIntact) {
    TempDir dir;
    const std::string path = dir.file("m.db");
    auto store = open_ok(path);
    ASSERT_TRUE(store->add_fact("u", {"x", {}, ""}).ok());
    auto db = SqliteDb::open(path);
    EXPECT_EQ(*db->query_text("PRAGMA journal_mode"), "wal");
    EXPECT_EQ(*db->query_text("PRAGMA integrity_check"), "ok");
}

TEST(MemoryStore, ConcurrentWritersInOneProcess) {
    TempDir dir;
    auto store = open_ok(dir.file("m.db"));
    constexpr int kThreads = 4, kPerThread = 25;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kPerThread; ++i) {
                const std::string user = "user" + std::to_string(t);
                EXPECT_TRUE(store->add_fact(user, {"fact " + std::to_string(i), {}, ""}).ok());
                EXPECT_TRUE(store->list_facts(user).ok());
            }
        });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t)
        EXPECT_EQ(store->list_facts("user" + std::to_string(t))->size(), std::size_t{kPerThread});
}

}  // namespace
}  // namespace inferscale::memory
