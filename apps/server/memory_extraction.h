#pragma once
// MemoryExtraction: what POST /memories (and /v1/memories) with messages and `infer` does:
// the new turns go to an ExtractionQueue as one job; its model calls run as background engine
// requests; its changes are applied to the store in one transaction (history included). The
// reply is Mem0's {"results": [{id, memory, event, previous_memory?}]}, or with `async_mode`
// {"status": "PENDING", "event_id"} at once, polled at GET /v1/memories/events/{id}.

#include <cstdint>
#include <optional>
#include <variant>

#include <nlohmann/json.hpp>

#include "apps/server/api_error.h"
#include "apps/server/api_keys.h"
#include "apps/server/memory_api.h"
#include "engine/engine.h"
#include "extract/engine_json_llm.h"
#include "extract/extraction_queue.h"
#include "extract/fact_extractor.h"
#include "memory/memory_store.h"
#include "retrieval/fact_retriever.h"

namespace inferscale::server {

class MemoryExtraction {
  public:
    // All borrowed; they must outlive this object. `retriever` finds the stored facts each
    // candidate is compared with; `embedder` (may be null) embeds the facts it changes.
    MemoryExtraction(engine::Engine& engine, memory::MemoryStore& store,
                     const retrieval::FactRetriever& retriever, memory::FactEmbedder* embedder,
                     extract::ExtractorOptions options = {});

    // Queues the request's turns; waits for the result unless it is async.
    std::variant<nlohmann::json, ApiError> extract(const ExtractRequest& request);
    // An event id for `user`'s job whose turns come later (a chat answer still generating): it
    // polls PENDING until submit_reserved or fail_reserved; a 503 when the queue is full.
    std::variant<std::uint64_t, ApiError> reserve(const std::string& user);
    // Queues the request's turns as the reserved job; the request's user is the reserved one.
    void submit_reserved(std::uint64_t id, const ExtractRequest& request);
    void fail_reserved(std::uint64_t id, std::string error);
    // The job as GET /v1/memories/events/{id} shows it; nullopt when unknown or not the key's.
    std::optional<nlohmann::json> event(std::uint64_t id, const ApiKey& key) const;

  private:
    Result<std::vector<extract::StoredFact>> similar(const extract::ExtractionJob& job,
                                                     std::string_view text, std::size_t k);
    Result<nlohmann::json> apply(const extract::ExtractionJob& job,
                                 const std::vector<extract::FactChange>& changes);

    memory::MemoryStore& store_;
    const retrieval::FactRetriever& retriever_;
    memory::FactEmbedder* embedder_;
    extract::EngineJsonLlm llm_;
    extract::FactExtractor extractor_;
    extract::ExtractionQueue queue_;  // last: its workers use the members above
};

}  // namespace inferscale::server
