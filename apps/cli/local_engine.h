#pragma once
// An Engine in this process over a loaded model, with the memory store its flags name: what
// `serve` puts behind HTTP and what `chat`, `generate` and `bench` talk to directly, so every
// request runs the one path.

#include <memory>
#include <string>

#include "apps/cli/cli_support.h"
#include "apps/server/embedding_model.h"
#include "engine/engine.h"
#include "memory/device_user_vectors.h"
#include "memory/fact_embedder.h"
#include "memory/fact_indexer.h"
#include "memory/memory_store.h"
#include "retrieval/bm25_index.h"
#include "retrieval/fact_retriever.h"
#include "retrieval/vector_index.h"

namespace inferscale::cli {

// The memory an engine serves: the store, and chunk options over it.
struct EngineMemoryArgs {
    DbArgs db;
    ChunkArgs chunks;
};

class LocalEngine {
  public:
    // Starts an engine on `lm`; with `memory`, first opens the store and its BM25 index (kept
    // in step with the store) and sets options.memory from the chunk flags (on a GPU, the device
    // tier is the one the model's memory plan set aside). With `embeddings` too, every fact is
    // also embedded (memory::FactEmbedder) into a host index and, when the embedding model runs
    // on CUDA, a device mirror beside it: dense and hybrid retrieval. `embeddings` must outlive
    // the engine.
    static Result<std::unique_ptr<LocalEngine>> start(engine::LocalModel& lm,
                                                      engine::EngineOptions options,
                                                      const EngineMemoryArgs* memory,
                                                      server::EmbeddingModel* embeddings = nullptr);

    engine::Engine& engine() { return *engine_; }
    memory::MemoryStore* store() { return store_.get(); }
    // Null without memory.
    const retrieval::FactRetriever* retriever() const { return retriever_.get(); }
    // Null without embeddings.
    memory::FactEmbedder* embedder() { return embedder_.get(); }

  private:
    LocalEngine() = default;
    Status attach_embeddings(server::EmbeddingModel& embeddings);

    // Destroyed last to first: the engine before the listeners, indexes and store it uses.
    std::unique_ptr<memory::MemoryStore> store_;
    retrieval::Bm25Index index_;
    std::unique_ptr<memory::FactIndexer> indexer_;
    std::unique_ptr<retrieval::VectorIndex> vectors_;
    std::unique_ptr<tensor::Backend> device_backend_;
    std::unique_ptr<memory::DeviceUserVectors> device_vectors_;
    std::unique_ptr<memory::FactEmbedder> embedder_;
    std::unique_ptr<retrieval::FactRetriever> retriever_;
    std::unique_ptr<engine::Engine> engine_;
};

// Submits the request and waits for its end; with `print`, its text goes to stdout as it comes
// (a newline after the last piece).
Result<engine::Completion> run_request(engine::Engine& engine, engine::EngineRequest request,
                                       bool print);

}  // namespace inferscale::cli
