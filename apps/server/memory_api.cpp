// The memory API's handlers, shared by the /v1/memories routes (registered here) and Mem0's
// routes (mem0_api.cpp); adding is in memory_add.cpp, search in memory_search.cpp:
//   POST   /v1/memories   {"user_id", "agent_id"?, "run_id"?, "metadata"?, and one of
//                          "facts": [text...] | "text": text       add facts
//                          "messages": [{role, content}...], "session_id"?, "infer"?,
//                          "async_mode"?                            store turns (and extract)}
//   GET    /v1/memories?user_id=U[&agent_id&run_id][&page&page_size | &limit]       list
//   GET    /v1/memories/{id}   PUT /v1/memories/{id} {"text"?, "metadata"?}   DELETE ...
//   GET    /v1/memories/{id}/history
//   DELETE /v1/memories?user_id=U                  forget U (with agent_id/run_id: those facts)
//   POST   /v1/memories/search  (memory_search.cpp)
//   GET    /v1/memories/events/{id}      an extraction job (async_mode: memory_extraction.h)
// A trailing slash is accepted on every route. A user never seen lists and searches as an
// empty list (as Mem0 answers); forgetting one is a 404.

#include "apps/server/memory_api.h"
#include "apps/server/memory_extraction.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>

#include "apps/server/http_server.h"
#include "apps/server/json_fields.h"
#include "apps/server/md5.h"
#include "base/log.h"

