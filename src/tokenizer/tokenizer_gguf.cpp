// Tokenizer::from_vocab: builds the pipeline from a GGUF vocabulary (VocabData), choosing the
// same pre-tokenizer, normalizer and decoder that the model's tokenizer.json would have.

#include "tokenizer/bpe_model.h"
#include "tokenizer/tokenizer_model.h"

namespace inferscale::tokenizer {
namespace {

constexpr const char* kMetaspace = "\xE2\x96\x81";  // ▁

TokenType type_at(const VocabData& v, std::size_t i) {
    return i < v.token_types.size() ? v.token_types[i] : TokenType::Normal;
}

// The splits a byte-level ("gpt2") GGUF vocabulary can name in tokenizer.ggml.pre, with the
// names llama.cpp's llama-vocab.cpp gives them. Any other name is refused, as llama.cpp
// refuses it: tokenizing with a split the vocabulary was not trained on would quietly give
// other ids than the model's own tokenizer.
enum class PreSplit { Gpt2, Llama3, Qwen2, Smollm };

constexpr const char* kKnownPre = "gpt-2, llama-bpe, llama3, llama-v3, qwen2, smollm";

Result<PreSplit> pre_split(const std::string& pre) {
    // A file without the key predates it; llama.cpp warns and splits with its own "default"
    // rule, this keeps GPT-2's split for such files, as it always did.
    if (pre.empty() || pre == "gpt-2") return PreSplit::Gpt2;
    if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") return PreSplit::Llama3;
    if (pre == "qwen2") return PreSplit::Qwen2;
    if (pre == "smollm") return PreSplit::Smollm;
    return make_error("unknown pre-tokenizer type '" + pre +
                      "' (GGUF tokenizer.ggml.pre); supported: " + kKnownPre);
}

Status add_byte_level_pre_tokenizer(PreSplit kind, BpeModel& bpe, TokenizerModel& m) {
    PreTokenizerStep byte_level;
    byte_level.kind = PreTokenizerStep::Kind::ByteLevel;
    std::string_view split_pattern;
    if (kind == PreSplit::Llama3) {
        split_pattern = kLlama3Pattern;
        bpe.set_ignore_merges(true);  // Llama 3's tokenizer.json sets ignore_merges
    } else if (kind == PreSplit::Qwen2) {
        split_pattern = kQwen2Pattern;
        m.normalizer.add({NormalizerStep::Kind::Nfc, {}, {}, false, false, {}});
    } else if (kind == PreSplit::Smollm) {
        PreTokenizerStep digits;
        digits.kind = PreTokenizerStep::Kind::Digits;
        digits.individual_digits = true;
        m.pre_tokenizer.add(std::move(digits));
    }
    if (!split_pattern.empty()) {
        PreTokenizerStep split;
        split.kind = PreTokenizerStep::Kind::Split;
        split.regex = IS_TRY(SplitRegex::compile(split_pattern));
        split.behavior = SplitBehavior::Isolated;
        m.pre_tokenizer.add(std::move(split));
    } else {
        // gpt-2 and smollm: ByteLevel with its own GPT-2 regex.
        byte_level.use_regex = true;
        byte_level.regex = IS_TRY(SplitRegex::compile(kGpt2Pattern));
    }
    m.pre_tokenizer.add(std::move(byte_level));
    m.decoder.add({DecoderStep::Kind::ByteLevel, {}, {}, PrependScheme::Always, 0, 0});
    return {};
}

Status build_gpt2(const VocabData& v, TokenizerModel& m) {
    const PreSplit split = IS_TRY(pre_split(v.pre));  // before the merges: the name says more
    auto bpe = std::make_unique<BpeModel>(v.tokens, BpeModel::Mode::MergeRanks);
    for (const std::string& merge : v.merges) {
        const std::size_t space = merge.find(' ', 1);
        if (space == std::string::npos) return make_error("bad GGUF merge '" + merge + "'");
        IS_RETURN_IF_ERROR(bpe->add_merge(merge.substr(0, space), merge.substr(space + 1)));
    }
    IS_RETURN_IF_ERROR(add_byte_level_pre_tokenizer(split, *bpe, m));
    m.subword = std::move(bpe);
    return {};
}

Status build_llama(const VocabData& v, TokenizerModel& m) {
    auto bpe = std::make_unique<BpeModel>(v.tokens, BpeModel::Mode::Scores);
    std::vector<bool> mergeable(v.tokens.size(), true);
    for (std::size_t i = 0; i < v.tokens.size(); ++i) {
        const TokenType t = type_at(v, i);
        mergeable[i] =
            t == TokenType::Normal || t == TokenType::UserDefined || t == TokenType::Undefined;
    }
    std::vector<float> scores = v.scores;
    scores.resize(v.tokens.size(), 0.0f);
    bpe->set_scores(std::move(scores), std::move(mergeable));
    if (v.unk_id >= 0) bpe->set_unk_id(static_cast<std::int32_t>(v.unk_id));
    bpe->set_byte_fallback(true);
    m.subword = std::move(bpe);
    m.space_prefix_after_special = v.add_space_prefix;
    m.normalizer.add({NormalizerStep::Kind::Replace, " ", kMetaspace, false, false, {}});
    m.decoder.add({DecoderStep::Kind::Replace, kMetaspace, " ", PrependScheme::Always, 0, 0});
    m.decoder.add({DecoderStep::Kind::ByteFallback, {}, {}, PrependScheme::Always, 0, 0});
    m.decoder.add({DecoderStep::Kind::Fuse, {}, {}, PrependScheme::Always, 0, 0});
    if (v.add_space_prefix) {
        m.decoder.add({DecoderStep::Kind::Strip, " ", {}, PrependScheme::Always, 1, 0});
    }
    return {};
}

}  // namespace

Result<Tokenizer> Tokenizer::from_vocab(const VocabData& vocab) {
    if (vocab.tokens.empty()) return make_error("GGUF vocabulary is empty");
    if (!vocab.token_types.empty() && vocab.token_types.size() != vocab.tokens.size()) {
        return make_error("GGUF token_type has a different length than tokens");
    }
    auto m = std::make_shared<TokenizerModel>();
    if (vocab.model == "gpt2") {
        IS_RETURN_IF_ERROR(build_gpt2(vocab, *m));
    } else if (vocab.model == "llama") {
        IS_RETURN_IF_ERROR(build_llama(vocab, *m));
    } else {
        return make_error("unsupported GGUF tokenizer model '" + vocab.model + "'");
    }
    const auto n = static_cast<std::int64_t>(vocab.tokens.size());
    auto valid = [n](std::int64_t id) { return id >= 0 && id < n; };
    for (std::size_t i = 0; i < vocab.tokens.size(); ++i) {
        const TokenType t = type_at(vocab, i);
        if (t != TokenType::Control && t != TokenType::UserDefined && t != TokenType::Unknown)
            continue;
        AddedToken token;
        token.content = vocab.tokens[i];
        token.id = static_cast<std::int32_t>(i);
        token.special = t != TokenType::UserDefined;
        m->added.add(std::move(token));
    }
    if (valid(vocab.bos_id)) m->bos_id = static_cast<std::int32_t>(vocab.bos_id);
    if (valid(vocab.eos_id)) m->eos_id = static_cast<std::int32_t>(vocab.eos_id);
    if (vocab.add_bos && m->bos_id >= 0) m->prefix_ids.push_back(m->bos_id);
    return make_tokenizer(std::move(m));
}

}  // namespace inferscale::tokenizer
