#pragma once
// FactEmbedder: keeps every fact's embedding in step with a MemoryStore, in the store (one
// vector per fact and model, so a restart encodes nothing twice) and in dense indexes. Changes
// are heard as the store commits them and encoded on a worker thread of the embedder's own, in
// batches, off the store's lock: the store's writes never wait for the model, and a writer that
// wants its facts searchable by embedding before it answers waits with wait_until_current().
//
// At attach every stored fact is heard once: a fact with a stored vector of this model is
// indexed from it, the others are encoded. A fact changed or deleted while its vector is being
// encoded is never indexed with the stale vector: each change has a version, and only the
// vector of the latest version of a live fact reaches the indexes.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "memory/memory_store.h"
#include "retrieval/dense_index.h"

namespace inferscale::memory {

// Embeddings of `texts`, row-major [texts.size(), dim] f32.
using TextEncoder = std::function<Result<std::vector<float>>(std::span<const std::string> texts)>;

struct FactEmbedderOptions {
    std::string model;  // the embedding model's id, the key of the stored vectors
    std::size_t dim = 0;
    std::size_t batch = 32;  // facts encoded per call
};

class FactEmbedder final : public FactListener {
  public:
    // Registers with the store and starts the worker. `store`, `indexes` (each of dim
    // options.dim) and `encode` must outlive the embedder, which stops its worker and
    // unregisters when destroyed.
    static Result<std::unique_ptr<FactEmbedder>> attach(MemoryStore& store,
                                                        std::vector<retrieval::DenseIndex*> indexes,
                                                        TextEncoder encode,
                                                        FactEmbedderOptions options);
    ~FactEmbedder() override;
    FactEmbedder(const FactEmbedder&) = delete;
    FactEmbedder& operator=(const FactEmbedder&) = delete;

    // Returns once every change heard before the call has reached the indexes (or failed to
    // encode, which is logged), or after `timeout`; false on the timeout.
    bool wait_until_current(std::chrono::milliseconds timeout);
    // Returns once nothing is left to encode.
    void wait_idle();
    // Facts whose encoding failed so far (they stay out of the dense indexes until changed).
    std::size_t failures() const;

    void on_fact_added(const Fact& fact) override;
    void on_fact_changed(const Fact& fact) override;
    void on_fact_deleted(const std::string& user, FactId fact_id) override;
    void on_user_deleted(const std::string& user, const std::vector<FactId>& fact_ids) override;

  private:
    struct Job {
        std::string user;
        FactId id = 0;
        std::string text;
        std::uint64_t version = 0;
    };

    FactEmbedder(MemoryStore& store, std::vector<retrieval::DenseIndex*> indexes,
                 TextEncoder encode, FactEmbedderOptions options);
    void queue_locked(const Fact& fact);
    void run();
    // Indexes the user's facts that have a stored vector; queues the rest for encoding.
    void load_stored(const std::string& user, std::vector<Job> jobs);
    void encode_batch(std::vector<Job> jobs);
    // Puts the vector into every index when `job` is still the fact's latest version.
    void index_if_current(const Job& job, std::span<const float> vector);
    // The job is done (indexed, stale or failed).
    void finish_locked(const Job& job);

    MemoryStore& store_;
    std::vector<retrieval::DenseIndex*> indexes_;
    TextEncoder encode_;
    FactEmbedderOptions options_;

    mutable std::mutex mutex_;
    std::condition_variable wake_, idle_;
    bool replaying_ = false;  // inside attach's add_listener: facts already stored
    std::map<std::string, std::vector<Job>> replayed_;  // by user, before any encoding
    std::deque<Job> queue_;
    std::unordered_map<FactId, std::uint64_t> version_;  // the latest version of each live fact
    std::uint64_t next_version_ = 0;
    std::multiset<std::uint64_t> pending_;  // versions of the jobs not yet done
    std::size_t failures_ = 0;
    bool stop_ = false;
    std::thread worker_;  // last: it uses the members above
};

}  // namespace inferscale::memory
