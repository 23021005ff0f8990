#pragma once
// SentenceEncoder: a sentence-transformers BERT model (all-MiniLM-L6-v2) on a tensor::Backend:
// WordPiece tokens -> embeddings + LayerNorm -> encoder layers (bidirectional attention, exact
// GELU) -> mean of the last hidden states over each text's tokens ([CLS] and [SEP] included)
// -> L2-normalized, as sentence-transformers' Transformer, Pooling and Normalize modules do.
// Texts of a call are packed back to back (no padding) into batches of at most
// max_batch_tokens; the workspace is one allocation that grows to the largest batch seen. The
// residual stream, norms and attention are f32 on every backend; only the linears read the
// backend's activation dtype (bf16 on CUDA).
// Not thread-safe: one caller at a time (the server holds a mutex). Borrows the backend, which
// must outlive the encoder.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "embed/bert_config.h"
#include "tensor/backend.h"
#include "tokenizer/tokenizer.h"

namespace inferscale::embed {

struct SentenceEncoderOptions {
    // Tokens per forward pass, at most (a text longer than this still runs, alone).
    std::int64_t max_batch_tokens = 8192;
};

class SentenceEncoder {
  public:
    // Loads `dir` (config.json, model.safetensors, tokenizer.json, sentence_bert_config.json,
    // 1_Pooling/config.json). Errors: missing or malformed files, a model this encoder does not
    // run (read_bert_config), weights of the wrong shape, out of device memory.
    static Result<std::unique_ptr<SentenceEncoder>> load(const std::string& dir,
                                                         tensor::Backend& backend,
                                                         SentenceEncoderOptions options = {});
    ~SentenceEncoder();
    SentenceEncoder(const SentenceEncoder&) = delete;
    SentenceEncoder& operator=(const SentenceEncoder&) = delete;

    // The id clients name the model by: the sentence-transformers name of the folder
    // scripts/fetch_embedding_model.sh makes ("all-MiniLM-L6-v2"), else the folder's name.
    const std::string& id() const { return id_; }
    std::int64_t dim() const { return config_.hidden; }
    const BertConfig& config() const { return config_; }

    // The ids the model reads for `text`: [CLS] text [SEP], cut to max_seq_length.
    std::vector<std::int32_t> tokenize(std::string_view text) const;

    // Embeddings of `texts`, row-major [texts.size(), dim()] f32 into `out` (exactly that
    // size), each row of unit length. Errors: out of device memory growing the workspace.
    Status encode(std::span<const std::string> texts, std::span<float> out);
    // The same into a vector of its own.
    Result<std::vector<float>> embed(std::span<const std::string> texts);
    // The same from ids (each from tokenize(); none empty, none over max_seq_length).
    Status encode_ids(std::span<const std::vector<std::int32_t>> ids, std::span<float> out);

  private:
    struct Layer;
    struct Workspace;
    SentenceEncoder(tensor::Backend& backend, BertConfig config, tokenizer::Tokenizer tokenizer,
                    std::string id, SentenceEncoderOptions options);
    Status load_weights(const std::string& dir);
    // Runs one batch: `ids` packed back to back, `tokens` ids in all.
    Status run_batch(std::span<const std::vector<std::int32_t>> ids, std::int64_t tokens,
                     float* out);
    Status reserve(std::int64_t tokens, std::int64_t seqs);

    tensor::Backend& backend_;
    BertConfig config_;
    tokenizer::Tokenizer tokenizer_;
    std::string id_;
    SentenceEncoderOptions options_;
    std::vector<tensor::DeviceWeight> weights_;  // owns every uploaded weight
    tensor::Tensor word_embeddings_, position_embeddings_, type_embeddings_;
    tensor::Tensor embed_norm_weight_, embed_norm_bias_;
    std::vector<Layer> layers_;
    std::unique_ptr<Workspace> ws_;
};

}  // namespace inferscale::embed
