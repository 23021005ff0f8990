// POST /memories and POST /v1/memories: facts added verbatim in one transaction, or messages
// stored as conversation turns and handed to fact extraction (ServerContext::extraction).

#include <httplib.h>

#include <algorithm>

#include "apps/server/http_server.h"
#include "apps/server/json_fields.h"
#include "apps/server/memory_api.h"
#include "apps/server/memory_extraction.h"

namespace inferscale::server {
namespace {

using nlohmann::json;

// Reads the scope fields of a body; false with a 400 sent when one is not a string.
bool body_scope(const json& body, MemoryScope& scope, httplib::Response& res) {
    Fields fields(body);
    fields.read("user_id", scope.user_id, "a string", &json::is_string);
    fields.read("agent_id", scope.agent_id, "a string", &json::is_string);
    fields.read("run_id", scope.run_id, "a string", &json::is_string);
    if (fields.error) send_error(res, *fields.error);
    return !fields.error;
}

// Adds facts in one transaction (all or nothing) and answers Mem0's add shape: each fact with
// its event.
void add_facts(ServerContext& ctx, const MemoryScope& scope, const std::string& metadata,
               const std::vector<std::string>& texts, httplib::Response& res) {
    std::vector<memory::FactChange> changes;
    for (const std::string& text : texts) {
        memory::NewFact fact{text, {}, ""};
        fact.agent_id = scope.agent_id;
        fact.run_id = scope.run_id;
        fact.metadata = metadata;
        changes.push_back(memory::FactChange::add(std::move(fact)));
    }
    auto applied = apply_searchable(*ctx.store, ctx.embedder, scope.user_id, changes);
    if (!applied.ok()) return send_error(res, from_error(applied.error()));
    json results = json::array();
    for (const memory::AppliedChange& change : *applied) {
        json item = fact_json(change.fact);
        item["event"] = std::string(memory::event_name(change.event));
        results.push_back(std::move(item));
    }
    send_json(res, json{{"results", results}}.dump());
}

// A 400 for the messages list unless it is a non-empty list of {role?, content, name?}.
std::optional<ApiError> check_messages(const json& messages) {
    if (!messages.is_array() || messages.empty())
        return bad_request("'messages' must be a non-empty list", "messages");
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const json& m = messages[i];
        const std::string at = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) return bad_request("'" + at + "' must be an object", "messages");
        if (auto error = unsupported_field(m, {"role", "content", "name"}, at + ".")) return error;
        if (!m.contains("content") || !m["content"].is_string())
            return bad_request("every message needs a string 'content'", "messages");
        for (const char* name : {"role", "name"})
            if (m.contains(name) && !m[name].is_string())
                return bad_request("'" + at + "." + name + "' must be a string", "messages");
    }
    return std::nullopt;
}

}  // namespace

Result<std::vector<memory::Turn>> store_turns(ServerContext& ctx, const std::string& user,
                                              const std::string& session, const json& messages) {
    auto existing = ctx.store->list_turns(user);
    const std::vector<memory::Turn> known =
        existing.ok() ? std::move(existing).value() : std::vector<memory::Turn>{};
    int session_index = 0, next_turn = 0, max_index = 0;
    for (const memory::Turn& t : known) {
        max_index = std::max(max_index, t.session_index);
        if (t.session_id == session) {
            session_index = t.session_index;
            next_turn = std::max(next_turn, t.turn_index + 1);
        }
    }
    if (session_index == 0) session_index = max_index + 1;
    std::vector<memory::Turn> turns;
    for (const json& m : messages) {
        memory::Turn t;
        t.session_id = session;
        t.session_index = session_index;
        t.turn_index = next_turn++;
        t.speaker = m.value("name", std::string());
        if (t.speaker.empty()) t.speaker = m.value("role", std::string("user"));
        t.text = m["content"].get<std::string>();
        turns.push_back(std::move(t));
    }
    IS_RETURN_IF_ERROR(ctx.store->add_turns(user, turns));
    return turns;
}

void add_memories(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                  httplib::Response& res) {
    auto body = object_body(req, res);
    if (!body) return;
    if (auto error =
            unsupported_field(*body, {"user_id", "agent_id", "run_id", "metadata", "facts", "text",
                                      "messages", "session_id", "infer", "async_mode"}))
        return send_error(res, *error);
    MemoryScope scope;
    if (!body_scope(*body, scope, res) || !scoped_user(key, scope.user_id, res)) return;
    Fields fields(*body);
    bool infer = true, async = false;
    std::string session;
    fields.read("infer", infer, "a boolean", &json::is_boolean);
    fields.read("async_mode", async, "a boolean", &json::is_boolean);
    fields.read("session_id", session, "a string", &json::is_string);
    if (fields.error) return send_error(res, *fields.error);
    json metadata = json::object();
    if (const json* m = fields.get("metadata")) {
        if (!m->is_object())
            return send_error(res, bad_request("'metadata' must be an object", "metadata"));
        metadata = *m;
    }

    if (const json* messages = fields.get("messages")) {
        if (auto error = check_messages(*messages)) return send_error(res, *error);
        if (!infer) {
            // Each message is a memory as written; system messages instruct, they are not
            // memories (as Mem0 skips them).
            std::vector<std::string> texts;
            for (const json& m : *messages)
                if (m.value("role", std::string()) != "system")
                    texts.push_back(m["content"].get<std::string>());
            return add_facts(ctx, scope, metadata.dump(), texts, res);
        }
        if (body->contains("session_id") && session.empty())
            return send_error(res,
                              bad_request("'session_id' must be a non-empty string", "session_id"));
        if (session.empty()) session = scope.run_id.empty() ? "api" : scope.run_id;
        auto turns = store_turns(ctx, scope.user_id, session, *messages);
        if (!turns.ok()) return send_error(res, from_error(turns.error()));
        auto answer = ctx.extraction->extract(
            ExtractRequest{scope, std::move(turns).value(), metadata, async});
        if (auto* error = std::get_if<ApiError>(&answer)) return send_error(res, *error);
        return send_json(res, std::get<json>(answer).dump());
    }

    std::vector<std::string> texts;
    if (const json* facts = fields.get("facts")) {
        if (!facts->is_array() || facts->empty())
            return send_error(res,
                              bad_request("'facts' must be a non-empty list of strings", "facts"));
        for (const json& f : *facts) {
            if (!f.is_string())
                return send_error(res, bad_request("'facts' must be a list of strings", "facts"));
            texts.push_back(f.get<std::string>());
        }
    } else if (const json* text = fields.get("text"); text && text->is_string()) {
        texts.push_back(text->get<std::string>());
    } else {
        return send_error(res,
                          bad_request("give 'facts' (a list of strings), 'text' or 'messages'"));
    }
    add_facts(ctx, scope, metadata.dump(), texts, res);
}

}  // namespace inferscale::server
