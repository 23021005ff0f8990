#include "apps/cli/local_engine.h"

#include <cstdio>

#include "base/log.h"
#include "base/timer.h"

namespace inferscale::cli {

Result<std::unique_ptr<LocalEngine>> LocalEngine::start(engine::LocalModel& lm,
                                                        engine::EngineOptions options,
                                                        const EngineMemoryArgs* memory,
                                                        server::EmbeddingModel* embeddings) {
    std::unique_ptr<LocalEngine> e(new LocalEngine());
    if (memory != nullptr) {
        e->store_ = IS_TRY(open_store(memory->db));
        e->indexer_ = IS_TRY(memory::FactIndexer::attach(*e->store_, e->index_));
        if (embeddings != nullptr) IS_RETURN_IF_ERROR(e->attach_embeddings(*embeddings));
        e->retriever_ = std::make_unique<retrieval::FactRetriever>(
            e->index_, retrieval::DenseRetrieval{e->vectors_.get(), e->device_vectors_.get(),
                                                 embeddings == nullptr
                                                     ? retrieval::QueryEmbedder()
                                                     : [embeddings](std::string_view text) {
                                                           const std::string one(text);
                                                           return embeddings->embed({&one, 1});
                                                       }});
        options.memory = memory_options(memory->chunks, e->store_->path());
        if (lm.memory_plan())
            options.memory.device_pool_bytes = lm.memory_plan()->device_pool_bytes;
    }
    e->engine_ = IS_TRY(engine::Engine::start(lm, e->store_.get(), e->retriever_.get(), options));
    return e;
}

Status LocalEngine::attach_embeddings(server::EmbeddingModel& embeddings) {
    const auto dim = static_cast<std::size_t>(embeddings.dim());
    vectors_ = std::make_unique<retrieval::VectorIndex>(dim);
    std::vector<retrieval::DenseIndex*> indexes{vectors_.get()};
    if (embeddings.choice().device == tensor::Device::Cuda) {
        // The device mirror gets a backend of its own: the embedding model's is serialized
        // behind its encoder.
        device_backend_ = IS_TRY(engine::open_backend(embeddings.choice())).backend;
        device_vectors_ = std::make_unique<memory::DeviceUserVectors>(*device_backend_, dim);
        indexes.push_back(device_vectors_.get());
    }
    embedder_ = IS_TRY(memory::FactEmbedder::attach(
        *store_, std::move(indexes),
        [&embeddings](std::span<const std::string> texts) { return embeddings.embed(texts); },
        {.model = embeddings.id(), .dim = dim}));
    // Requests are answered from the first with every stored fact searchable by embedding: the
    // vectors stored earlier load at once, facts stored without one (by `memory add`, or before
    // this model) are encoded now, once.
    Timer timer;
    embedder_->wait_idle();
    if (timer.seconds() > 1.0) {
        IS_LOG(Info) << "embedded the stored facts in " << timer.seconds() << " s";
    }
    return {};
}

Result<engine::Completion> run_request(engine::Engine& engine, engine::EngineRequest request,
                                       bool print) {
    std::shared_ptr<engine::RequestStream> stream = IS_TRY(engine.submit(std::move(request)));
    engine::Completion done = IS_TRY(stream->collect([print](std::string_view text) {
        if (!print) return;
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
    }));
    if (print) std::printf("\n");
    return done;
}

}  // namespace inferscale::cli
