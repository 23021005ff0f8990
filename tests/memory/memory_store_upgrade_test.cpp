// MemoryStore's schema version 2 at rest: a version-1 file is upgraded in place, all or nothing;
// and SIGKILL during batches of changes leaves facts, history and embeddings consistent, with every
// acknowledged change kept.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <random>

#include "memory/memory_store.h"
#include "memory/sqlite_db.h"
#include "memory/temp_dir.h"

namespace inferscale::memory {
namespace {

using testing::TempDir;

// The version-1 schema as the first release wrote it: frozen here, as files in the field are.
constexpr const char* kVersion1File = R"sql(
CREATE TABLE users (id TEXT PRIMARY KEY, created_at TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE turns (
  id INTEGER PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id),
  session_id TEXT NOT NULL, session_index INTEGER NOT NULL, turn_index INTEGER NOT NULL,
  speaker TEXT NOT NULL, text TEXT NOT NULL, timestamp TEXT NOT NULL,
  image_caption TEXT NOT NULL DEFAULT '', image_query TEXT NOT NULL DEFAULT '',
  UNIQUE (user_id, session_id, turn_index));
CREATE INDEX turns_by_time ON turns (user_id, session_index, turn_index);
CREATE TABLE facts (
  id INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL REFERENCES users(id),
  text TEXT NOT NULL, source_session_id TEXT, source_turn_index INTEGER,
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
  FOREIGN KEY (user_id, source_session_id, source_turn_index)
    REFERENCES turns (user_id, session_id, turn_index));
CREATE INDEX facts_by_user ON facts (user_id, id);
INSERT INTO users VALUES ('alice', 't0'), ('bob', 't0');
INSERT INTO turns (user_id, session_id, session_index, turn_index, speaker, text, timestamp)
  VALUES ('alice', 's1', 1, 0, 'Alice', 'I adopted a dog.', 'May 8');
INSERT INTO facts (user_id, text, source_session_id, source_turn_index, created_at, updated_at)
  VALUES ('alice', 'Alice has a dog.', 's1', 0, 't1', 't2'),
         ('bob', 'Bob is deleted next.', NULL, NULL, 't1', 't1'),
         ('bob', 'Bob rows.', NULL, NULL, 't3', 't3');
DELETE FROM facts WHERE id = 2;
PRAGMA application_id = 1230196045;  -- "ISMM"
PRAGMA user_version = 1;
)sql";

void write_version1(const std::string& path, const char* extra_sql = "") {
    auto db = SqliteDb::open(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->exec(kVersion1File).ok());
    ASSERT_TRUE(db->exec(extra_sql).ok());
}

TEST(MemoryStoreUpgrade, Version1FileIsUpgradedInPlace) {
    TempDir dir;
    const std::string path = dir.file("v1.db");
    write_version1(path);
    {
        auto store = MemoryStore::open(path);
        ASSERT_TRUE(store.ok()) << store.error().message;
        auto& s = **store;
        const std::vector<Fact> alice = *s.list_facts("alice");
        ASSERT_EQ(alice.size(), 1u);
        EXPECT_EQ(alice[0], (Fact{1, "alice", "Alice has a dog.", TurnRef{"s1", 0}, "t1", "t2"}));
        EXPECT_EQ(s.list_turns("alice")->front().text, "I adopted a dog.");
        // Each surviving fact's history starts with one ADD of its text, dated as last updated.
        EXPECT_EQ(*s.history(1),
                  (std::vector<FactHistoryEntry>{
                      {1, 1, "alice", FactEvent::Add, {}, "Alice has a dog.", "t2"}}));
        EXPECT_TRUE(s.history(2)->empty());
        EXPECT_EQ(s.history(3)->size(), 1u);
        // AUTOINCREMENT's counter came along: the deleted id 2 and the live 3 are never reused.
        EXPECT_EQ(s.add_fact("bob", {"Bob swims.", {}, ""})->id, 4);
    }
    auto db = SqliteDb::open(path);
    EXPECT_EQ(*db->query_int64("PRAGMA user_version"), MemoryStore::kSchemaVersion);
    EXPECT_EQ(*db->query_text("PRAGMA integrity_check"), "ok");
    EXPECT_EQ(*db->query_int64("SELECT count(*) FROM pragma_foreign_key_check"), 0);
    // Reopening a version-2 file changes nothing.
    auto again = MemoryStore::open(path);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)->history(4)->size(), 1u);
}

// An upgrade that fails half-way (here: a table in the way of one it creates) leaves the file
// exactly at version 1, readable by the build that wrote it.
TEST(MemoryStoreUpgrade, FailedUpgradeLeavesVersion1Intact) {
    TempDir dir;
    const std::string path = dir.file("v1.db");
    write_version1(path, "CREATE TABLE fact_embeddings (x);");
    auto store = MemoryStore::open(path);
    ASSERT_FALSE(store.ok());
    EXPECT_NE(store.error().message.find("cannot upgrade schema version 1"), std::string::npos)
        << store.error().message;
    auto db = SqliteDb::open(path);
    EXPECT_EQ(*db->query_int64("PRAGMA user_version"), 1);
    EXPECT_EQ(*db->query_int64("SELECT count(*) FROM pragma_table_info('facts')"), 7)
        << "the columns added before the failure were rolled back";
    EXPECT_EQ(*db->query_int64("SELECT count(*) FROM sqlite_master WHERE name = 'fact_history'"),
              0);
    EXPECT_EQ(*db->query_int64("SELECT count(*) FROM facts"), 2);
}

