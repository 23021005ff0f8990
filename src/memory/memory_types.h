#pragma once
// The memory data model: conversation turns, facts, and the listener that hears about fact
// changes. Mirrors the reference's LoCoMo model (docs/reference-system.md §2.1).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferscale::memory {

// Store-assigned, never reused after a delete (SQLite AUTOINCREMENT), so a cache keyed by fact
// id can never confuse a deleted fact with a new one.
using FactId = std::int64_t;

// Names one turn of a user's conversation.
struct TurnRef {
    std::string session_id;  // e.g. "session_3"
    int turn_index = 0;      // 0-based position in the original session list
    bool operator==(const TurnRef&) const = default;
};

struct Turn {
    std::string session_id;     // the LoCoMo key, e.g. "session_3"
    int session_index = 0;      // chronological rank of the session, from 1
    int turn_index = 0;         // 0-based position in the original session list
    std::string speaker;
    std::string text;
    std::string timestamp;      // the session's date string, as the dataset gives it
    std::string image_caption;  // empty when the turn shares no image
    std::string image_query;    // empty when none
    bool operator==(const Turn&) const = default;

    TurnRef ref() const { return {session_id, turn_index}; }
};

struct Fact {
    FactId id = 0;
    std::string user;
    std::string text;               // whitespace-normalized: trimmed, runs collapsed to one space
    std::optional<TurnRef> source;  // the turn the fact was extracted from, when known
    std::string created_at;         // ISO-8601 UTC, e.g. "2023-05-08T13:56:00.000Z"
    std::string updated_at;
    // Optional sub-scopes under the user (Mem0's agent_id and run_id); empty when none. The
    // user stays the tenant: every access check is by user.
    std::string agent_id = {};
    std::string run_id = {};
    std::string metadata = "{}";  // a JSON object as text, kept as given
    bool operator==(const Fact&) const = default;
};

// A fact to add. An empty created_at means now; an empty metadata means "{}".
struct NewFact {
    std::string text;
    std::optional<TurnRef> source;
    std::string created_at;
    // Default member initializers: the many brace-initialized NewFacts that name only the
    // first fields stay warning-free.
    std::string agent_id = {};
    std::string run_id = {};
    std::string metadata = {};
};

// Which facts a listing covers: one user's, narrowed to an agent and a run when those are
// non-empty; a page of them by id (offset facts skipped, at most limit returned).
struct FactFilter {
    std::string user;
    std::string agent_id = {};  // empty: any
    std::string run_id = {};    // empty: any
    std::size_t offset = 0;
    std::optional<std::size_t> limit = {};  // nullopt: all
};

enum class FactEvent { Add, Update, Delete };

// "ADD", "UPDATE", "DELETE": the names Mem0's API and the history table use.
constexpr std::string_view event_name(FactEvent event) {
    switch (event) {
        case FactEvent::Add:
            return "ADD";
        case FactEvent::Update:
            return "UPDATE";
        case FactEvent::Delete:
            return "DELETE";
    }
    return "";
}

// One row of a fact's history: written by every add, update and delete in the same transaction
// as the change, and kept after the fact is deleted (until its user is deleted).
struct FactHistoryEntry {
    std::int64_t id = 0;  // increasing in commit order
    FactId fact_id = 0;
    std::string user;
    FactEvent event = FactEvent::Add;
    std::optional<std::string> old_text;  // none for ADD
    std::optional<std::string> new_text;  // none for DELETE
    std::string created_at;
    bool operator==(const FactHistoryEntry&) const = default;
};

// One change of a batch that MemoryStore::apply_changes applies all or nothing.
struct FactChange {
    FactEvent event = FactEvent::Add;
    FactId id = 0;                        // UPDATE, DELETE: the fact changed
    NewFact fact;                         // ADD: the fact to add; UPDATE: fact.text is the new text
    std::optional<std::string> metadata;  // UPDATE: the new metadata; nullopt keeps it

    static FactChange add(NewFact fact) { return {FactEvent::Add, 0, std::move(fact), {}}; }
    static FactChange update(FactId id, std::string text) {
        return {FactEvent::Update, id, NewFact{std::move(text), {}, {}, {}, {}, {}}, {}};
    }
    static FactChange remove(FactId id) { return {FactEvent::Delete, id, {}, {}}; }
};

// What one change did: the fact as it now is (for DELETE, as it was).
struct AppliedChange {
    FactEvent event = FactEvent::Add;
    Fact fact;
};

// A fact's embedding under one model.
struct FactEmbedding {
    FactId id = 0;
    std::vector<float> vector;
};

// Hears about committed fact changes, e.g. to keep a retrieval index or a KV chunk pool in step.
// Calls come after the change is durable, in commit order, on the writing thread, with the
// store's lock held: a listener must be quick and must not call back into the store. Only
// changes made through this process's MemoryStore are heard.
class FactListener {
  public:
    virtual ~FactListener() = default;
    virtual void on_fact_added(const Fact& fact) {}
    virtual void on_fact_changed(const Fact& fact) {}  // text changed; id and user did not
    virtual void on_fact_deleted(const std::string& user, FactId fact_id) {}
    // The user and everything of theirs is gone; `fact_ids` were theirs.
    virtual void on_user_deleted(const std::string& user, const std::vector<FactId>& fact_ids) {}
};

}  // namespace inferscale::memory
