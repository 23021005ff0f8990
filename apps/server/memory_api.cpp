// The memory API, Mem0-like, scoped by API key:
//   POST   /v1/memories          {"user_id", "facts": [text...] | "text": text}   add facts
//                                {"user_id", "messages": [{role, content}...], "session_id"?}
//                                                                                 store turns
//   GET    /v1/memories?user_id=U                                                 list
//   GET    /v1/memories/{id}     PUT /v1/memories/{id} {"text"}   DELETE /v1/memories/{id}
//   DELETE /v1/memories?user_id=U                                                 forget U
//   POST   /v1/memories/search   {"user_id", "query", "top_k"?}
// A fact outside the caller's tenants is answered as not found, so ids reveal nothing. A user
// never seen lists and searches as an empty list (as Mem0 answers); forgetting one is a 404.

#include <httplib.h>

#include <algorithm>
#include <unordered_map>
#include <nlohmann/json.hpp>

#include "apps/server/http_server.h"
#include "apps/server/json_fields.h"

namespace inferscale::server {
namespace {

using nlohmann::json;

json fact_json(const memory::Fact& f) {
    return {{"id", std::to_string(f.id)},
            {"memory", f.text},
            {"user_id", f.user},
            {"created_at", f.created_at},
            {"updated_at", f.updated_at}};
}

// The JSON object body, or a 400 sent and nullopt returned.
std::optional<json> object_body(const httplib::Request& req, httplib::Response& res) {
    json body;
    if (auto error = parse_object(req.body, body)) {
        send_error(res, *error);
        return std::nullopt;
    }
    return body;
}

// The user a request names (body field or query parameter), checked against the key; empty
// with an error sent otherwise.
std::string scoped_user(const ApiKey& key, const std::string& user, httplib::Response& res) {
    if (user.empty()) {
        send_error(res, bad_request("'user_id' is required", "user_id"));
        return {};
    }
    if (!key.may_access(user)) {
        send_error(res, {403, "this API key may not act for user '" + user + "'",
                         "permission_error", "user_id", "forbidden_user"});
        return {};
    }
    return user;
}

std::string string_field(const json& body, const char* name) {
    auto it = body.find(name);
    return it != body.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The fact named in the path if the key may see it; a 404 sent otherwise.
std::optional<memory::Fact> visible_fact(ServerContext& ctx, const ApiKey& key,
                                         const httplib::Request& req, httplib::Response& res) {
    const std::string& raw = req.matches[1];
    const auto hidden = [&] {
        send_error(res, not_found("no memory with id '" + raw + "'"));
        return std::nullopt;
    };
    const bool numeric =
        !raw.empty() && raw.size() < 19 &&
        std::all_of(raw.begin(), raw.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!numeric) return hidden();
    auto fact = ctx.store->get_fact(std::stoll(raw));
    if (!fact.ok()) {
        if (fact.error().kind == ErrorKind::NotFound) return hidden();
        send_error(res, from_error(fact.error()));
        return std::nullopt;
    }
    if (!key.may_access(fact->user)) return hidden();
    return std::move(fact).value();
}

void add_memories(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                  httplib::Response& res) {
    auto body = object_body(req, res);
    if (!body) return;
    if (body->contains("user_id") && !(*body)["user_id"].is_string())
        return send_error(res, bad_request("'user_id' must be a string", "user_id"));
    const std::string user = scoped_user(key, string_field(*body, "user_id"), res);
    if (user.empty()) return;

    if (body->contains("messages")) {
        const json& messages = (*body)["messages"];
        if (!messages.is_array() || messages.empty())
            return send_error(res, bad_request("'messages' must be a non-empty list", "messages"));
        const std::string session =
            body->contains("session_id") ? string_field(*body, "session_id") : "api";
        if (session.empty())
            return send_error(res,
                              bad_request("'session_id' must be a non-empty string", "session_id"));
        auto existing = ctx.store->list_turns(user);
        std::vector<memory::Turn> known =
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
            if (!m.is_object() || !m.contains("content") || !m["content"].is_string())
                return send_error(
                    res, bad_request("every message needs a string 'content'", "messages"));
            memory::Turn t;
            t.session_id = session;
            t.session_index = session_index;
            t.turn_index = next_turn++;
            t.speaker = string_field(m, "name");
            if (t.speaker.empty()) t.speaker = string_field(m, "role");
            if (t.speaker.empty()) t.speaker = "user";
            t.text = m["content"].get<std::string>();
            turns.push_back(std::move(t));
        }
        if (Status st = ctx.store->add_turns(user, turns); !st.ok())
            return send_error(res, from_error(st.error()));
        return send_json(res, json{{"results", json::array()},
                                   {"turns_added", turns.size()},
                                   {"user_id", user}}.dump());
    }

    std::vector<std::string> texts;
    if (body->contains("facts")) {
        const json& facts = (*body)["facts"];
        if (!facts.is_array() || facts.empty())
            return send_error(res,
                              bad_request("'facts' must be a non-empty list of strings", "facts"));
        for (const json& f : facts) {
            if (!f.is_string())
                return send_error(res, bad_request("'facts' must be a list of strings", "facts"));
            texts.push_back(f.get<std::string>());
        }
    } else if (body->contains("text") && (*body)["text"].is_string()) {
        texts.push_back((*body)["text"].get<std::string>());
    } else {
        return send_error(res,
                          bad_request("give 'facts' (a list of strings), 'text' or 'messages'"));
    }
    json results = json::array();
    for (const std::string& text : texts) {
        memory::NewFact nf;
        nf.text = text;
        auto fact = ctx.store->add_fact(user, nf);
        // Facts before a failing one are stored (each add is its own durable transaction):
        // the answer lists them with the error.
        if (!fact.ok()) {
            ApiError e = from_error(fact.error());
            if (!results.empty())
                e.message += " (" + std::to_string(results.size()) + " earlier facts were stored)";
            return send_error(res, e);
        }
        results.push_back(fact_json(*fact));
    }
    send_json(res, json{{"results", results}}.dump());
}

}  // namespace

void add_memory_routes(httplib::Server& http, ServerContext& ctx) {
    http.Post("/v1/memories", [&ctx](const httplib::Request& req, httplib::Response& res) {
        if (const ApiKey* key = authenticate(ctx, req, res)) add_memories(ctx, *key, req, res);
    });
    http.Get("/v1/memories", [&ctx](const httplib::Request& req, httplib::Response& res) {
        const ApiKey* key = authenticate(ctx, req, res);
        if (!key) return;
        const std::string user = scoped_user(*key, req.get_param_value("user_id"), res);
        if (user.empty()) return;
        auto facts = ctx.store->list_facts(user);
        json results = json::array();
        if (facts.ok()) {
            for (const memory::Fact& f : *facts) results.push_back(fact_json(f));
        } else if (facts.error().kind != ErrorKind::NotFound) {  // NotFound: never seen, no facts
            return send_error(res, from_error(facts.error()));
        }
        send_json(res, json{{"results", results}}.dump());
    });
    http.Delete("/v1/memories", [&ctx](const httplib::Request& req, httplib::Response& res) {
        const ApiKey* key = authenticate(ctx, req, res);
        if (!key) return;
        const std::string user = scoped_user(*key, req.get_param_value("user_id"), res);
        if (user.empty()) return;
        if (Status st = ctx.store->delete_user(user); !st.ok())
            return send_error(res, from_error(st.error()));
        send_json(res, json{{"user_id", user}, {"deleted", true}}.dump());
    });
    http.Post("/v1/memories/search", [&ctx](const httplib::Request& req, httplib::Response& res) {
        const ApiKey* key = authenticate(ctx, req, res);
        if (!key) return;
        auto body = object_body(req, res);
        if (!body) return;
        const std::string user = scoped_user(*key, string_field(*body, "user_id"), res);
        if (user.empty()) return;
        if (!body->contains("query") || !(*body)["query"].is_string())
            return send_error(res, bad_request("'query' must be a string", "query"));
        std::int64_t k = 5;
        for (const char* name : {"top_k", "limit"})
            if (body->contains(name)) {
                if (!(*body)[name].is_number_integer() || (*body)[name].get<std::int64_t>() < 1 ||
                    (*body)[name].get<std::int64_t>() > 1000)
                    return send_error(res, bad_request(std::string("'") + name +
                                                           "' must be an integer in [1, 1000]",
                                                       name));
                k = (*body)[name].get<std::int64_t>();
            }
        // A user never seen has no facts in the index: an empty list, as for any miss.
        const std::vector<retrieval::Hit> hits = ctx.index->search(
            user, (*body)["query"].get<std::string>(), static_cast<std::size_t>(k));
        std::vector<memory::FactId> ids;
        std::unordered_map<memory::FactId, double> scores;
        for (const retrieval::Hit& hit : hits) {
            ids.push_back(hit.fact_id);
            scores.emplace(hit.fact_id, hit.score);
        }
        auto facts = ctx.store->get_facts(ids);  // facts deleted since the search are skipped
        if (!facts.ok()) return send_error(res, from_error(facts.error()));
        json results = json::array();
        for (const memory::Fact& fact : *facts) {
            if (fact.user != user) continue;
            json j = fact_json(fact);
            j["score"] = scores.at(fact.id);
            results.push_back(j);
        }
        send_json(res, json{{"results", results}}.dump());
    });
    http.Get(R"(/v1/memories/([^/]+))", [&ctx](const httplib::Request& req,
                                                httplib::Response& res) {
        const ApiKey* key = authenticate(ctx, req, res);
        if (!key) return;
        if (auto fact = visible_fact(ctx, *key, req, res)) send_json(res, fact_json(*fact).dump());
    });
    http.Put(R"(/v1/memories/([^/]+))", [&ctx](const httplib::Request& req,
                                                httplib::Response& res) {
        const ApiKey* key = authenticate(ctx, req, res);
        if (!key) return;
        auto body = object_body(req, res);
        if (!body) return;
        std::string text = string_field(*body, "text");
        if (text.empty()) text = string_field(*body, "memory");
        if (text.empty())
            return send_error(res, bad_request("'text' must be a non-empty string", "text"));
        auto fact = visible_fact(ctx, *key, req, res);
        if (!fact) return;
        auto updated = ctx.store->update_fact(fact->id, text);
        if (!updated.ok()) return send_error(res, from_error(updated.error()));
        send_json(res, fact_json(*updated).dump());
    });
    http.Delete(R"(/v1/memories/([^/]+))", [&ctx](const httplib::Request& req,
                                                   httplib::Response& res) {
        const ApiKey* key = authenticate(ctx, req, res);
        if (!key) return;
        auto fact = visible_fact(ctx, *key, req, res);
        if (!fact) return;
        if (Status st = ctx.store->delete_fact(fact->id); !st.ok())
            return send_error(res, from_error(st.error()));
        send_json(res, json{{"id", std::to_string(fact->id)}, {"deleted", true}}.dump());
    });
}

}  // namespace inferscale::server
