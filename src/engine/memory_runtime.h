#pragma once
// What kv-mode memory needs per model, and the memory prompt every mode shares.
// MemoryRuntime holds the scaffold and its chunks, the encoder, the injector and the tiered
// chunk pool (device, host, disk) keyed by fact identity. memory_prompt lays out M ‖ the
// conversation, the token stream kv and prompt modes share (engine/request.h has the modes).
// Facts are given best-ranked first, as retrieval returns them; the prompt puts the best last.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/chunk_encoder.h"
#include "engine/local_model.h"
#include "inject/injector.h"
#include "inject/memory_prompt.h"
#include "memory/chunk_pool.h"
#include "template/chat_template.h"

namespace inferscale::engine {

struct MemoryFact {
    std::string id;
    std::string text;
    std::string text_hash;  // empty: memory::text_hash(text)
    // The w turns before the fact's source turn, tokenized and truncated by the caller; only
    // used to encode the chunk (its KV is discarded). `window` is w, part of the identity.
    std::vector<std::int32_t> context_tokens;
    std::int32_t window = 0;
    double score = 0.0;  // the retrieval method's, when retrieved for a question
};

struct MemoryOptions {
    // Standalone (the reference) or after the memory header, so chunks carry no sink of their own.
    memory::EncodingMode encoding = memory::EncodingMode::Standalone;
    // The chunk pool's tiers (see inject/chunk_pool.h); an empty disk_dir means no disk tier.
    std::size_t device_pool_bytes = std::size_t{1} << 30;
    std::size_t host_pool_bytes = std::size_t{4} << 30;
    std::string disk_dir;
};

class MemoryRuntime {
  public:
    // Builds the scaffold from the model's chat template and encodes its chunks. `lm` must
    // outlive the runtime. An Error from the scaffold, when the backend is out of memory, or
    // when the pool's disk folder is unusable.
    static Result<std::unique_ptr<MemoryRuntime>> create(LocalModel& lm,
                                                         const MemoryOptions& options = {});

    const inject::MemoryScaffold& scaffold() const { return scaffold_; }
    const memory::KvChunk& header_chunk() const { return header_; }
    const memory::KvChunk& footer_chunk() const { return footer_; }
    const memory::KvChunk& empty_memory_chunk() const { return empty_; }
    memory::ChunkPool& pool() { return *pool_; }
    engine::ChunkEncoder& encoder() { return encoder_; }
    inject::Injector& injector() { return injector_; }
    const MemoryOptions& options() const { return options_; }

    memory::ChunkIdentity identity_of(const MemoryFact& fact) const;
    // Each fact's chunk on the device, in order: pool hits (promoted from host or disk as
    // needed), the misses encoded together in one batched pass and added to the pool. The
    // leases pin them (never demoted or freed) while they live. An Error from encoding, or
    // when the device tier cannot hold them all. `ordered` and `order` as
    // ChunkPool::get_many: unordered leaves promotions in flight (check ChunkLease::ready()).
    // `encoded`, when given, is set to how many chunks were encoded.
    Result<std::vector<memory::ChunkLease>> acquire(
        std::span<const MemoryFact> facts, bool ordered = true,
        memory::PromotionOrder order = memory::PromotionOrder::WholeChunks,
        std::size_t* encoded = nullptr);

  private:
    MemoryRuntime(LocalModel& lm, const MemoryOptions& options, inject::MemoryScaffold scaffold,
                  engine::ChunkEncoder encoder, std::unique_ptr<memory::ChunkPool> pool)
        : lm_(&lm),
          options_(options),
          scaffold_(std::move(scaffold)),
          encoder_(std::move(encoder)),
          injector_(lm.backend(), lm.model().rope_tables()),
          pool_(std::move(pool)) {}

    LocalModel* lm_;
    MemoryOptions options_;
    inject::MemoryScaffold scaffold_;
    engine::ChunkEncoder encoder_;
    inject::Injector injector_;
    std::unique_ptr<memory::ChunkPool> pool_;
    memory::KvChunk header_, footer_, empty_;
};

// Dedups by id (the same id with another text is an Error) and reverses: best-ranked last.
Result<std::vector<MemoryFact>> prompt_order(std::span<const MemoryFact> ranked);

struct MemoryPrompt {
    std::vector<std::int32_t> tokens;                    // M ‖ conversation
    std::int64_t memory_tokens = 0;                      // |M|
    std::vector<std::vector<std::int32_t>> fact_tokens;  // each fact's, in prompt order
};

// M for `facts` (in prompt order, see prompt_order) followed by `messages` as the
// conversation after it (inject::conversation_token_ids). An Error when a fact tokenizes to
// nothing.
Result<MemoryPrompt> memory_prompt(const LocalModel& lm, const inject::MemoryScaffold& scaffold,
                                   std::span<const MemoryFact> facts,
                                   std::span<const jinja::ChatMessage> messages);

}  // namespace inferscale::engine
