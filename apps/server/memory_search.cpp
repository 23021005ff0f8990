// Memory search, for POST /v1/memories/search and Mem0's POST /search:
//   {"query", "user_id" (or "filters": {"user_id"}), "agent_id"?, "run_id"?, "filters"?
//    (memory_filter.h), "top_k" | "limit"?, "threshold"?, "retrieval"?: "bm25"|"dense"|"hybrid"}
// The user's facts ranked by ctx.retriever (its default method unless the body names one); the
// filters and the threshold apply before the top k are taken, so a filter never starves the
// answer of matches it would admit. Scores are the method's: BM25, cosine, or fused rank.

#include <httplib.h>

#include <limits>
#include <unordered_map>

#include "apps/server/http_server.h"
#include "apps/server/json_fields.h"
#include "apps/server/memory_api.h"
#include "apps/server/memory_filter.h"

namespace inferscale::server {
namespace {

using nlohmann::json;

// The tenant of a search: top-level user_id, or filters.user_id as Mem0's newer clients send
// it; both must agree. Empty with a 400 sent otherwise.
std::string search_user(const json& body, httplib::Response& res) {
    std::string user = body.value("user_id", std::string());
    if (const auto filters = body.find("filters");
        filters != body.end() && filters->is_object() && filters->contains("user_id")) {
        const json& inner = (*filters)["user_id"];
        if (!inner.is_string()) {
            send_error(res, bad_request("'filters.user_id' must be a string: it names the tenant",
                                        "filters.user_id"));
            return {};
        }
        if (!user.empty() && user != inner.get<std::string>()) {
            send_error(res, bad_request("'user_id' and 'filters.user_id' differ", "user_id"));
            return {};
        }
        user = inner.get<std::string>();
    }
    if (user.empty())
        send_error(res,
                   bad_request("'user_id' is required: memories are kept per user", "user_id"));
    return user;
}

}  // namespace

void search_memories(ServerContext& ctx, const ApiKey& key, const httplib::Request& req,
                     httplib::Response& res, MemoryApi api) {
    auto body = object_body(req, res);
    if (!body) return;
    if (auto error = unsupported_field(*body, {"query", "user_id", "agent_id", "run_id", "filters",
                                               "top_k", "limit", "threshold", "retrieval"}))
        return send_error(res, *error);
    Fields fields(*body);
    std::string query, user_field, agent, run, method_name;
    double threshold = -1.0;
    fields.read("query", query, "a string", &json::is_string);
    fields.read("user_id", user_field, "a string", &json::is_string);
    fields.read("agent_id", agent, "a string", &json::is_string);
    fields.read("run_id", run, "a string", &json::is_string);
    fields.read("threshold", threshold, "a number", &json::is_number);
    fields.read("retrieval", method_name, "a string", &json::is_string);
    if (fields.error) return send_error(res, *fields.error);
    if (!body->contains("query") || !(*body)["query"].is_string())
        return send_error(res, bad_request("'query' must be a string", "query"));
    const std::string user = search_user(*body, res);
    if (user.empty() || !scoped_user(key, user, res)) return;

    json filter_json = json::object();
    if (const json* f = fields.get("filters")) filter_json = *f;
    // The top-level scope fields are equality filters like any other.
    if (!agent.empty()) filter_json = {{"AND", {filter_json, {{"agent_id", agent}}}}};
    if (!run.empty()) filter_json = {{"AND", {filter_json, {{"run_id", run}}}}};
    auto parsed = MemoryFilter::parse(filter_json);
    if (auto* error = std::get_if<ApiError>(&parsed)) return send_error(res, *error);
    const MemoryFilter& filter = std::get<MemoryFilter>(parsed);

    std::int64_t k = api == MemoryApi::V1 ? 5 : 20;
    for (const char* name : {"top_k", "limit"})
        if (const json* v = fields.get(name)) {
            if (!v->is_number_integer() || v->get<std::int64_t>() < 1 ||
                v->get<std::int64_t>() > 1000)
                return send_error(
                    res, bad_request(std::string("'") + name + "' must be an integer in [1, 1000]",
                                     name));
            k = v->get<std::int64_t>();
        }

    retrieval::RetrievalMethod method = ctx.retriever->default_method();
    if (!method_name.empty()) {
        auto parsed = retrieval::parse_retrieval_method(method_name);
        if (!parsed.ok()) return send_error(res, bad_request(parsed.error().message, "retrieval"));
        method = *parsed;
    }
    // With a filter or a threshold, every match of the user, best first, so that they apply
    // before the cut. A user never seen has no facts: an empty list, as for any miss.
    const bool cut_later = !filter_json.empty() || threshold > -1.0;
    auto searched = ctx.retriever->search(
        user, query, cut_later ? std::numeric_limits<std::size_t>::max() : std::size_t(k), method);
    if (!searched.ok()) {
        if (searched.error().kind == ErrorKind::InvalidArgument)
            return send_error(res, bad_request(searched.error().message, "retrieval"));
        return send_error(res, from_error(searched.error()));
    }
    const std::vector<retrieval::Hit>& hits = *searched;
    std::vector<memory::FactId> ids;
    std::unordered_map<memory::FactId, double> scores;
    for (const retrieval::Hit& hit : hits) {
        if (hit.score < threshold) continue;
        ids.push_back(hit.fact_id);
        scores.emplace(hit.fact_id, hit.score);
    }
    auto facts = ctx.store->get_facts(ids);  // facts deleted since the search are skipped
    if (!facts.ok()) return send_error(res, from_error(facts.error()));
    json results = json::array();
    for (const memory::Fact& fact : *facts) {
        if (fact.user != user) continue;
        if (static_cast<std::int64_t>(results.size()) == k) break;
        const json metadata = json::parse(fact.metadata, nullptr, false);
        if (!filter.matches(fact, metadata)) continue;
        json item = fact_json(fact);
        item["score"] = scores.at(fact.id);
        results.push_back(std::move(item));
    }
    send_json(res, json{{"results", results}}.dump());
}

}  // namespace inferscale::server
