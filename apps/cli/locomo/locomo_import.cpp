#include "apps/cli/locomo/locomo_import.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "apps/cli/locomo/locomo_date.h"

namespace inferscale::memory {
namespace {

using nlohmann::json;

struct Session {
    int number = 0;  // N of "session_N"
    LocomoDate date;
    std::string date_text;
    const json* turns = nullptr;
};

std::string string_field(const json& object, const std::string& key) {
    auto it = object.find(key);
    return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string session_id(int number) { return "session_" + std::to_string(number); }

// "session_12" -> 12; 0 when `key` is not exactly that shape.
int session_number(std::string_view key) {
    constexpr std::string_view kPrefix = "session_";
    if (!key.starts_with(kPrefix) || key.size() == kPrefix.size() ||
        key.size() > kPrefix.size() + 6)
        return 0;
    int n = 0;
    for (char c : key.substr(kPrefix.size())) {
        if (c < '0' || c > '9') return 0;
        n = n * 10 + (c - '0');
    }
    return n;
}

// The first dia_id of an observation's source: "D1:3", ["D1:3", "D1:5"] or "D1:3, D1:5".
std::string first_dia_id(const json& source) {
    const json* value = &source;
    if (source.is_array()) {
        if (source.empty()) return {};
        value = &source.front();
    }
    if (!value->is_string()) return {};
    const std::string text = value->get<std::string>();
    const std::size_t begin = text.find_first_not_of(" \t");
    if (begin == std::string::npos) return {};
    const std::size_t end = text.find_first_of(",; \t", begin);
    return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

Result<std::vector<Session>> read_sessions(const json& root) {
    std::vector<Session> sessions;
    for (const auto& [key, value] : root.items()) {
        const int n = session_number(key);
        if (n == 0) continue;
        if (!value.is_array()) return make_error(key + " is not a list of turns");
        Session session;
        session.number = n;
        session.turns = &value;
        session.date_text = string_field(root, key + "_date_time");
        auto date = parse_locomo_date(session.date_text);
        if (!date.ok()) return make_error(key + "_date_time: " + date.error().message);
        session.date = *date;
        sessions.push_back(std::move(session));
    }
    if (sessions.empty()) return make_error("no session_N lists: not a LoCoMo conversation");
    std::stable_sort(sessions.begin(), sessions.end(), [](const Session& a, const Session& b) {
        return a.date != b.date ? a.date < b.date : a.number < b.number;
    });
    return sessions;
}

// Appends the stored turns of every session; records each turn's dia_id.
Status read_turns(const std::vector<Session>& sessions, LocomoConversation& out,
                  std::map<std::string, TurnRef>& by_dia_id) {
    for (std::size_t rank = 0; rank < sessions.size(); ++rank) {
        const Session& session = sessions[rank];
        const std::string id = session_id(session.number);
        for (std::size_t i = 0; i < session.turns->size(); ++i) {
            const json& raw = (*session.turns)[i];
            if (!raw.is_object()) return make_error(id + " holds a turn that is not an object");
            Turn turn;
            turn.session_id = id;
            turn.session_index = static_cast<int>(rank) + 1;
            turn.turn_index = static_cast<int>(i);
            turn.speaker = string_field(raw, "speaker");
            turn.text = string_field(raw, "text");
            turn.timestamp = session.date_text;
            turn.image_caption = string_field(raw, "blip_caption");
            turn.image_query = string_field(raw, "query");
            if (turn.text.empty() && turn.image_caption.empty()) {
                ++out.skipped_turns;
                continue;
            }
            if (turn.speaker.empty())
                return make_error(id + " turn " + std::to_string(i) + " has no speaker");
            if (const std::string dia = string_field(raw, "dia_id"); !dia.empty())
                by_dia_id.emplace(dia, turn.ref());
            out.turns.push_back(std::move(turn));
        }
    }
    return {};
}

Status read_facts(const json& root, const std::vector<Session>& sessions,
                  const std::map<std::string, TurnRef>& by_dia_id, LocomoConversation& out) {
    std::map<std::string, std::string> created_at;  // session id -> ISO date
    for (const Session& session : sessions)
        created_at[session_id(session.number)] = session.date.iso_utc();
    for (const Session& session : sessions) {
        const std::string key = session_id(session.number) + "_observation";
        auto it = root.find(key);
        if (it == root.end()) continue;
        if (!it->is_object()) return make_error(key + " is not an object of speakers");
        for (const auto& [speaker, entries] : it->items()) {
            if (!entries.is_array()) return make_error(key + "." + speaker + " is not a list");
            for (const json& entry : entries) {
                if (!entry.is_array() || entry.empty() || !entry[0].is_string())
                    return make_error(key + "." + speaker +
                                      " holds an entry that is not [text, dia_id]");
                NewFact fact;
                fact.text = entry[0].get<std::string>();
                auto source =
                    entry.size() > 1 ? by_dia_id.find(first_dia_id(entry[1])) : by_dia_id.end();
                if (source != by_dia_id.end()) {
                    fact.source = source->second;
                    fact.created_at = created_at.at(source->second.session_id);
                } else {
                    ++out.facts_without_source;
                    fact.created_at = created_at.at(session_id(session.number));
                }
                out.facts.push_back(std::move(fact));
            }
        }
    }
    return {};
}

}  // namespace

Result<LocomoConversation> parse_locomo(std::string_view json_text) {
    const json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
    if (root.is_discarded()) return make_error("not valid JSON");
    if (!root.is_object()) return make_error("not a JSON object");
    const std::vector<Session> sessions = IS_TRY(read_sessions(root));
    LocomoConversation out;
    out.sessions = sessions.size();
    std::map<std::string, TurnRef> by_dia_id;
    IS_RETURN_IF_ERROR(read_turns(sessions, out, by_dia_id));
    IS_RETURN_IF_ERROR(read_facts(root, sessions, by_dia_id, out));
    return out;
}

Result<LocomoConversation> read_locomo_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error("cannot read " + path);
    std::ostringstream text;
    text << in.rdbuf();
    auto parsed = parse_locomo(text.str());
    if (!parsed.ok()) return make_error(path + ": " + parsed.error().message);
    return parsed;
}

std::string locomo_user_from_path(const std::string& path) {
    return std::filesystem::path(path).stem().string();
}

Result<LocomoImportReport> import_locomo(MemoryStore& store, const std::string& path,
                                         std::string user, const ProgressFn& progress) {
    if (user.empty()) user = locomo_user_from_path(path);
    const LocomoConversation conversation = IS_TRY(read_locomo_file(path));
    const std::vector<Fact> added =
        IS_TRY(store.add_conversation(user, conversation.turns, conversation.facts, progress));
    LocomoImportReport report;
    report.user = user;
    report.sessions = conversation.sessions;
    report.turns = conversation.turns.size();
    report.skipped_turns = conversation.skipped_turns;
    report.facts = added.size();
    report.facts_without_source = conversation.facts_without_source;
    return report;
}

}  // namespace inferscale::memory