std::vector<float> embedding_of(const std::string& text) {
    return {static_cast<float>(text.size()), static_cast<float>(text.front()),
            static_cast<float>(text.back())};
}

// The child: batches of adds, updates and deletes, each followed by embeddings of the facts it
// touched; after each embedding write, it reports the newest history row id on `ack`.
[[noreturn]] void churn(const std::string& path, int seed, int ack) {
    auto opened = MemoryStore::open(path);
    if (!opened.ok()) _exit(2);
    MemoryStore& store = **opened;
    std::mt19937 rng(seed);
    for (int step = 0;; ++step) {
        auto facts = store.list_facts("u");
        std::vector<FactChange> batch;
        for (int i = 0; i < 3; ++i)
            batch.push_back(
                FactChange::add({"fact " + std::to_string(seed) + "." + std::to_string(step) + "." +
                                     std::to_string(i) + std::string(rng() % 50, 'x'),
                                 {},
                                 ""}));
        if (facts.ok() && facts->size() > 4) {
            const Fact& victim = (*facts)[rng() % facts->size()];
            const Fact& changed = (*facts)[rng() % facts->size()];
            if (victim.id != changed.id) {
                batch.push_back(FactChange::update(changed.id, changed.text + " y"));
                batch.push_back(FactChange::remove(victim.id));
            }
        }
        auto applied = store.apply_changes("u", batch);
        if (!applied.ok()) _exit(3);
        for (const AppliedChange& a : *applied)
            if (a.event != FactEvent::Delete &&
                !store.set_embedding(a.fact.id, "m", embedding_of(a.fact.text)).ok())
                _exit(4);
        auto rows = store.history((*applied).back().fact.id);
        if (!rows.ok() || rows->empty()) _exit(5);
        const std::int64_t id = rows->back().id;
        if (write(ack, &id, sizeof id) != sizeof id) _exit(6);
    }
}

// Runs churn in a child, kills it with SIGKILL after `acks` acknowledgements; returns the newest
// acknowledged history row id.
std::int64_t churn_and_kill(const std::string& path, int seed, int acks) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        churn(path, seed, fds[1]);
    }
    close(fds[1]);
    std::int64_t last = 0, id = 0;
    for (int i = 0; i < acks && read(fds[0], &id, sizeof id) == sizeof id; ++i) last = id;
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(fds[0]);
    EXPECT_TRUE(WIFSIGNALED(status)) << "the child exited early with " << WEXITSTATUS(status);
    return last;
}

TEST(MemoryStoreUpgrade, KillDuringBatchesKeepsFactsHistoryAndEmbeddingsConsistent) {
    TempDir dir;
    const std::string path = dir.file("m.db");
    std::mt19937 rng(7);
    for (int round = 0; round < 6; ++round) {
        const std::int64_t acked = churn_and_kill(path, round, 3 + rng() % 30);
        auto opened = MemoryStore::open(path);
        ASSERT_TRUE(opened.ok()) << opened.error().message;
        MemoryStore& store = **opened;
        auto db = SqliteDb::open(path);
        EXPECT_GE(*db->query_int64("SELECT max(id) FROM fact_history"), acked);
        // A fact's history ends in an ADD or UPDATE to its text; a fact whose history ends in
        // DELETE is gone.
        Statement ids = std::move(db->prepare("SELECT DISTINCT fact_id FROM fact_history")).value();
        std::size_t live = 0;
        while (*ids.step()) {
            const FactId id = ids.column_int64(0);
            const std::vector<FactHistoryEntry> rows = *store.history(id);
            ASSERT_FALSE(rows.empty());
            EXPECT_EQ(rows.front().event, FactEvent::Add);
            auto fact = store.get_fact(id);
            if (rows.back().event == FactEvent::Delete) {
                EXPECT_FALSE(fact.ok()) << id;
                continue;
            }
            ASSERT_TRUE(fact.ok()) << id;
            ++live;
            EXPECT_EQ(rows.back().new_text, fact->text);
        }
        EXPECT_EQ(live, store.list_facts("u")->size());
        // No embedding outlives the text it was made from.
        std::map<FactId, std::string> text;
        const std::vector<Fact> facts = *store.list_facts("u");
        for (const Fact& f : facts) text[f.id] = f.text;
        const std::vector<FactEmbedding> embeddings = *store.list_embeddings("u", "m");
        for (const FactEmbedding& e : embeddings)
            EXPECT_EQ(e.vector, embedding_of(text.at(e.id))) << e.id;
        EXPECT_EQ(*db->query_text("PRAGMA integrity_check"), "ok");
    }
}

}  // namespace
}  // namespace inferscale::memory
