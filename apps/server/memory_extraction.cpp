#include "apps/server/memory_extraction.h"

#include <string>

namespace inferscale::server {
namespace {

using nlohmann::json;

json job_json(const extract::JobState& state) {
    json out = {{"id", std::to_string(state.id)},
                {"event_id", std::to_string(state.id)},
                {"status", extract::job_status_name(state.status)},
                {"user_id", state.user}};
    if (state.status == extract::JobStatus::Succeeded) out["results"] = state.results;
    if (state.status == extract::JobStatus::Failed) out["error"] = state.error;
    return out;
}

// The queue's job for the request's turns.
extract::ExtractionJob job_of(const ExtractRequest& request) {
    extract::ExtractionJob job;
    job.user = request.scope.user_id;
    job.agent_id = request.scope.agent_id;
    job.run_id = request.scope.run_id;
    job.metadata = request.metadata;
    for (const memory::Turn& turn : request.turns) {
        const bool plain_role = turn.speaker == "user" || turn.speaker == "assistant";
        job.messages.push_back({turn.speaker == "assistant" ? "assistant" : "user",
                                plain_role ? "" : turn.speaker, turn.text});
        job.date = turn.timestamp;
    }
    return job;
}

}  // namespace

MemoryExtraction::MemoryExtraction(engine::Engine& engine, memory::MemoryStore& store,
                                   const retrieval::FactRetriever& retriever,
                                   memory::FactEmbedder* embedder,
                                   extract::ExtractorOptions options)
    : store_(store),
      retriever_(retriever),
      embedder_(embedder),
      llm_(engine),
      extractor_(llm_, options),
      queue_(
          extractor_,
          [this](const extract::ExtractionJob& job) -> extract::SimilarFacts {
              return [this, &job](std::string_view text, std::size_t k) {
                  return similar(job, text, k);
              };
          },
          [this](const extract::ExtractionJob& job,
                 const std::vector<extract::FactChange>& changes) { return apply(job, changes); }) {
}

Result<std::vector<extract::StoredFact>> MemoryExtraction::similar(
    const extract::ExtractionJob& job, std::string_view text, std::size_t k) {
    // A few more hits than asked for, as facts of other agents or runs are passed over.
    const std::vector<retrieval::Hit> hits = IS_TRY(retriever_.search(job.user, text, 4 * k));
    std::vector<memory::FactId> ids;
    for (const retrieval::Hit& hit : hits) ids.push_back(hit.fact_id);
    std::vector<extract::StoredFact> out;
    for (const memory::Fact& fact : IS_TRY(store_.get_facts(ids))) {
        if (out.size() == k) break;
        if (fact.user != job.user || (!job.agent_id.empty() && fact.agent_id != job.agent_id) ||
            (!job.run_id.empty() && fact.run_id != job.run_id))
            continue;
        out.push_back({fact.id, fact.text});
    }
    return out;
}

Result<json> MemoryExtraction::apply(const extract::ExtractionJob& job,
                                     const std::vector<extract::FactChange>& changes) {
    std::vector<memory::FactChange> batch;
    for (const extract::FactChange& change : changes) {
        switch (change.event) {
            case extract::Event::Add: {
                memory::NewFact fact{change.text, {}, ""};
                fact.agent_id = job.agent_id;
                fact.run_id = job.run_id;
                fact.metadata = job.metadata.dump();
                batch.push_back(memory::FactChange::add(std::move(fact)));
                break;
            }
            case extract::Event::Update:
                batch.push_back(memory::FactChange::update(*change.id, change.text));
                break;
            case extract::Event::Delete:
                batch.push_back(memory::FactChange::remove(*change.id));
                break;
            case extract::Event::None:
                break;
        }
    }
    const std::vector<memory::AppliedChange> applied =
        IS_TRY(apply_searchable(store_, embedder_, job.user, batch));
    json results = json::array();
    for (std::size_t i = 0; i < applied.size(); ++i) {
        json item = fact_json(applied[i].fact);
        item["event"] = std::string(memory::event_name(applied[i].event));
        if (applied[i].event == memory::FactEvent::Update)
            item["previous_memory"] = changes[i].old_text;
        results.push_back(std::move(item));
    }
    return results;
}

std::variant<json, ApiError> MemoryExtraction::extract(const ExtractRequest& request) {
    auto id = queue_.submit(job_of(request));
    if (!id.ok()) return from_error(id.error());
    if (request.async)
        return json{{"status", "PENDING"},
                    {"event_id", std::to_string(*id)},
                    {"message", "memory extraction queued: poll GET /v1/memories/events/" +
                                    std::to_string(*id)}};
    const std::optional<extract::JobState> state = queue_.wait(*id);
    if (!state || state->status != extract::JobStatus::Succeeded)
        return ApiError{500, "memory extraction failed: " + (state ? state->error : "stopped"),
                        "server_error", std::nullopt, "extraction_failed"};
    return json{{"results", state->results}, {"turns_added", request.turns.size()}};
}

std::variant<std::uint64_t, ApiError> MemoryExtraction::reserve(const std::string& user) {
    auto id = queue_.reserve(user);
    if (!id.ok()) return from_error(id.error());
    return *id;
}

void MemoryExtraction::submit_reserved(std::uint64_t id, const ExtractRequest& request) {
    queue_.submit(id, job_of(request));
}

void MemoryExtraction::fail_reserved(std::uint64_t id, std::string error) {
    queue_.fail(id, std::move(error));
}

std::optional<json> MemoryExtraction::event(std::uint64_t id, const ApiKey& key) const {
    const std::optional<extract::JobState> state = queue_.state(id);
    if (!state || !key.may_access(state->user)) return std::nullopt;
    return job_json(*state);
}

}  // namespace inferscale::server
