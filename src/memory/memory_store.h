#pragma once
// MemoryStore: users, conversation turns and facts in one SQLite file.
//
// Durability: journal_mode=WAL with synchronous=FULL. Every mutating call is one transaction,
// and when it returns ok the commit has been fsync'ed to the WAL, so an acknowledged write
// survives a process kill and a power cut. (NORMAL would survive a kill but may lose the last
// commits on power loss; memory writes are rare next to reads, so the fsync per commit is cheap.)
// Thread-safe within a process (one connection behind a mutex); other processes may use the
// same file at once (WAL readers, a busy timeout for writers).
// Expected failures (bad input, unknown ids, a corrupt or foreign file) come back as Error.

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "memory/memory_types.h"
#include "memory/sqlite_db.h"

namespace inferscale::memory {

struct MemoryStoreOptions {
    // Runs PRAGMA quick_check at open, so a damaged file fails there rather than at some later
    // read. Costs a full read of the file: turn off for very large stores.
    bool verify_on_open = true;
    // How long a writer waits for another process's write lock before giving up.
    int busy_timeout_ms = 10000;
    // Returns the current time as ISO-8601 UTC; empty means the system clock (tests pin it).
    std::function<std::string()> clock;
};

// Progress of a long call: items done of total.
using ProgressFn = std::function<void(std::size_t done, std::size_t total)>;

class MemoryStore {
  public:
    static constexpr int kSchemaVersion = 1;
    static constexpr std::size_t kMaxFactBytes = 16 * 1024;
    static constexpr std::size_t kMaxUserBytes = 256;

    // Opens or creates the file (its folder must exist). Error when the file is not a SQLite
    // database, is damaged, belongs to another application, or has a newer schema.
    static Result<std::unique_ptr<MemoryStore>> open(const std::string& path,
                                                     MemoryStoreOptions options = {});
    ~MemoryStore();
    MemoryStore(const MemoryStore&) = delete;
    MemoryStore& operator=(const MemoryStore&) = delete;

    // --- users: ids are non-empty UTF-8 without control characters, at most kMaxUserBytes.
    Status add_user(std::string_view user);  // ok when the user already exists
    Result<bool> has_user(std::string_view user);
    Result<std::vector<std::string>> list_users();  // sorted
    // Deletes the user's facts, turns and the user in one transaction. Error when unknown.
    Status delete_user(std::string_view user);

    // --- facts: text is whitespace-normalized, non-empty, valid UTF-8, at most kMaxFactBytes.
    // Creates the user when missing. Error when the source turn is not one of the user's turns.
    Result<Fact> add_fact(std::string_view user, const NewFact& fact);
    Result<Fact> update_fact(FactId id, std::string_view text);  // Error when unknown
    Status delete_fact(FactId id);                               // Error when unknown
    Result<Fact> get_fact(FactId id);                            // Error when unknown
    // The facts of `ids` that exist, in the order of `ids` (unknown ids are skipped: a fact
    // deleted since a search found it), read with one statement under one lock.
    Result<std::vector<Fact>> get_facts(std::span<const FactId> ids);
    Result<std::vector<Fact>> list_facts(std::string_view user);  // by id; Error when unknown user
    Result<bool> has_facts(std::string_view user);  // false for an unknown user

    // --- turns
    // Adds turns in one transaction, creating the user when missing. Error (and nothing added)
    // when a turn is already stored (same session_id and turn_index) or has a bad field.
    Status add_turns(std::string_view user, const std::vector<Turn>& turns);
    // Chronological: by session_index, then turn_index. Error when the user is unknown.
    Result<std::vector<Turn>> list_turns(std::string_view user);

    // Imports a whole conversation in one transaction: the turns, then the facts (whose sources
    // must be among those turns). All or nothing. Error when the user already has turns.
    Result<std::vector<Fact>> add_conversation(std::string_view user,
                                               const std::vector<Turn>& turns,
                                               const std::vector<NewFact>& facts,
                                               const ProgressFn& progress = {});

    // --- listeners (not owned; remove before destroying one).
    // With replay_existing, the listener first hears on_fact_added for every stored fact, under
    // the same lock as its registration, so it misses and doubles nothing.
    Status add_listener(FactListener* listener, bool replay_existing);
    void remove_listener(FactListener* listener);

    const std::string& path() const { return db_.path(); }

  private:
    MemoryStore(SqliteDb db, MemoryStoreOptions options);
    Status init_schema();
    std::string now() const;

    // The *_locked helpers run with mutex_ held (the writers inside a caller's transaction).
    Status ensure_user_locked(std::string_view user);
    Result<bool> has_user_locked(std::string_view user);
    Status insert_turn_locked(std::string_view user, const Turn& turn);
    Result<Fact> insert_fact_locked(std::string_view user, const NewFact& fact);
    // Facts matching `where` (SQL over the facts table, parameters set by `bind`), by id.
    Result<std::vector<Fact>> select_facts_locked(std::string_view where,
                                                  const std::function<void(Statement&)>& bind);

    std::mutex mutex_;
    SqliteDb db_;
    MemoryStoreOptions options_;
    std::vector<FactListener*> listeners_;
};

}  // namespace inferscale::memory
