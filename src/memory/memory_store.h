#pragma once
// MemoryStore: users, conversation turns, facts, their history and embeddings in one SQLite
// file.
//
// Durability: journal_mode=WAL with synchronous=FULL. Every mutating call is one transaction,
// and when it returns ok the commit has been fsync'ed to the WAL, so an acknowledged write
// survives a process kill and a power cut. (NORMAL would survive a kill but may lose the last
// commits on power loss; memory writes are rare next to reads, so the fsync per commit is cheap.)
// Thread-safe within a process (one connection behind a mutex); other processes may use the
// same file at once (WAL readers, a busy timeout for writers).
// Expected failures (bad input, unknown ids, a corrupt or foreign file) come back as Error.
// Schema version 2 added agent/run scopes and metadata to facts, the history table and
// embeddings; a version-1 file is upgraded in place at open, in one transaction.

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
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
    static constexpr int kSchemaVersion = 2;
    static constexpr std::size_t kMaxFactBytes = 16 * 1024;
    static constexpr std::size_t kMaxUserBytes = 256;  // also agent and run ids, model names
    static constexpr std::size_t kMaxMetadataBytes = 16 * 1024;
    static constexpr std::size_t kMaxEmbeddingDims = 65536;

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
    // Deletes the user's facts, their history and embeddings, turns and the user in one
    // transaction. Error when unknown.
    Status delete_user(std::string_view user);
    // Deletes everything (Mem0's reset); listeners hear on_user_deleted for every user. Fact
    // ids stay unused afterwards.
    Status reset();

    // --- facts: text is whitespace-normalized, non-empty, valid UTF-8, at most kMaxFactBytes;
    // agent and run ids empty or valid as user ids; metadata at most kMaxMetadataBytes (its
    // content is the caller's). Every add, update and delete writes a history row in its
    // transaction. Creates the user when missing. Error when the source turn is not one of the
    // user's turns.
    Result<Fact> add_fact(std::string_view user, const NewFact& fact);
    Result<Fact> update_fact(FactId id, std::string_view text);  // Error when unknown
    // Also replaces the metadata.
    Result<Fact> update_fact(FactId id, std::string_view text, std::string_view metadata);
    Status delete_fact(FactId id);  // Error when unknown; drops its embeddings
    // Deletes the facts a filter selects (offset and limit ignored) in one transaction; the
    // user and turns stay. Returns their ids (none for an unknown user).
    Result<std::vector<FactId>> delete_facts(const FactFilter& filter);
    Result<Fact> get_fact(FactId id);                            // Error when unknown
    // The facts of `ids` that exist, in the order of `ids` (unknown ids are skipped: a fact
    // deleted since a search found it), read with one statement under one lock.
    Result<std::vector<Fact>> get_facts(std::span<const FactId> ids);
    Result<std::vector<Fact>> list_facts(std::string_view user);  // by id; Error when unknown user
    // The page of facts a filter selects, by id. Error when the user is unknown.
    Result<std::vector<Fact>> list_facts(const FactFilter& filter);
    Result<bool> has_facts(std::string_view user);  // false for an unknown user

    // A fact's history, oldest first; empty when the id never existed or its user was deleted.
    Result<std::vector<FactHistoryEntry>> history(FactId id);

    // Applies a batch of changes to the user's facts in one transaction, in order, all or
    // nothing: an UPDATE or DELETE of an id that is unknown or another user's is an Error and
    // nothing is applied. Returns one AppliedChange per change, in order.
    Result<std::vector<AppliedChange>> apply_changes(std::string_view user,
                                                     std::span<const FactChange> changes);

    // --- embeddings: one float32 vector per (fact, model), replaced by a later set. Changing a
    // fact's text drops its embeddings in the same transaction (they are stale), as does
    // deleting it. Error when the fact is unknown, the model name empty or too long, or the
    // vector empty or over kMaxEmbeddingDims. A vector computed from text read before a later
    // change lands after that change's drop: embed the text a listener heard, so the listener
    // of the later change re-embeds and replaces it.
    Status set_embedding(FactId id, std::string_view model, std::span<const float> vector);
    // The user's embeddings under `model`, by fact id; empty for an unknown user.
    Result<std::vector<FactEmbedding>> list_embeddings(std::string_view user,
                                                       std::string_view model);

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
    void notify_locked(const std::vector<AppliedChange>& applied,
                       const std::vector<bool>& text_changed);

    // The *_locked helpers run with mutex_ held (the writers inside a caller's transaction).
    Status ensure_user_locked(std::string_view user);
    Result<bool> has_user_locked(std::string_view user);
    Status insert_turn_locked(std::string_view user, const Turn& turn);
    Result<Fact> insert_fact_locked(std::string_view user, const NewFact& fact);
    // The fact `id`; NotFound when unknown or, with a non-empty owner, another user's.
    Result<Fact> fact_of_locked(FactId id, std::string_view owner);
    // Sets the text (normalized by the caller) and, when given, the metadata; returns whether
    // the text changed.
    Result<bool> update_fact_locked(Fact& fact, std::string text,
                                    const std::optional<std::string>& metadata);
    Status delete_fact_locked(const Fact& fact);
    Status record_history_locked(FactId id, std::string_view user, FactEvent event,
                                 const std::string* old_text, const std::string* new_text,
                                 const std::string& at);
    // Facts matching `where` (SQL over the facts table, parameters set by `bind`), by id,
    // followed by `tail` (a LIMIT clause).
    Result<std::vector<Fact>> select_facts_locked(std::string_view where,
                                                  const std::function<void(Statement&)>& bind,
                                                  std::string_view tail = "");

    std::mutex mutex_;
    SqliteDb db_;
    MemoryStoreOptions options_;
    std::vector<FactListener*> listeners_;
};

}  // namespace inferscale::memory
