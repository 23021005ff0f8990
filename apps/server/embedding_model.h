#pragma once
// EmbeddingModel: the sentence encoder the server answers POST /v1/embeddings with, on a
// backend of its own (the engine's backend belongs to its step loop), one request at a time.
// Every encoding runs on one thread of the model's own, whichever thread asks: an OpenMP
// runtime keeps a team of threads for each thread that starts a parallel region, for as long
// as that thread lives, so encodings run on the server's many HTTP threads would leave a team
// beside each of them.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "embed/sentence_encoder.h"
#include "engine/backend_choice.h"

namespace inferscale::server {

class EmbeddingModel {
  public:
    // Loads the sentence-transformers folder `dir` onto a new backend of `choice`'s device.
    // Errors: the backend cannot be opened (no CUDA), or SentenceEncoder::load's.
    static Result<std::unique_ptr<EmbeddingModel>> load(const std::string& dir,
                                                        const engine::BackendChoice& choice);
    ~EmbeddingModel();
    EmbeddingModel(const EmbeddingModel&) = delete;
    EmbeddingModel& operator=(const EmbeddingModel&) = delete;

    const std::string& id() const { return encoder_->id(); }
    // The device it was loaded on, for other backends that should sit beside it.
    const engine::BackendChoice& choice() const { return choice_; }
    std::int64_t dim() const { return encoder_->dim(); }
    // Token ids of each text as the model reads them (truncated to its max_seq_length).
    std::vector<std::vector<std::int32_t>> tokenize(std::span<const std::string> texts) const;
    // Embeddings of the tokenized texts, [ids.size(), dim()] f32, unit length; serialized
    // between callers and run on the model's thread.
    Result<std::vector<float>> encode(std::span<const std::vector<std::int32_t>> ids);
    // tokenize, then encode.
    Result<std::vector<float>> embed(std::span<const std::string> texts);

  private:
    EmbeddingModel();
    // Runs each job handed over by encode until the destructor stops it.
    void run();

    engine::BackendChoice choice_;
    std::unique_ptr<tensor::Backend> backend_;
    std::unique_ptr<embed::SentenceEncoder> encoder_;  // uses backend_
    std::mutex callers_;  // one encode at a time
    std::mutex mutex_;    // guards job_, done_ and stop_
    std::condition_variable wake_, finished_;
    std::function<void()> job_;
    bool done_ = false;
    bool stop_ = false;
    std::thread worker_;  // last: it uses the members above
};

}  // namespace inferscale::server
