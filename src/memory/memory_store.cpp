// MemoryStore: opening, the schema and its upgrade, users, reset and listeners. Facts live in
// memory_store_facts.cpp, batches, history and embeddings in memory_store_changes.cpp, turns in
// memory_store_turns.cpp.

#include "memory/memory_store.h"

#include <algorithm>

#include "base/log.h"
#include "memory/text_checks.h"

namespace inferscale::memory {
namespace {

// "ISMM" in the header's application_id field: tells our files from other SQLite files.
constexpr std::int64_t kApplicationId = 0x49534D4D;

constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE users (
  id         TEXT PRIMARY KEY,
  created_at TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE turns (
  id            INTEGER PRIMARY KEY,
  user_id       TEXT NOT NULL REFERENCES users(id),
  session_id    TEXT NOT NULL,
  session_index INTEGER NOT NULL,
  turn_index    INTEGER NOT NULL,
  speaker       TEXT NOT NULL,
  text          TEXT NOT NULL,
  timestamp     TEXT NOT NULL,
  image_caption TEXT NOT NULL DEFAULT '',
  image_query   TEXT NOT NULL DEFAULT '',
  UNIQUE (user_id, session_id, turn_index)
);
CREATE INDEX turns_by_time ON turns (user_id, session_index, turn_index);

-- AUTOINCREMENT: ids are never reused, so caches keyed by fact id stay unambiguous.
CREATE TABLE facts (
  id                INTEGER PRIMARY KEY AUTOINCREMENT,
  user_id           TEXT NOT NULL REFERENCES users(id),
  text              TEXT NOT NULL,
  source_session_id TEXT,
  source_turn_index INTEGER,
  created_at        TEXT NOT NULL,
  updated_at        TEXT NOT NULL,
  FOREIGN KEY (user_id, source_session_id, source_turn_index)
    REFERENCES turns (user_id, session_id, turn_index)
);
CREATE INDEX facts_by_user ON facts (user_id, id);
)sql";

// Version 1 to 2, also run after kSchemaV1 on a new file so both reach the same schema.
// History rows name their fact without a foreign key: they outlive it. A version-1 fact's
// history starts with one ADD of its current text, so every fact has one.
constexpr const char* kUpgradeV1ToV2 = R"sql(
ALTER TABLE facts ADD COLUMN agent_id TEXT NOT NULL DEFAULT '';
ALTER TABLE facts ADD COLUMN run_id   TEXT NOT NULL DEFAULT '';
ALTER TABLE facts ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
CREATE INDEX facts_by_scope ON facts (user_id, agent_id, run_id, id);

CREATE TABLE fact_history (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  fact_id    INTEGER NOT NULL,
  user_id    TEXT NOT NULL,
  event      TEXT NOT NULL CHECK (event IN ('ADD', 'UPDATE', 'DELETE')),
  old_text   TEXT,
  new_text   TEXT,
  created_at TEXT NOT NULL
);
CREATE INDEX history_by_fact ON fact_history (fact_id, id);
CREATE INDEX history_by_user ON fact_history (user_id);
INSERT INTO fact_history (fact_id, user_id, event, old_text, new_text, created_at)
  SELECT id, user_id, 'ADD', NULL, text, updated_at FROM facts ORDER BY id;

-- Little-endian float32, dims values.
CREATE TABLE fact_embeddings (
  fact_id INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
  model   TEXT NOT NULL,
  dims    INTEGER NOT NULL,
  vector  BLOB NOT NULL,
  PRIMARY KEY (fact_id, model)
) WITHOUT ROWID;
)sql";

Error open_error(const std::string& path, const std::string& why) {
    return make_error("memory database " + path + ": " + why);
}

}  // namespace

MemoryStore::MemoryStore(SqliteDb db, MemoryStoreOptions options)
    : db_(std::move(db)), options_(std::move(options)) {}

MemoryStore::~MemoryStore() = default;

