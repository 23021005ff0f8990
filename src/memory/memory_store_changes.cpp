// MemoryStore: batches of changes, the history every change writes, and fact embeddings.

#include <bit>
#include <cstring>

#include "memory/memory_store.h"
#include "memory/text_checks.h"

namespace inferscale::memory {
namespace {

// The BLOB is the vector's bytes as they lie in memory: little-endian float32 on every target.
static_assert(std::endian::native == std::endian::little, "embedding BLOBs are little-endian");

FactEvent parse_event(const std::string& name) {
    if (name == "ADD") return FactEvent::Add;
    if (name == "UPDATE") return FactEvent::Update;
    IS_CHECK(name == "DELETE") << "history event '" << name << "' outside the table's CHECK";
    return FactEvent::Delete;
}

}  // namespace

Status MemoryStore::record_history_locked(FactId id, std::string_view user, FactEvent event,
                                          const std::string* old_text, const std::string* new_text,
                                          const std::string& at) {
    Statement stmt =
        IS_TRY(db_.prepare("INSERT INTO fact_history (fact_id, user_id, event, old_text, new_text, "
                           "created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
    stmt.bind(1, id).bind(2, user).bind(3, event_name(event)).bind(6, at);
    if (old_text)
        stmt.bind(4, *old_text);
    else
        stmt.bind_null(4);
    if (new_text)
        stmt.bind(5, *new_text);
    else
        stmt.bind_null(5);
    return stmt.run();
}

Result<std::vector<FactHistoryEntry>> MemoryStore::history(FactId id) {
    std::lock_guard lock(mutex_);
    Statement stmt = IS_TRY(
        db_.prepare("SELECT id, fact_id, user_id, event, old_text, new_text, created_at FROM "
                    "fact_history WHERE fact_id = ?1 ORDER BY id"));
    stmt.bind(1, id);
    std::vector<FactHistoryEntry> rows;
    while (IS_TRY(stmt.step())) {
        FactHistoryEntry row;
        row.id = stmt.column_int64(0);
        row.fact_id = stmt.column_int64(1);
        row.user = stmt.column_text(2);
        row.event = parse_event(stmt.column_text(3));
        if (!stmt.column_is_null(4)) row.old_text = stmt.column_text(4);
        if (!stmt.column_is_null(5)) row.new_text = stmt.column_text(5);
        row.created_at = stmt.column_text(6);
        rows.push_back(std::move(row));
    }
    return rows;
}

Result<std::vector<AppliedChange>> MemoryStore::apply_changes(std::string_view user,
                                                              std::span<const FactChange> changes) {
    std::lock_guard lock(mutex_);
    Transaction tx = IS_TRY(Transaction::begin(db_));
    IS_RETURN_IF_ERROR(check_user_id(user, kMaxUserBytes));
    std::vector<AppliedChange> applied;
    std::vector<bool> text_changed;
    for (std::size_t i = 0; i < changes.size(); ++i) {
        const FactChange& change = changes[i];
        // Which change failed, so a batch of many can be fixed.
        const auto where = [i](const Error& e) {
            return Error{"change " + std::to_string(i) + ": " + e.message, e.kind};
        };
        switch (change.event) {
            case FactEvent::Add: {
                IS_RETURN_IF_ERROR(ensure_user_locked(user));
                auto added = insert_fact_locked(user, change.fact);
                if (!added.ok()) return where(added.error());
                applied.push_back({FactEvent::Add, std::move(added).value()});
                text_changed.push_back(true);
                break;
            }
            case FactEvent::Update: {
                auto fact = fact_of_locked(change.id, user);
                if (!fact.ok()) return where(fact.error());
                auto text = normalize_fact_text(change.fact.text, kMaxFactBytes);
                if (!text.ok()) return where(text.error());
                auto changed = update_fact_locked(*fact, std::move(text).value(), change.metadata);
                if (!changed.ok()) return where(changed.error());
                applied.push_back({FactEvent::Update, std::move(fact).value()});
                text_changed.push_back(*changed);
                break;
            }
            case FactEvent::Delete: {
                auto fact = fact_of_locked(change.id, user);
                if (!fact.ok()) return where(fact.error());
                if (Status st = delete_fact_locked(*fact); !st.ok()) return where(st.error());
                applied.push_back({FactEvent::Delete, std::move(fact).value()});
                text_changed.push_back(true);
                break;
            }
        }
    }
    IS_RETURN_IF_ERROR(tx.commit());
    notify_locked(applied, text_changed);
    return applied;
}

void MemoryStore::notify_locked(const std::vector<AppliedChange>& applied,
                                const std::vector<bool>& text_changed) {
    for (std::size_t i = 0; i < applied.size(); ++i) {
        const Fact& fact = applied[i].fact;
        for (FactListener* listener : listeners_) {
            switch (applied[i].event) {
                case FactEvent::Add:
                    listener->on_fact_added(fact);
                    break;
                case FactEvent::Update:
                    if (text_changed[i]) listener->on_fact_changed(fact);
                    break;
                case FactEvent::Delete:
                    listener->on_fact_deleted(fact.user, fact.id);
                    break;
            }
        }
    }
}

Status MemoryStore::set_embedding(FactId id, std::string_view model,
                                  std::span<const float> vector) {
    if (model.empty() || model.size() > kMaxUserBytes || !is_valid_utf8(model))
        return make_error(ErrorKind::InvalidArgument, "embedding model name must be 1 to " +
                                                          std::to_string(kMaxUserBytes) +
                                                          " bytes of UTF-8");
    if (vector.empty() || vector.size() > kMaxEmbeddingDims)
        return make_error(ErrorKind::InvalidArgument,
                          "embedding has " + std::to_string(vector.size()) + " values; give 1 to " +
                              std::to_string(kMaxEmbeddingDims));
    std::lock_guard lock(mutex_);
    Transaction tx = IS_TRY(Transaction::begin(db_));
    if (auto fact = fact_of_locked(id, ""); !fact.ok()) return std::move(fact).error();
    Statement stmt = IS_TRY(db_.prepare(
        "INSERT INTO fact_embeddings (fact_id, model, dims, vector) VALUES (?1, ?2, ?3, ?4) "
        "ON CONFLICT (fact_id, model) DO UPDATE SET dims = excluded.dims, "
        "vector = excluded.vector"));
    stmt.bind(1, id)
        .bind(2, model)
        .bind(3, static_cast<std::int64_t>(vector.size()))
        .bind_blob(4, std::as_bytes(vector));
    IS_RETURN_IF_ERROR(stmt.run());
    return tx.commit();
}

Result<std::vector<FactEmbedding>> MemoryStore::list_embeddings(std::string_view user,
                                                                std::string_view model) {
    std::lock_guard lock(mutex_);
    Statement stmt = IS_TRY(db_.prepare(
        "SELECT e.fact_id, e.dims, e.vector FROM fact_embeddings e JOIN facts f ON f.id = "
        "e.fact_id WHERE f.user_id = ?1 AND e.model = ?2 ORDER BY e.fact_id"));
    stmt.bind(1, user).bind(2, model);
    std::vector<FactEmbedding> out;
    while (IS_TRY(stmt.step())) {
        const std::span<const std::byte> bytes = stmt.column_blob(2);
        const auto dims = static_cast<std::size_t>(stmt.column_int64(1));
        if (bytes.size() != dims * sizeof(float))
            return make_error("memory database " + db_.path() + ": embedding of fact " +
                              std::to_string(stmt.column_int64(0)) + " has " +
                              std::to_string(bytes.size()) + " bytes for " + std::to_string(dims) +
                              " values");
        FactEmbedding embedding{stmt.column_int64(0), std::vector<float>(dims)};
        std::memcpy(embedding.vector.data(), bytes.data(), bytes.size());
        out.push_back(std::move(embedding));
    }
    return out;
}

}  // namespace inferscale::memory
