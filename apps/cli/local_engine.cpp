#include "apps/cli/local_engine.h"

#include <cstdio>

namespace inferscale::cli {

Result<std::unique_ptr<LocalEngine>> LocalEngine::start(engine::LocalModel& lm,
                                                        engine::EngineOptions options,
                                                        const EngineMemoryArgs* memory) {
    std::unique_ptr<LocalEngine> e(new LocalEngine());
    if (memory != nullptr) {
        e->store_ = IS_TRY(open_store(memory->db));
        e->indexer_ = IS_TRY(memory::FactIndexer::attach(*e->store_, e->index_));
        options.memory = memory_options(memory->chunks, e->store_->path());
        if (lm.memory_plan())
            options.memory.device_pool_bytes = lm.memory_plan()->device_pool_bytes;
    }
    e->engine_ = IS_TRY(engine::Engine::start(lm, e->store_.get(), e->index(), options));
    return e;
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