Result<std::unique_ptr<MemoryStore>> MemoryStore::open(const std::string& path,
                                                       MemoryStoreOptions options) {
    SqliteDb db = IS_TRY(SqliteDb::open(path));
    const std::string timeout = "PRAGMA busy_timeout = " + std::to_string(options.busy_timeout_ms);
    IS_RETURN_IF_ERROR(db.exec(timeout.c_str()));

    // The first read of the header: garbage fails here with "file is not a database".
    auto app_id = db.query_int64("PRAGMA application_id");
    if (!app_id.ok()) return open_error(path, app_id.error().message);
    auto objects = db.query_int64("SELECT count(*) FROM sqlite_master");
    if (!objects.ok()) return open_error(path, objects.error().message);
    if (*app_id != kApplicationId && !(*app_id == 0 && *objects == 0))
        return open_error(path, "not an inferscale memory database");
    const std::int64_t version = IS_TRY(db.query_int64("PRAGMA user_version"));
    if (version > kSchemaVersion)
        return open_error(path, "schema version " + std::to_string(version) +
                                    " is newer than this build's " +
                                    std::to_string(kSchemaVersion));

    auto mode = db.query_text("PRAGMA journal_mode = WAL");
    if (!mode.ok()) return open_error(path, mode.error().message);
    if (*mode != "wal")
        return open_error(path, "cannot switch to WAL (journal mode " + *mode + ")");
    IS_RETURN_IF_ERROR(db.exec("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON"));

    if (options.verify_on_open) {
        auto check = db.query_text("PRAGMA quick_check");
        if (!check.ok()) return open_error(path, "damaged: " + check.error().message);
        if (*check != "ok") return open_error(path, "damaged: " + *check);
    }

    std::unique_ptr<MemoryStore> store(new MemoryStore(std::move(db), std::move(options)));
    IS_RETURN_IF_ERROR(store->init_schema());
    return store;
}

Status MemoryStore::init_schema() {
    std::lock_guard lock(mutex_);
    Transaction tx = IS_TRY(Transaction::begin(db_));
    // Re-read inside the write lock: another process may have created the schema meanwhile.
    const std::int64_t version = IS_TRY(db_.query_int64("PRAGMA user_version"));
    if (version == kSchemaVersion) return {};  // the transaction rolls back: nothing written
    if (version != 0 && version != 1)
        return open_error(db_.path(), "unknown schema version " + std::to_string(version));
    if (version == 0) IS_RETURN_IF_ERROR(db_.exec(kSchemaV1));
    if (auto upgraded = db_.exec(kUpgradeV1ToV2); !upgraded.ok())
        return open_error(db_.path(), "cannot upgrade schema version " + std::to_string(version) +
                                          ": " + upgraded.error().message);
    const std::string pragmas = "PRAGMA application_id = " + std::to_string(kApplicationId) +
                                "; PRAGMA user_version = " + std::to_string(kSchemaVersion);
    IS_RETURN_IF_ERROR(db_.exec(pragmas.c_str()));
    return tx.commit();
}

std::string MemoryStore::now() const { return options_.clock ? options_.clock() : utc_timestamp(); }

Result<bool> MemoryStore::has_user_locked(std::string_view user) {
    Statement stmt = IS_TRY(db_.prepare("SELECT 1 FROM users WHERE id = ?1"));
    stmt.bind(1, user);
    return stmt.step();
}

Status MemoryStore::ensure_user_locked(std::string_view user) {
    IS_RETURN_IF_ERROR(check_user_id(user, kMaxUserBytes));
    Statement stmt = IS_TRY(
        db_.prepare("INSERT INTO users (id, created_at) VALUES (?1, ?2) ON CONFLICT DO NOTHING"));
    stmt.bind(1, user).bind(2, now());
    return stmt.run();
}

Status MemoryStore::add_user(std::string_view user) {
    std::lock_guard lock(mutex_);
    Transaction tx = IS_TRY(Transaction::begin(db_));
    IS_RETURN_IF_ERROR(ensure_user_locked(user));
    return tx.commit();
}

