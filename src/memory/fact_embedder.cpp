#include "memory/fact_embedder.h"

#include "base/check.h"
#include "base/log.h"

namespace inferscale::memory {

Result<std::unique_ptr<FactEmbedder>> FactEmbedder::attach(
    MemoryStore& store, std::vector<retrieval::DenseIndex*> indexes, TextEncoder encode,
    FactEmbedderOptions options) {
    IS_CHECK(options.dim > 0 && options.batch > 0 && !options.model.empty());
    for (const retrieval::DenseIndex* index : indexes) IS_CHECK_EQ(index->dim(), options.dim);
    std::unique_ptr<FactEmbedder> e(
        new FactEmbedder(store, std::move(indexes), std::move(encode), std::move(options)));
    {
        const std::lock_guard<std::mutex> lock(e->mutex_);
        e->replaying_ = true;
    }
    // The replay calls on_fact_added under the store's lock; the worker waits for it to end.
    const Status added = store.add_listener(e.get(), /*replay_existing=*/true);
    {
        const std::lock_guard<std::mutex> lock(e->mutex_);
        e->replaying_ = false;
    }
    e->wake_.notify_one();
    IS_RETURN_IF_ERROR(added);
    return e;
}

FactEmbedder::FactEmbedder(MemoryStore& store, std::vector<retrieval::DenseIndex*> indexes,
                           TextEncoder encode, FactEmbedderOptions options)
    : store_(store),
      indexes_(std::move(indexes)),
      encode_(std::move(encode)),
      options_(std::move(options)),
      worker_([this] { run(); }) {}

FactEmbedder::~FactEmbedder() {
    store_.remove_listener(this);
    {
        const std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_one();
    worker_.join();
}

void FactEmbedder::queue_locked(const Fact& fact) {
    const std::uint64_t v = ++next_version_;
    version_[fact.id] = v;
    pending_.insert(v);
    Job job{fact.user, fact.id, fact.text, v};
    if (replaying_)
        replayed_[fact.user].push_back(std::move(job));
    else
        queue_.push_back(std::move(job));
}

void FactEmbedder::on_fact_added(const Fact& fact) {
    {
        const std::lock_guard<std::mutex> lock(mutex_);
        queue_locked(fact);
    }
    wake_.notify_one();
}

void FactEmbedder::on_fact_changed(const Fact& fact) { on_fact_added(fact); }

void FactEmbedder::on_fact_deleted(const std::string& user, FactId fact_id) {
    const std::lock_guard<std::mutex> lock(mutex_);
    version_.erase(fact_id);
    for (retrieval::DenseIndex* index : indexes_) index->erase(fact_id);
}

void FactEmbedder::on_user_deleted(const std::string& user, const std::vector<FactId>& fact_ids) {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (FactId id : fact_ids) version_.erase(id);
    for (retrieval::DenseIndex* index : indexes_) index->erase_user(user);
}

bool FactEmbedder::wait_until_current(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    const std::uint64_t heard = next_version_;
    return idle_.wait_for(lock, timeout,
                          [&] { return pending_.empty() || *pending_.begin() > heard; });
}

void FactEmbedder::wait_idle() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return pending_.empty(); });
}

void FactEmbedder::finish_locked(const Job& job) {
    pending_.erase(pending_.find(job.version));
    idle_.notify_all();
}

std::size_t FactEmbedder::failures() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return failures_;
}

void FactEmbedder::run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        wake_.wait(lock, [this] {
            return stop_ || (!replaying_ && (!queue_.empty() || !replayed_.empty()));
        });
        if (stop_) return;
        if (!replayed_.empty()) {
            auto node = replayed_.extract(replayed_.begin());
            lock.unlock();
            load_stored(node.key(), std::move(node.mapped()));
        } else {
            std::vector<Job> batch;
            while (!queue_.empty() && batch.size() < options_.batch) {
                Job job = std::move(queue_.front());
                queue_.pop_front();
                // A later change of the same fact is queued behind: encode that one only.
                auto v = version_.find(job.id);
                if (v != version_.end() && v->second == job.version)
                    batch.push_back(std::move(job));
                else
                    finish_locked(job);
            }
            lock.unlock();
            if (!batch.empty()) encode_batch(std::move(batch));
        }
        lock.lock();
    }
}

void FactEmbedder::load_stored(const std::string& user, std::vector<Job> jobs) {
    auto stored = store_.list_embeddings(user, options_.model);
    std::unordered_map<FactId, std::vector<float>> by_id;
    if (stored.ok()) {
        for (FactEmbedding& e : *stored)
            if (e.vector.size() == options_.dim) by_id.emplace(e.id, std::move(e.vector));
    } else {
        IS_LOG(Warn) << "reading the stored embeddings of user " << user << ": "
                     << stored.error().message << "; encoding them again";
    }
    std::vector<Job> missing;
    for (Job& job : jobs) {
        auto it = by_id.find(job.id);
        if (it != by_id.end())
            index_if_current(job, it->second);
        else
            missing.push_back(std::move(job));
    }
    const std::lock_guard<std::mutex> lock(mutex_);
    for (Job& job : missing) queue_.push_back(std::move(job));
}

void FactEmbedder::encode_batch(std::vector<Job> jobs) {
    std::vector<std::string> texts;
    texts.reserve(jobs.size());
    for (const Job& job : jobs) texts.push_back(job.text);
    auto vectors = encode_(texts);
    if (!vectors.ok() || vectors->size() != jobs.size() * options_.dim) {
        IS_LOG(Warn) << "embedding " << jobs.size() << " facts with " << options_.model << ": "
                     << (vectors.ok() ? std::string("wrong output size") : vectors.error().message);
        const std::lock_guard<std::mutex> lock(mutex_);
        failures_ += jobs.size();
        for (const Job& job : jobs) finish_locked(job);
        return;
    }
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const std::span<const float> v(vectors->data() + i * options_.dim, options_.dim);
        // Fails only when the fact is gone since; then index_if_current skips it too.
        (void)store_.set_embedding(jobs[i].id, options_.model, v);
        index_if_current(jobs[i], v);
    }
}

void FactEmbedder::index_if_current(const Job& job, std::span<const float> vector) {
    const std::lock_guard<std::mutex> lock(mutex_);
    finish_locked(job);
    auto v = version_.find(job.id);
    if (v == version_.end() || v->second != job.version) return;
    for (retrieval::DenseIndex* index : indexes_) {
        if (Status put = index->put(job.user, job.id, vector); !put.ok()) {
            IS_LOG(Warn) << "indexing the embedding of fact " << job.id << ": "
                         << put.error().message;
        }
    }
}

}  // namespace inferscale::memory
