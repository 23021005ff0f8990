// Mem0's REST routes (its open-source server's shapes), beside /v1/memories and on the same
// handlers (memory_api.h):
//   POST   /memories                 add: {"messages", "user_id", "agent_id"?, "run_id"?,
//                                    "metadata"?, "infer"? (default true), "async_mode"?}
//   GET    /memories?user_id=U[&agent_id&run_id][&page&page_size | &limit]
//   GET|PUT|DELETE /memories/{id}    GET /memories/{id}/history
//   DELETE /memories?user_id=U[&agent_id&run_id]   the scope's facts (turns stay)
//   POST   /search                   memory_search.cpp
//   POST   /reset                    everything, for a key that may act for every user
// A trailing slash is accepted on every route.

#include <httplib.h>

#include <algorithm>

#include "apps/server/http_server.h"
#include "apps/server/json_fields.h"
#include "apps/server/memory_api.h"

namespace inferscale::server {
namespace {

using nlohmann::json;

void delete_scope(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                  httplib::Response& res) {
    auto scope = query_scope(key, req, res, {});
    if (!scope) return;
    auto ids = ctx.store->delete_facts({scope->user_id, scope->agent_id, scope->run_id});
    if (!ids.ok()) return send_error(res, from_error(ids.error()));
    send_json(
        res,
        json{{"message", "All relevant memories deleted"}, {"deleted_count", ids->size()}}.dump());
}

void reset(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
           httplib::Response& res) {
    // Only a key whose tenants are everyone: any narrower key would erase others' memories.
    if (std::find(key.users.begin(), key.users.end(), "*") == key.users.end())
        return send_error(res, {403,
                                "resetting the memory store needs a key that may act for "
                                "every user",
                                "permission_error", std::nullopt, "forbidden_reset"});
    if (!req.body.empty()) {
        auto body = object_body(req, res);
        if (!body) return;
        if (auto error = unsupported_field(*body, {})) return send_error(res, *error);
    }
    if (Status st = ctx.store->reset(); !st.ok()) return send_error(res, from_error(st.error()));
    send_json(res, json{{"message", "All memories reset"}}.dump());
}

}  // namespace

void add_mem0_routes(httplib::Server& http, ServerContext& ctx) {
    using Handler = void (*)(ServerContext&, const ApiKey&, const httplib::Request&,
                             httplib::Response&, MemoryApi);
    const auto route = [&ctx](Handler handler) {
        return [&ctx, handler](const httplib::Request& req, httplib::Response& res) {
            if (const ApiKey* key = authenticate(ctx, req, res))
                handler(ctx, *key, req, res, MemoryApi::Mem0);
        };
    };
    const auto plain = [&ctx](auto handler) {
        return [&ctx, handler](const httplib::Request& req, httplib::Response& res) {
            if (const ApiKey* key = authenticate(ctx, req, res)) handler(ctx, *key, req, res);
        };
    };
    http.Post("/memories/?", plain(add_memories));
    http.Get("/memories/?", plain(list_memories));
    http.Delete("/memories/?", plain(delete_scope));
    http.Post("/search/?", route(search_memories));
    http.Post("/reset/?", plain(reset));
    http.Get(R"(/memories/([^/]+)/history/?)", plain(memory_history));
    http.Get(R"(/memories/([^/]+)/?)", plain(get_memory));
    http.Put(R"(/memories/([^/]+)/?)", route(update_memory));
    http.Delete(R"(/memories/([^/]+)/?)", route(delete_memory));
}

}  // namespace inferscale::server
