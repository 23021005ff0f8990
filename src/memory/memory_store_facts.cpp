// MemoryStore: facts, one change per call. Each change writes its history row in its
// transaction (record_history_locked, memory_store_changes.cpp).

#include <unordered_map>

#include "memory/memory_store.h"
#include "memory/text_checks.h"

namespace inferscale::memory {
namespace {

constexpr const char* kFactColumns =
    "id, user_id, text, source_session_id, source_turn_index, created_at, updated_at, agent_id, "
    "run_id, metadata";

Fact read_fact(const Statement& stmt) {
    Fact fact;
    fact.id = stmt.column_int64(0);
    fact.user = stmt.column_text(1);
    fact.text = stmt.column_text(2);
    if (!stmt.column_is_null(3))
        fact.source = TurnRef{stmt.column_text(3), static_cast<int>(stmt.column_int64(4))};
    fact.created_at = stmt.column_text(5);
    fact.updated_at = stmt.column_text(6);
    fact.agent_id = stmt.column_text(7);
    fact.run_id = stmt.column_text(8);
    fact.metadata = stmt.column_text(9);
    return fact;
}

Error unknown_fact(FactId id) {
    return make_error(ErrorKind::NotFound, "unknown fact id " + std::to_string(id));
}

Status check_scope_id(std::string_view id, const char* what) {
    if (id.empty()) return {};
    if (auto st = check_user_id(id, MemoryStore::kMaxUserBytes); !st.ok())
        return make_error(ErrorKind::InvalidArgument,
                          std::string(what) + ": " + st.error().message);
    return {};
}

Result<std::string> checked_metadata(std::string_view metadata) {
    if (metadata.size() > MemoryStore::kMaxMetadataBytes)
        return make_error(ErrorKind::InvalidArgument,
                          "fact metadata is " + std::to_string(metadata.size()) +
                              " bytes, over the limit of " +
                              std::to_string(MemoryStore::kMaxMetadataBytes));
    return metadata.empty() ? std::string("{}") : std::string(metadata);
}

}  // namespace

Result<std::vector<Fact>> MemoryStore::select_facts_locked(
    std::string_view where, const std::function<void(Statement&)>& bind, std::string_view tail) {
    const std::string sql = std::string("SELECT ") + kFactColumns + " FROM facts WHERE " +
                            std::string(where) + " ORDER BY id " + std::string(tail);
    Statement stmt = IS_TRY(db_.prepare(sql));
    if (bind) bind(stmt);
    std::vector<Fact> facts;
    while (IS_TRY(stmt.step())) facts.push_back(read_fact(stmt));
    return facts;
}

Result<Fact> MemoryStore::insert_fact_locked(std::string_view user, const NewFact& fact) {
    std::string text = IS_TRY(normalize_fact_text(fact.text, kMaxFactBytes));
    if (fact.created_at.size() > 64 || !is_valid_utf8(fact.created_at))
        return make_error(ErrorKind::InvalidArgument, "fact created_at is not a timestamp");
    IS_RETURN_IF_ERROR(check_scope_id(fact.agent_id, "agent_id"));
    IS_RETURN_IF_ERROR(check_scope_id(fact.run_id, "run_id"));
    std::string metadata = IS_TRY(checked_metadata(fact.metadata));
    if (fact.source) {
        Statement turn = IS_TRY(db_.prepare(
            "SELECT 1 FROM turns WHERE user_id = ?1 AND session_id = ?2 AND turn_index = ?3"));
        turn.bind(1, user)
            .bind(2, fact.source->session_id)
            .bind(3, std::int64_t{fact.source->turn_index});
        if (!IS_TRY(turn.step()))
            return make_error(ErrorKind::InvalidArgument,
                              "source turn " + fact.source->session_id + ":" +
                                  std::to_string(fact.source->turn_index) +
                                  " is not a turn of user '" + std::string(user) + "'");
    }
    const std::string created = fact.created_at.empty() ? now() : fact.created_at;
    Statement stmt = IS_TRY(db_.prepare(
        "INSERT INTO facts (user_id, text, source_session_id, source_turn_index, created_at, "
        "updated_at, agent_id, run_id, metadata) VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8)"));
    stmt.bind(1, user).bind(2, text).bind(5, created);
    if (fact.source) {
        stmt.bind(3, fact.source->session_id).bind(4, std::int64_t{fact.source->turn_index});
    } else {
        stmt.bind_null(3).bind_null(4);
    }
    stmt.bind(6, fact.agent_id).bind(7, fact.run_id).bind(8, metadata);
    IS_RETURN_IF_ERROR(stmt.run());
    Fact added{db_.last_insert_rowid(),
               std::string(user),
               std::move(text),
               fact.source,
               created,
               created,
               fact.agent_id,
               fact.run_id,
               std::move(metadata)};
    IS_RETURN_IF_ERROR(
        record_history_locked(added.id, user, FactEvent::Add, nullptr, &added.text, created));
    return added;
}

Result<Fact> MemoryStore::fact_of_locked(FactId id, std::string_view owner) {
    std::vector<Fact> found =
        IS_TRY(select_facts_locked("id = ?1", [id](Statement& s) { s.bind(1, id); }));
    if (found.empty() || (!owner.empty() && found.front().user != owner)) return unknown_fact(id);
    return std::move(found.front());
}

Result<bool> MemoryStore::update_fact_locked(Fact& fact, std::string text,
                                             const std::optional<std::string>& metadata) {
    if (metadata) fact.metadata = IS_TRY(checked_metadata(*metadata));
    const std::string old_text = std::move(fact.text);
    fact.text = std::move(text);
    fact.updated_at = now();
    Statement stmt = IS_TRY(
        db_.prepare("UPDATE facts SET text = ?2, updated_at = ?3, metadata = ?4 WHERE id = ?1"));
    stmt.bind(1, fact.id).bind(2, fact.text).bind(3, fact.updated_at).bind(4, fact.metadata);
    IS_RETURN_IF_ERROR(stmt.run());
    const bool changed = old_text != fact.text;
    if (changed) {
        Statement drop = IS_TRY(db_.prepare("DELETE FROM fact_embeddings WHERE fact_id = ?1"));
        drop.bind(1, fact.id);
        IS_RETURN_IF_ERROR(drop.run());
    }
    IS_RETURN_IF_ERROR(record_history_locked(fact.id, fact.user, FactEvent::Update, &old_text,
                                             &fact.text, fact.updated_at));
    return changed;
}

Status MemoryStore::delete_fact_locked(const Fact& fact) {
    // The embeddings go with the row (ON DELETE CASCADE).
    Statement stmt = IS_TRY(db_.prepare("DELETE FROM facts WHERE id = ?1"));
    stmt.bind(1, fact.id);
    IS_RETURN_IF_ERROR(stmt.run());
    return record_history_locked(fact.id, fact.user, FactEvent::Delete, &fact.text, nullptr, now());
}

Result<Fact> MemoryStore::add_fact(std::string_view user, const NewFact& fact) {
    std::lock_guard lock(mutex_);
    Transaction tx = IS_TRY(Transaction::begin(db_));
    IS_RETURN_IF_ERROR(ensure_user_locked(user));
    Fact added = IS_TRY(insert_fact_locked(user, fact));
    IS_RETURN_IF_ERROR(tx.commit());
    for (FactListener* listener : listeners_) listener->on_fact_added(added);
    return added;
}

Result<Fact> MemoryStore::update_fact(FactId id, std::string_view text) {
    std::lock_guard lock(mutex_);
    Transaction tx = IS_TRY(Transaction::begin(db_));
    Fact fact = IS_TRY(fact_of_locked(id, ""));
    const bool changed =
        IS_TRY(update_fact_locked(fact, IS_TRY(normalize_fact_text(text, kMaxFactBytes)), {}));
    IS_RETURN_IF_ERROR(tx.commit());
    // Same text: KV chunks and index entries built from it are still right.
    if (changed)
        for (FactListener* listener : listeners_) listener->on_fact_changed(fact);
    return fact;
}

Result<Fact> MemoryStore::update_fact(FactId id, std::string_view text, std::string_view metadata) {
    std::lock_guard lock(mutex_);
    Transaction tx = IS_TRY(Transaction::begin(db_));
    Fact fact = IS_TRY(fact_of_locked(id, ""));
    const bool changed = IS_TRY(update_fact_locked(
        fact, IS_TRY(normalize_fact_text(text, kMaxFactBytes)), std::string(metadata)));
    IS_RETURN_IF_ERROR(tx.commit());
    if (changed)
        for (FactListener* listener : listeners_) listener->on_fact_changed(fact);
    return fact;
}

Status MemoryStore::delete_fact(FactId id) {
    std::lock_guard lock(mutex_);
    Transaction tx = IS_TRY(Transaction::begin(db_));
    const Fact fact = IS_TRY(fact_of_locked(id, ""));
    IS_RETURN_IF_ERROR(delete_fact_locked(fact));
    IS_RETURN_IF_ERROR(tx.commit());
    for (FactListener* listener : listeners_) listener->on_fact_deleted(fact.user, id);
    return {};
}

Result<std::vector<FactId>> MemoryStore::delete_facts(const FactFilter& filter) {
    FactFilter all = filter;
    all.offset = 0;
    all.limit.reset();
    std::lock_guard lock(mutex_);
    Transaction tx = IS_TRY(Transaction::begin(db_));
    std::vector<Fact> facts = IS_TRY(select_facts_locked(
        "user_id = ?1 AND (?2 = '' OR agent_id = ?2) AND (?3 = '' OR run_id = ?3)",
        [&all](Statement& s) { s.bind(1, all.user).bind(2, all.agent_id).bind(3, all.run_id); }));
    std::vector<FactId> ids;
    for (const Fact& fact : facts) {
        IS_RETURN_IF_ERROR(delete_fact_locked(fact));
        ids.push_back(fact.id);
    }
    IS_RETURN_IF_ERROR(tx.commit());
    for (const FactId id : ids)
        for (FactListener* listener : listeners_) listener->on_fact_deleted(all.user, id);
    return ids;
}

Result<Fact> MemoryStore::get_fact(FactId id) {
    std::lock_guard lock(mutex_);
    return fact_of_locked(id, "");
}

Result<std::vector<Fact>> MemoryStore::get_facts(std::span<const FactId> ids) {
    if (ids.empty()) return std::vector<Fact>{};
    std::string list = "[";
    for (const FactId id : ids) list += std::to_string(id) + ',';
    list.back() = ']';
    std::vector<Fact> found;
    {
        std::lock_guard lock(mutex_);
        found = IS_TRY(select_facts_locked("id IN (SELECT value FROM json_each(?1))",
                                           [&list](Statement& s) { s.bind(1, list); }));
    }
    std::unordered_map<FactId, std::size_t> at;
    for (std::size_t i = 0; i < found.size(); ++i) at.emplace(found[i].id, i);
    std::vector<Fact> out;
    out.reserve(found.size());
    for (const FactId id : ids)
        if (auto it = at.find(id); it != at.end()) out.push_back(found[it->second]);
    return out;
}

Result<std::vector<Fact>> MemoryStore::list_facts(std::string_view user) {
    return list_facts(FactFilter{std::string(user)});
}

Result<std::vector<Fact>> MemoryStore::list_facts(const FactFilter& filter) {
    std::lock_guard lock(mutex_);
    if (!IS_TRY(has_user_locked(filter.user)))
        return make_error(ErrorKind::NotFound, "unknown user '" + filter.user + "'");
    // LIMIT -1: no limit (SQLite's reading of a negative limit).
    return select_facts_locked(
        "user_id = ?1 AND (?2 = '' OR agent_id = ?2) AND (?3 = '' OR run_id = ?3)",
        [&filter](Statement& s) {
            s.bind(1, filter.user).bind(2, filter.agent_id).bind(3, filter.run_id);
            s.bind(4, filter.limit ? static_cast<std::int64_t>(*filter.limit) : std::int64_t{-1});
            s.bind(5, static_cast<std::int64_t>(filter.offset));
        },
        "LIMIT ?4 OFFSET ?5");
}

Result<bool> MemoryStore::has_facts(std::string_view user) {
    std::lock_guard lock(mutex_);
    Statement stmt = IS_TRY(db_.prepare("SELECT 1 FROM facts WHERE user_id = ?1 LIMIT 1"));
    stmt.bind(1, user);
    return stmt.step();
}

}  // namespace inferscale::memory