Result<bool> MemoryStore::has_user(std::string_view user) {
    std::lock_guard lock(mutex_);
    return has_user_locked(user);
}

Result<std::vector<std::string>> MemoryStore::list_users() {
    std::lock_guard lock(mutex_);
    Statement stmt = IS_TRY(db_.prepare("SELECT id FROM users ORDER BY id"));
    std::vector<std::string> users;
    while (IS_TRY(stmt.step())) users.push_back(stmt.column_text(0));
    return users;
}

Status MemoryStore::delete_user(std::string_view user) {
    std::lock_guard lock(mutex_);
    Transaction tx = IS_TRY(Transaction::begin(db_));
    if (!IS_TRY(has_user_locked(user)))
        return make_error(ErrorKind::NotFound, "unknown user '" + std::string(user) + "'");
    std::vector<FactId> fact_ids;
    {
        Statement stmt = IS_TRY(db_.prepare("SELECT id FROM facts WHERE user_id = ?1 ORDER BY id"));
        stmt.bind(1, user);
        while (IS_TRY(stmt.step())) fact_ids.push_back(stmt.column_int64(0));
    }
    // Facts first (their embeddings go with them): they reference turns, and turns the user.
    for (const char* sql :
         {"DELETE FROM fact_history WHERE user_id = ?1", "DELETE FROM facts WHERE user_id = ?1",
          "DELETE FROM turns WHERE user_id = ?1", "DELETE FROM users WHERE id = ?1"}) {
        Statement stmt = IS_TRY(db_.prepare(sql));
        stmt.bind(1, user);
        IS_RETURN_IF_ERROR(stmt.run());
    }
    IS_RETURN_IF_ERROR(tx.commit());
    const std::string owner(user);
    for (FactListener* listener : listeners_) listener->on_user_deleted(owner, fact_ids);
    return {};
}

Status MemoryStore::reset() {
    std::lock_guard lock(mutex_);
    Transaction tx = IS_TRY(Transaction::begin(db_));
    std::vector<std::pair<std::string, std::vector<FactId>>> users;
    {
        Statement stmt = IS_TRY(
            db_.prepare("SELECT u.id, f.id FROM users u LEFT JOIN facts f ON f.user_id = u.id "
                        "ORDER BY u.id, f.id"));
        while (IS_TRY(stmt.step())) {
            std::string user = stmt.column_text(0);
            if (users.empty() || users.back().first != user) users.push_back({std::move(user), {}});
            if (!stmt.column_is_null(1)) users.back().second.push_back(stmt.column_int64(1));
        }
    }
    // sqlite_sequence keeps its counters, so ids stay unused after the reset.
    IS_RETURN_IF_ERROR(
        db_.exec("DELETE FROM fact_embeddings; DELETE FROM fact_history; DELETE FROM facts; "
                 "DELETE FROM turns; DELETE FROM users"));
    IS_RETURN_IF_ERROR(tx.commit());
    for (const auto& [user, fact_ids] : users)
        for (FactListener* listener : listeners_) listener->on_user_deleted(user, fact_ids);
    return {};
}

Status MemoryStore::add_listener(FactListener* listener, bool replay_existing) {
    IS_CHECK(listener != nullptr);
    std::lock_guard lock(mutex_);
    IS_CHECK(std::find(listeners_.begin(), listeners_.end(), listener) == listeners_.end())
        << "listener added twice";
    if (replay_existing) {
        const std::vector<Fact> facts = IS_TRY(select_facts_locked("1 = 1", {}));
        for (const Fact& fact : facts) listener->on_fact_added(fact);
    }
    listeners_.push_back(listener);
    return {};
}

void MemoryStore::remove_listener(FactListener* listener) {
    std::lock_guard lock(mutex_);
    std::erase(listeners_, listener);
}

}  // namespace inferscale::memory
