#pragma once
// Imports a LoCoMo conversation file (one sample of locomo10, see README.md in the folder
// INFERSCALE_LOCOMO names, default ../shared/data/locomo10) as one user's turns and facts.
//
//  - Sessions ("session_N") are re-ordered chronologically by "session_N_date_time";
//    session_index is that rank, from 1 (ties keep N order).
//  - turn_index is the 0-based position in the session list; turns with neither text nor an
//    image caption are skipped, their indices kept. image_caption is "blip_caption",
//    image_query is "query", timestamp the session date string.
//  - Facts are the "session_N_observation" entries, [text, dia_id], in session order then
//    speaker order. A dia_id may also be a list or a comma-separated string: the first one is
//    the source turn. A dia_id naming no stored turn leaves the fact without a source.
//    created_at is the source session's date as ISO-8601 UTC.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "memory/memory_store.h"
#include "memory/memory_types.h"

namespace inferscale::memory {

struct LocomoConversation {
    std::vector<Turn> turns;  // chronological
    std::vector<NewFact> facts;
    std::size_t sessions = 0;
    std::size_t skipped_turns = 0;         // empty turns left out
    std::size_t facts_without_source = 0;  // dia_id missing or naming no stored turn
};

// Parses the JSON text of one conversation. Error on malformed JSON, a missing or bad field,
// or an unparseable session date.
Result<LocomoConversation> parse_locomo(std::string_view json_text);
Result<LocomoConversation> read_locomo_file(const std::string& path);

// The user id import_locomo uses when none is given: the file name without its extension
// (".../26.json" -> "26"), which is the LoCoMo sample id.
std::string locomo_user_from_path(const std::string& path);

struct LocomoImportReport {
    std::string user;
    std::size_t sessions = 0;
    std::size_t turns = 0;
    std::size_t skipped_turns = 0;
    std::size_t facts = 0;
    std::size_t facts_without_source = 0;
};

// Reads `path` and adds it to the store in one transaction (see add_conversation). An empty
// user means locomo_user_from_path(path).
Result<LocomoImportReport> import_locomo(MemoryStore& store, const std::string& path,
                                         std::string user = {}, const ProgressFn& progress = {});

}  // namespace inferscale::memory
