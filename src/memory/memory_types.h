#pragma once
// The memory data model: conversation turns, facts, and the listener that hears about fact
// changes. Mirrors the reference's LoCoMo model (docs/reference-system.md §2.1).

#include <cstdint>
#include <optional>
#include <string>
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
    bool operator==(const Fact&) const = default;
};

// A fact to add. An empty created_at means now.
struct NewFact {
    std::string text;
    std::optional<TurnRef> source;
    std::string created_at;
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
