// MemoryStore: conversation turns and whole-conversation imports.

#include "memory/memory_store.h"
#include "memory/text_checks.h"

namespace inferscale::memory {
namespace {

Status check_turn(const Turn& turn) {
    const std::string where = turn.session_id + ":" + std::to_string(turn.turn_index);
    if (turn.session_id.empty())
        return make_error(ErrorKind::InvalidArgument, "turn has an empty session id");
    if (turn.session_index < 1)
        return make_error(ErrorKind::InvalidArgument,
                          "turn " + where + ": session_index must be >= 1");
    if (turn.turn_index < 0)
        return make_error(ErrorKind::InvalidArgument, "turn " + where + ": negative turn_index");
    if (turn.speaker.empty())
        return make_error(ErrorKind::InvalidArgument, "turn " + where + ": empty speaker");
    if (turn.text.empty() && turn.image_caption.empty())
        return make_error(ErrorKind::InvalidArgument,
                          "turn " + where + ": no text and no image caption");
    for (const std::string* field : {&turn.session_id, &turn.speaker, &turn.text, &turn.timestamp,
                                     &turn.image_caption, &turn.image_query})
        if (!is_valid_utf8(*field))
            return make_error(ErrorKind::InvalidArgument, "turn " + where + ": not valid UTF-8");
    return {};
}

}  // namespace

Status MemoryStore::insert_turn_locked(std::string_view user, const Turn& turn) {
    IS_RETURN_IF_ERROR(check_turn(turn));
    Statement stmt = IS_TRY(db_.prepare(
        "INSERT INTO turns (user_id, session_id, session_index, turn_index, speaker, text, "
        "timestamp, image_caption, image_query) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"));
    stmt.bind(1, user)
        .bind(2, turn.session_id)
        .bind(3, std::int64_t{turn.session_index})
        .bind(4, std::int64_t{turn.turn_index})
        .bind(5, turn.speaker)
        .bind(6, turn.text)
        .bind(7, turn.timestamp)
        .bind(8, turn.image_caption)
        .bind(9, turn.image_query);
    auto done = stmt.run();
    if (!done.ok())
        return make_error(ErrorKind::InvalidArgument, "cannot add turn " + turn.session_id + ":" +
                          std::to_string(turn.turn_index) + " of user '" + std::string(user) +
                          "': " + done.error().message);
    return {};
}

Status MemoryStore::add_turns(std::string_view user, const std::vector<Turn>& turns) {
    std::lock_guard lock(mutex_);
    Transaction tx = IS_TRY(Transaction::begin(db_));
    IS_RETURN_IF_ERROR(ensure_user_locked(user));
    for (const Turn& turn : turns) IS_RETURN_IF_ERROR(insert_turn_locked(user, turn));
    return tx.commit();
}

Result<std::vector<Turn>> MemoryStore::list_turns(std::string_view user) {
    std::lock_guard lock(mutex_);
    if (!IS_TRY(has_user_locked(user)))
        return make_error(ErrorKind::NotFound, "unknown user '" + std::string(user) + "'");
    Statement stmt = IS_TRY(db_.prepare(
        "SELECT session_id, session_index, turn_index, speaker, text, timestamp, image_caption, "
        "image_query FROM turns WHERE user_id = ?1 ORDER BY session_index, turn_index, id"));
    stmt.bind(1, user);
    std::vector<Turn> turns;
    while (IS_TRY(stmt.step())) {
        Turn turn;
        turn.session_id = stmt.column_text(0);
        turn.session_index = static_cast<int>(stmt.column_int64(1));
        turn.turn_index = static_cast<int>(stmt.column_int64(2));
        turn.speaker = stmt.column_text(3);
        turn.text = stmt.column_text(4);
        turn.timestamp = stmt.column_text(5);
        turn.image_caption = stmt.column_text(6);
        turn.image_query = stmt.column_text(7);
        turns.push_back(std::move(turn));
    }
    return turns;
}

Result<std::vector<Fact>> MemoryStore::add_conversation(std::string_view user,
                                                        const std::vector<Turn>& turns,
                                                        const std::vector<NewFact>& facts,
                                                        const ProgressFn& progress) {
    std::lock_guard lock(mutex_);
    Transaction tx = IS_TRY(Transaction::begin(db_));
    IS_RETURN_IF_ERROR(ensure_user_locked(user));
    {
        Statement count = IS_TRY(db_.prepare("SELECT count(*) FROM turns WHERE user_id = ?1"));
        count.bind(1, user);
        if (!IS_TRY(count.step())) return make_error("sqlite: count returned no row");
        if (const std::int64_t n = count.column_int64(0); n > 0)
            return make_error(ErrorKind::InvalidArgument,
                              "user '" + std::string(user) + "' already has " + std::to_string(n) +
                                  " conversation turns; delete the user first");
    }
    const std::size_t total = turns.size() + facts.size();
    std::size_t done = 0;
    for (const Turn& turn : turns) {
        IS_RETURN_IF_ERROR(insert_turn_locked(user, turn));
        if (progress) progress(++done, total);
    }
    std::vector<Fact> added;
    added.reserve(facts.size());
    for (const NewFact& fact : facts) {
        added.push_back(IS_TRY(insert_fact_locked(user, fact)));
        if (progress) progress(++done, total);
    }
    IS_RETURN_IF_ERROR(tx.commit());
    for (FactListener* listener : listeners_)
        for (const Fact& fact : added) listener->on_fact_added(fact);
    return added;
}

}  // namespace inferscale::memory
