#include "extract/fact_extractor.h"

#include <algorithm>
#include <cctype>

#include "memory/text_checks.h"

namespace inferscale::extract {
namespace {

using nlohmann::json;

// What makes two fact texts the same fact: case, spacing and a final period
// aside.
std::string comparable(std::string_view text) {
    std::string out = memory::normalize_whitespace(text);
    while (!out.empty() && (out.back() == '.' || out.back() == ' ')) out.pop_back();
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

Result<std::vector<std::string>> string_list(const json& answer, const char* key) {
    const auto it = answer.find(key);
    if (it == answer.end() || !it->is_array())
        return make_error("the extraction model's answer has no '" + std::string(key) + "' list");
    std::vector<std::string> out;
    for (const json& item : *it) {
        if (!item.is_string()) return make_error("the extraction model listed a non-string");
        std::string text = memory::normalize_whitespace(item.get<std::string>());
        if (text.empty()) continue;
        const bool repeated = std::any_of(out.begin(), out.end(), [&](const std::string& o) {
            return comparable(o) == comparable(text);
        });
        if (!repeated) out.push_back(std::move(text));
    }
    return out;
}

// One fact as this batch sees it: stored (with its stored text) or added by the
// batch.
struct Entry {
    std::optional<FactId> id;
    std::string stored_text;
    std::string text;
    bool deleted = false;
};

}  // namespace

Result<FactExtractor::Candidates> FactExtractor::candidates(
    const std::vector<ConversationMessage>& messages, const std::string& date) {
    const json answer =
        IS_TRY(llm_.complete(candidate_prompt(messages, date), candidate_schema(options_.max_facts),
                             options_.candidate_max_tokens));
    Candidates out;
    out.facts = IS_TRY(string_list(answer, "facts"));
    out.forget = IS_TRY(string_list(answer, "forget"));
    return out;
}

Result<std::vector<FactChange>> FactExtractor::decide(const Candidates& candidates,
                                                      const SimilarFacts& similar) {
    std::vector<Entry> entries;
    const auto entry_of = [&](const StoredFact& f) -> std::size_t {
        for (std::size_t i = 0; i < entries.size(); ++i)
            if (entries[i].id == f.id) return i;
        entries.push_back({f.id, f.text, f.text, false});
        return entries.size() - 1;
    };

    const auto consider = [&](const std::string& candidate, bool forget) -> Status {
        // Shown: the stored facts most like the candidate, as this batch left them.
        // Facts the batch added are not: one answer lists distinct facts.
        const std::vector<StoredFact> near = IS_TRY(similar(candidate, options_.similar_k));
        std::vector<std::size_t> shown;
        for (const StoredFact& f : near) {
            const std::size_t e = entry_of(f);
            if (!entries[e].deleted) shown.push_back(e);
        }
        const std::string key = comparable(candidate);
        const bool repeats = std::any_of(shown.begin(), shown.end(), [&](std::size_t e) {
            return comparable(entries[e].text) == key;
        });
        if (forget && !repeats && shown.empty()) return {};
        if (!forget && repeats) return {};
        if (!forget && shown.empty()) {
            entries.push_back({std::nullopt, "", candidate, false});
            return {};
        }

        std::vector<ShownFact> facts;
        for (const std::size_t e : shown) facts.push_back({entries[e].text});
        const json answer = IS_TRY(llm_.complete(decision_prompt(candidate, facts, forget),
                                                 decision_schema(facts.size(), forget),
                                                 options_.decision_max_tokens));
        const std::string event = answer.value("event", "NONE");
        const json about = answer.contains("about") ? answer["about"] : json();
        std::optional<std::size_t> target;
        if (about.is_number_integer() && about.get<std::int64_t>() >= 0 &&
            about.get<std::int64_t>() < static_cast<std::int64_t>(shown.size()))
            target = shown[static_cast<std::size_t>(about.get<std::int64_t>())];
        std::string text = answer.contains("text") && answer["text"].is_string()
                               ? memory::normalize_whitespace(answer["text"].get<std::string>())
                               : std::string();
        if (text.empty()) text = candidate;
        if (forget) {
            if (target && event == "DELETE") entries[*target].deleted = true;
        } else if (!target || event == "ADD") {
            // About no stored fact: whatever the event says, the fact is new.
            entries.push_back({std::nullopt, "", text, false});
        } else if (event == "UPDATE") {
            entries[*target].text = text;
        } else if (event == "DELETE") {
            entries[*target].deleted = true;
        }
        return {};
    };

    for (const std::string& fact : candidates.facts) IS_RETURN_IF_ERROR(consider(fact, false));
    for (const std::string& fact : candidates.forget) IS_RETURN_IF_ERROR(consider(fact, true));

    std::vector<FactChange> changes;
    for (const Entry& e : entries) {
        if (!e.id) {
            if (!e.deleted) changes.push_back({Event::Add, std::nullopt, e.text, ""});
        } else if (e.deleted) {
            changes.push_back({Event::Delete, e.id, "", e.stored_text});
        } else if (e.text != e.stored_text) {
            changes.push_back({Event::Update, e.id, e.text, e.stored_text});
        }
    }
    return changes;
}

Result<std::vector<FactChange>> FactExtractor::extract(
    const std::vector<ConversationMessage>& messages, const std::string& date,
    const SimilarFacts& similar) {
    return decide(IS_TRY(candidates(messages, date)), similar);
}

}  // namespace inferscale::extract