namespace inferscale::server {
namespace {

using nlohmann::json;

constexpr std::int64_t kMaxPageSize = 1000;

json scope_json(const std::string& id) { return id.empty() ? json() : json(id); }

// The fact id in the path (req.matches[1]); nullopt when it is not one a store could hold.
std::optional<memory::FactId> path_id(const httplib::Request& req) {
    const std::string& raw = req.matches[1];
    const bool numeric =
        !raw.empty() && raw.size() < 19 &&
        std::all_of(raw.begin(), raw.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!numeric) return std::nullopt;
    return std::stoll(raw);
}

ApiError no_memory(const httplib::Request& req) {
    return not_found("no memory with id '" + std::string(req.matches[1]) + "'");
}

// The fact named in the path if the key may see it; a 404 sent otherwise.
std::optional<memory::Fact> visible_fact(ServerContext& ctx, const ApiKey& key,
                                         const httplib::Request& req, httplib::Response& res) {
    const auto hidden = [&] {
        send_error(res, no_memory(req));
        return std::nullopt;
    };
    const std::optional<memory::FactId> id = path_id(req);
    if (!id) return hidden();
    auto fact = ctx.store->get_fact(*id);
    if (!fact.ok()) {
        if (fact.error().kind == ErrorKind::NotFound) return hidden();
        send_error(res, from_error(fact.error()));
        return std::nullopt;
    }
    if (!key.may_access(fact->user)) return hidden();
    return std::move(fact).value();
}

}  // namespace

Result<std::vector<memory::AppliedChange>> apply_searchable(
    memory::MemoryStore& store, memory::FactEmbedder* embedder, std::string_view user,
    std::span<const memory::FactChange> changes) {
    std::vector<memory::AppliedChange> applied = IS_TRY(store.apply_changes(user, changes));
    constexpr std::chrono::seconds kIndexWait{10};
    if (embedder != nullptr && !embedder->wait_until_current(kIndexWait)) {
        IS_LOG(Warn) << "facts of " << user << " not embedded after " << kIndexWait.count()
                     << " s: the answer goes out before they are searchable by embedding";
    }
    return applied;
}

namespace {

// One change to a fact the key may see, applied under its owner so that a fact deleted since
// it was read is a 404 too; the fact as changed, or nullopt with the error sent.
std::optional<memory::AppliedChange> change_fact(ServerContext& ctx, const memory::Fact& fact,
                                                 const memory::FactChange& change,
                                                 const httplib::Request& req,
                                                 httplib::Response& res) {
    auto applied = apply_searchable(*ctx.store, ctx.embedder, fact.user, std::span(&change, 1));
    if (!applied.ok()) {
        send_error(res, applied.error().kind == ErrorKind::NotFound ? no_memory(req)
                                                                    : from_error(applied.error()));
        return std::nullopt;
    }
    return std::move(applied->front());
}

// A 400 naming the first query parameter outside `known` and the scope's three.
std::optional<ApiError> unknown_param(const httplib::Request& req,
                                      std::initializer_list<std::string_view> known) {
    for (const auto& [name, value] : req.params) {
        if (name == "user_id" || name == "agent_id" || name == "run_id" ||
            std::find(known.begin(), known.end(), name) != known.end())
            continue;
        return bad_request("query parameter '" + name + "' is not supported by this server", name);
    }
    return std::nullopt;
}

// A positive integer query parameter at most `max`, or a 400.
std::variant<std::optional<std::int64_t>, ApiError> positive_param(const httplib::Request& req,
                                                                   const char* name,
                                                                   std::int64_t max) {
    if (!req.has_param(name)) return std::optional<std::int64_t>();
    const std::string raw = req.get_param_value(name);
    const bool digits =
        !raw.empty() && raw.size() < 10 &&
        std::all_of(raw.begin(), raw.end(), [](char c) { return c >= '0' && c <= '9'; });
    const std::int64_t value = digits ? std::stoll(raw) : 0;
    if (value < 1 || value > max)
        return bad_request(
            std::string("'") + name + "' must be an integer in [1, " + std::to_string(max) + "]",
            name);
    return std::optional<std::int64_t>(value);
}

// DELETE /v1/memories: the user and everything of theirs, or with agent_id or run_id only the
// facts of that scope.
void forget_scope(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                  httplib::Response& res) {
    auto scope = query_scope(key, req, res, {});
    if (!scope) return;
    if (scope->agent_id.empty() && scope->run_id.empty()) {
        if (Status st = ctx.store->delete_user(scope->user_id); !st.ok())
            return send_error(res, from_error(st.error()));
        return send_json(res, json{{"user_id", scope->user_id}, {"deleted", true}}.dump());
    }
    auto ids = ctx.store->delete_facts({scope->user_id, scope->agent_id, scope->run_id});
    if (!ids.ok()) return send_error(res, from_error(ids.error()));
    send_json(res,
              json{{"user_id", scope->user_id}, {"deleted", true}, {"deleted_count", ids->size()}}
                  .dump());
}

}  // namespace

std::optional<json> object_body(const httplib::Request& req, httplib::Response& res) {
    json body;
    if (auto error = parse_object(req.body, body)) {
        send_error(res, *error);
        return std::nullopt;
    }
    return body;
}

json fact_json(const memory::Fact& f) {
    json metadata = json::parse(f.metadata, nullptr, false);
    if (metadata.is_discarded()) metadata = json();  // written by something that checks less
    return {{"id", std::to_string(f.id)},
            {"memory", f.text},
            {"hash", md5_hex(f.text)},
            {"metadata", metadata},
            {"created_at", f.created_at},
            {"updated_at", f.updated_at},
            {"user_id", f.user},
            {"agent_id", scope_json(f.agent_id)},
            {"run_id", scope_json(f.run_id)}};
}

std::optional<std::string> scoped_user(const ApiKey& key, const std::string& user,
                                       httplib::Response& res) {
    if (user.empty()) {
        send_error(res,
                   bad_request("'user_id' is required: memories are kept per user", "user_id"));
        return std::nullopt;
    }
    if (!key.may_access(user)) {
        send_error(res, {403, "this API key may not act for user '" + user + "'",
                         "permission_error", "user_id", "forbidden_user"});
        return std::nullopt;
    }
    return user;
}

std::optional<MemoryScope> query_scope(const ApiKey& key, const httplib::Request& req,
                                       httplib::Response& res,
                                       std::initializer_list<std::string_view> known) {
    if (auto error = unknown_param(req, known)) {
        send_error(res, *error);
        return std::nullopt;
    }
    MemoryScope scope{req.get_param_value("user_id"), req.get_param_value("agent_id"),
                      req.get_param_value("run_id")};
    if (!scoped_user(key, scope.user_id, res)) return std::nullopt;
    return scope;
}

void list_memories(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                   httplib::Response& res) {
    auto scope = query_scope(key, req, res, {"page", "page_size", "limit", "top_k"});
    if (!scope) return;
    memory::FactFilter filter{scope->user_id, scope->agent_id, scope->run_id};
    std::optional<std::int64_t> page, page_size, limit;
    for (auto [name, out] : {std::pair{"page", &page}, std::pair{"page_size", &page_size},
                             std::pair{"limit", &limit}, std::pair{"top_k", &limit}}) {
        auto value = positive_param(
            req, name, name == std::string_view("page") ? std::int64_t{1} << 30 : kMaxPageSize);
        if (auto* error = std::get_if<ApiError>(&value)) return send_error(res, *error);
        if (auto v = std::get<std::optional<std::int64_t>>(value)) *out = v;
    }
    if (limit && (page || page_size))
        return send_error(res,
                          bad_request("give 'page'/'page_size' or 'limit', not both", "limit"));
    if (page || page_size) {
        const std::int64_t size = page_size.value_or(100);
        filter.offset = static_cast<std::size_t>((page.value_or(1) - 1) * size);
        filter.limit = static_cast<std::size_t>(size);
    } else if (limit) {
        filter.limit = static_cast<std::size_t>(*limit);
    }
    auto facts = ctx.store->list_facts(filter);
    json results = json::array();
    if (facts.ok()) {
        for (const memory::Fact& f : *facts) results.push_back(fact_json(f));
    } else if (facts.error().kind != ErrorKind::NotFound) {  // NotFound: never seen, no facts
        return send_error(res, from_error(facts.error()));
    }
    send_json(res, json{{"results", results}}.dump());
}

void get_memory(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                httplib::Response& res) {
    if (auto error = unknown_param(req, {})) return send_error(res, *error);
    if (auto fact = visible_fact(ctx, key, req, res)) send_json(res, fact_json(*fact).dump());
}

void update_memory(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                   httplib::Response& res, MemoryApi api) {
    auto body = object_body(req, res);
    if (!body) return;
    // "memory" and "data" are the names Mem0's clients have used for the text.
    if (auto error = unsupported_field(*body, {"text", "memory", "data", "metadata"}))
        return send_error(res, *error);
    Fields fields(*body);
    std::optional<std::string> text;
    for (const char* name : {"text", "memory", "data"}) {
        std::string value;
        fields.read(name, value, "a non-empty string", &json::is_string);
        if (!value.empty()) text = value;
    }
    if (fields.error) return send_error(res, *fields.error);
    const json* metadata = fields.get("metadata");
    if (metadata && !metadata->is_object())
        return send_error(res, bad_request("'metadata' must be an object", "metadata"));
    if (!text && !metadata)
        return send_error(res,
                          bad_request("give 'text' (a non-empty string) or 'metadata'", "text"));
    auto fact = visible_fact(ctx, key, req, res);
    if (!fact) return;
    memory::FactChange change = memory::FactChange::update(fact->id, text.value_or(fact->text));
    if (metadata) change.metadata = metadata->dump();
    auto applied = change_fact(ctx, *fact, change, req, res);
    if (!applied) return;
    json answer = fact_json(applied->fact);
    if (api == MemoryApi::Mem0) answer["message"] = "Memory updated successfully!";
    send_json(res, answer.dump());
}

void delete_memory(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                   httplib::Response& res, MemoryApi api) {
    if (auto error = unknown_param(req, {})) return send_error(res, *error);
    auto fact = visible_fact(ctx, key, req, res);
    if (!fact) return;
    if (!change_fact(ctx, *fact, memory::FactChange::remove(fact->id), req, res)) return;
    if (api == MemoryApi::Mem0)
        return send_json(res, json{{"message", "Memory deleted successfully"}}.dump());
    send_json(res, json{{"id", std::to_string(fact->id)}, {"deleted", true}}.dump());
}

void memory_history(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                    httplib::Response& res) {
    if (auto error = unknown_param(req, {})) return send_error(res, *error);
    const std::optional<memory::FactId> id = path_id(req);
    if (!id) return send_error(res, no_memory(req));
    auto rows = ctx.store->history(*id);
    if (!rows.ok()) return send_error(res, from_error(rows.error()));
    // Every row of a fact has its one user: the first decides, and a hidden fact is a 404.
    if (rows->empty() || !key.may_access(rows->front().user))
        return send_error(res, no_memory(req));
    json out = json::array();
    const auto text = [](const std::optional<std::string>& t) { return t ? json(*t) : json(); };
    for (const memory::FactHistoryEntry& row : *rows)
        out.push_back({{"id", std::to_string(row.id)},
                       {"memory_id", std::to_string(row.fact_id)},
                       {"user_id", row.user},
                       {"old_memory", text(row.old_text)},
                       {"new_memory", text(row.new_text)},
                       {"event", std::string(memory::event_name(row.event))},
                       {"created_at", row.created_at},
                       {"updated_at", row.created_at},
                       {"is_deleted", row.event == memory::FactEvent::Delete}});
    send_json(res, out.dump());
}

namespace {

// GET /v1/memories/events/{id}: an extraction job's state (memory_extraction.h).
void extraction_event(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                      httplib::Response& res) {
    const std::string& raw = req.matches[1];
    const bool numeric =
        !raw.empty() && raw.size() < 19 &&
        std::all_of(raw.begin(), raw.end(), [](char c) { return c >= '0' && c <= '9'; });
    const std::optional<json> event =
        numeric && ctx.extraction != nullptr
            ? ctx.extraction->event(static_cast<std::uint64_t>(std::stoull(raw)), key)
            : std::nullopt;
    if (!event) return send_error(res, not_found("no memory extraction event '" + raw + "'"));
    send_json(res, event->dump());
}

}  // namespace

void add_memory_routes(httplib::Server& http, ServerContext& ctx) {
    using Handler = void (*)(ServerContext&, const ApiKey&, const httplib::Request&,
                             httplib::Response&, MemoryApi);
    const auto route = [&ctx](Handler handler) {
        return [&ctx, handler](const httplib::Request& req, httplib::Response& res) {
            if (const ApiKey* key = authenticate(ctx, req, res))
                handler(ctx, *key, req, res, MemoryApi::V1);
        };
    };
    const auto plain = [&ctx](auto handler) {
        return [&ctx, handler](const httplib::Request& req, httplib::Response& res) {
            if (const ApiKey* key = authenticate(ctx, req, res)) handler(ctx, *key, req, res);
        };
    };
    http.Post("/v1/memories/?", plain(add_memories));
    http.Get("/v1/memories/?", plain(list_memories));
    http.Delete("/v1/memories/?", plain(forget_scope));
    http.Post("/v1/memories/search/?", route(search_memories));
    http.Get(R"(/v1/memories/events/([^/]+)/?)", plain(extraction_event));
    http.Get(R"(/v1/memories/([^/]+)/history/?)", plain(memory_history));
    http.Get(R"(/v1/memories/([^/]+)/?)", plain(get_memory));
    http.Put(R"(/v1/memories/([^/]+)/?)", route(update_memory));
    http.Delete(R"(/v1/memories/([^/]+)/?)", route(delete_memory));
}

}  // namespace inferscale::server
