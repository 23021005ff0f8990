#pragma once
// The memory API's two route families over one set of handlers: the /v1/memories routes and
// Mem0's REST routes (/memories, /search, /reset: mem0_api.cpp). Every route is scoped by API
// key: `user_id` is the tenant and is required; a fact of another tenant answers 404, never 403;
// agent_id and run_id narrow a user's facts and grant nothing. Unknown body fields and query
// parameters are a 400 naming them.

#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/server/api_error.h"
#include "apps/server/api_keys.h"
#include "memory/fact_embedder.h"
#include "memory/memory_store.h"
#include "base/result.h"
#include "memory/memory_types.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace inferscale::server {

struct ServerContext;

// Whose memories a request touches: the user (the tenant) and optional sub-scopes, empty when
// not given.
struct MemoryScope {
    std::string user_id;
    std::string agent_id;
    std::string run_id;
};

// What fact extraction (memory_extraction.h) gets from POST /memories (or /v1/memories) with
// messages and `infer` true (Mem0's default), after the turns are stored.
struct ExtractRequest {
    MemoryScope scope;
    std::vector<memory::Turn> turns;  // the turns just stored, in order
    nlohmann::json metadata;          // the request's metadata object; {} when none
    bool async = false;               // `async_mode`: answer before the extraction ends
};

// Which family answers: they differ in the bodies of updates and deletes, and in how many
// results a search returns by default (5 on /v1, 20 as Mem0's search does).
enum class MemoryApi { V1, Mem0 };

// ---- handlers shared by both families (memory_api.cpp, memory_search.cpp) -------------------
void add_memories(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                  httplib::Response& res);
void list_memories(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                   httplib::Response& res);
void get_memory(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                httplib::Response& res);
void update_memory(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                   httplib::Response& res, MemoryApi api);
void delete_memory(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                   httplib::Response& res, MemoryApi api);
void memory_history(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                    httplib::Response& res);
void search_memories(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                     httplib::Response& res, MemoryApi api);

// ---- helpers for the route files -------------------------------------------------------------
// A stored fact in Mem0's item shape: {id, memory, hash, metadata, created_at, updated_at,
// user_id, agent_id, run_id} (absent scopes are null).
nlohmann::json fact_json(const memory::Fact& fact);
// The user a request names, if the key may act for them; otherwise an error is sent (400
// without one, 403 for another tenant's) and nullopt returned.
std::optional<std::string> scoped_user(const ApiKey& key, const std::string& user,
                                       httplib::Response& res);
// The scope in the query string (user_id, agent_id, run_id), checked as scoped_user checks;
// nullopt with an error sent otherwise. `known` lists the other parameters the route takes.
std::optional<MemoryScope> query_scope(const ApiKey& key, const httplib::Request& req,
                                       httplib::Response& res,
                                       std::initializer_list<std::string_view> known);
// MemoryStore::apply_changes, then a wait (of at most a few seconds, logged when it runs out)
// until the changed facts are searchable by embedding too, when `embedder` is set: a client
// that searches right after its write finds what it wrote by every retrieval method.
Result<std::vector<memory::AppliedChange>> apply_searchable(
    memory::MemoryStore& store, memory::FactEmbedder* embedder, std::string_view user,
    std::span<const memory::FactChange> changes);
// Stores messages ({role?, content, name?}, checked) as conversation turns of `session`,
// continuing its numbering; the turns stored (memory_add.cpp).
Result<std::vector<memory::Turn>> store_turns(ServerContext& ctx, const std::string& user,
                                              const std::string& session,
                                              const nlohmann::json& messages);
// The JSON object body, or a 400 sent and nullopt returned.
std::optional<nlohmann::json> object_body(const httplib::Request& req, httplib::Response& res);

void add_memory_routes(httplib::Server& http, ServerContext& ctx);
void add_mem0_routes(httplib::Server& http, ServerContext& ctx);

}  // namespace inferscale::server
