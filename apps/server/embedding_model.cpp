#include "apps/server/embedding_model.h"

namespace inferscale::server {

EmbeddingModel::EmbeddingModel() : worker_([this] { run(); }) {}

EmbeddingModel::~EmbeddingModel() {
    {
        const std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_one();
    worker_.join();
}

void EmbeddingModel::run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        wake_.wait(lock, [this] { return stop_ || job_; });
        if (stop_) return;
        std::function<void()> job = std::move(job_);
        job_ = nullptr;
        lock.unlock();
        job();
        lock.lock();
        done_ = true;
        finished_.notify_one();
    }
}

Result<std::unique_ptr<EmbeddingModel>> EmbeddingModel::load(const std::string& dir,
                                                             const engine::BackendChoice& choice) {
    std::unique_ptr<EmbeddingModel> m(new EmbeddingModel());
    m->choice_ = choice;
    m->backend_ = IS_TRY(engine::open_backend(choice)).backend;
    m->encoder_ = IS_TRY(embed::SentenceEncoder::load(dir, *m->backend_));
    return m;
}

std::vector<std::vector<std::int32_t>> EmbeddingModel::tokenize(
    std::span<const std::string> texts) const {
    std::vector<std::vector<std::int32_t>> ids;
    ids.reserve(texts.size());
    for (const std::string& text : texts) ids.push_back(encoder_->tokenize(text));
    return ids;
}

Result<std::vector<float>> EmbeddingModel::encode(std::span<const std::vector<std::int32_t>> ids) {
    std::vector<float> out(ids.size() * static_cast<std::size_t>(encoder_->dim()));
    const std::lock_guard<std::mutex> one_caller(callers_);
    Status status;
    std::unique_lock<std::mutex> lock(mutex_);
    job_ = [&] { status = encoder_->encode_ids(ids, out); };
    done_ = false;
    wake_.notify_one();
    finished_.wait(lock, [this] { return done_; });
    lock.unlock();
    IS_RETURN_IF_ERROR(status);
    return out;
}

Result<std::vector<float>> EmbeddingModel::embed(std::span<const std::string> texts) {
    return encode(tokenize(texts));
}

}  // namespace inferscale::server
