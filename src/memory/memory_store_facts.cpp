// MemoryStore: facts.

#include <unordered_map>

#include "memory/memory_store.h"
#include "memory/text_checks.h"

namespace inferscale::memory {
namespace {

constexpr const char* kFactColumns =
    "id, user_id, text, source_session_id, source_turn_index, created_at, updated_at";

Fact read_fact(const Statement& stmt) {
    Fact fact;
    fact.id = stmt.column_int64(0);
    fact.user = stmt.column_text(1);
    fact.text = stmt.column_text(2);
    if (!stmt.column_is_null(3))
        fact.source = TurnRef{stmt.column_text(3), static_cast<int>(stmt.column_int64(4))};
    fact.created_at = stmt.column_text(5);
    fact.updated_at = stmt.column_text(6);
    return fact;
}

Error unknown_fact(FactId id) {
    return make_error(ErrorKind::NotFound, "unknown fact id " + std::to_string(id));
}

}  // namespace

Result<std::vector<Fact>> MemoryStore::select_facts_locked(
    std::string_view where, const std::function<void(Statement&)>& bind) {
    const std::string sql = std::string("SELECT ") + kFactColumns + " FROM facts WHERE " +
                            std::string(where) + " ORDER BY id";
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
        "updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)"));
    stmt.bind(1, user).bind(2, text).bind(5, created);
    if (fact.source) {
        stmt.bind(3, fact.source->session_id).bind(4, std::int64_t{fact.source->turn_index});
    } else {
        stmt.bind_null(3).bind_null(4);
    }
    IS_RETURN_IF_ERROR(stmt.run());
    return Fact{db_.last_insert_rowid(), std::string(user), std::move(text), fact.source,
                created, created};
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
    std::string normalized = IS_TRY(normalize_fact_text(text, kMaxFactBytes));
    std::lock_guard lock(mutex_);
    Transaction tx = IS_TRY(Transaction::begin(db_));
    std::vector<Fact> found =
        IS_TRY(select_facts_locked("id = ?1", [id](Statement& s) { s.bind(1, id); }));
    if (found.empty()) return unknown_fact(id);
    Fact fact = std::move(found.front());
    const bool changed = fact.text != normalized;
    fact.text = std::move(normalized);
    fact.updated_at = now();
    Statement stmt =
        IS_TRY(db_.prepare("UPDATE facts SET text = ?2, updated_at = ?3 WHERE id = ?1"));
    stmt.bind(1, id).bind(2, fact.text).bind(3, fact.updated_at);
    IS_RETURN_IF_ERROR(stmt.run());
    IS_RETURN_IF_ERROR(tx.commit());
    // Same text: KV chunks and index entries built from it are still right.
    if (changed)
        for (FactListener* listener : listeners_) listener->on_fact_changed(fact);
    return fact;
}

Status MemoryStore::delete_fact(FactId id) {
    std::lock_guard lock(mutex_);
    Transaction tx = IS_TRY(Transaction::begin(db_));
    std::string user;
    {
        Statement stmt = IS_TRY(db_.prepare("DELETE FROM facts WHERE id = ?1 RETURNING user_id"));
        stmt.bind(1, id);
        if (!IS_TRY(stmt.step())) return unknown_fact(id);
        user = stmt.column_text(0);
        IS_RETURN_IF_ERROR(stmt.run());  // finish the statement before committing
    }
    IS_RETURN_IF_ERROR(tx.commit());
    for (FactListener* listener : listeners_) listener->on_fact_deleted(user, id);
    return {};
}

Result<Fact> MemoryStore::get_fact(FactId id) {
    std::lock_guard lock(mutex_);
    std::vector<Fact> found =
        IS_TRY(select_facts_locked("id = ?1", [id](Statement& s) { s.bind(1, id); }));
    if (found.empty()) return unknown_fact(id);
    return std::move(found.front());
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
    std::lock_guard lock(mutex_);
    if (!IS_TRY(has_user_locked(user)))
        return make_error(ErrorKind::NotFound, "unknown user '" + std::string(user) + "'");
    return select_facts_locked("user_id = ?1", [user](Statement& s) { s.bind(1, user); });
}

Result<bool> MemoryStore::has_facts(std::string_view user) {
    std::lock_guard lock(mutex_);
    Statement stmt = IS_TRY(db_.prepare("SELECT 1 FROM facts WHERE user_id = ?1 LIMIT 1"));
    stmt.bind(1, user);
    return stmt.step();
}

}  // namespace inferscale::memory
