#pragma once
// BertConfig: the shape of a sentence-transformers BERT encoder folder, read from its
// config.json (a BertModel with absolute positions and exact GELU), sentence_bert_config.json
// (max_seq_length) and 1_Pooling/config.json (which must ask for mean pooling).

#include <cstdint>
#include <string>

#include "base/result.h"

namespace inferscale::embed {

struct BertConfig {
    std::int64_t vocab_size = 0;
    std::int64_t hidden = 0;
    std::int64_t layers = 0;
    std::int64_t heads = 0;
    std::int64_t intermediate = 0;
    std::int64_t max_positions = 0;  // rows of the position table
    std::int64_t type_vocab_size = 0;
    float layer_norm_eps = 1e-12f;
    // Tokens a text keeps, [CLS] and [SEP] included (sentence_bert_config.json; without it
    // max_positions).
    std::int64_t max_seq_length = 0;

    std::int64_t head_dim() const { return hidden / heads; }
};

// Errors name the file and field: missing or malformed files, a model_type other than bert,
// an activation other than gelu, relative position embeddings, pooling other than mean,
// max_seq_length beyond the position table.
Result<BertConfig> read_bert_config(const std::string& dir);

}  // namespace inferscale::embed
