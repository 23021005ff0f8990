#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "tokenizer/tokenizer_model.h"
#include "tokenizer/utf8.h"

namespace inferscale::tokenizer {
namespace {

// Tokens that end a turn across the families we serve.
constexpr std::string_view kEndOfTurnTokens[] = {
    "</s>", "<|endoftext|>", "<|end_of_text|>", "<|eot_id|>", "<|eom_id|>", "<|im_end|>",
    "<end_of_turn>", "<|end|>",
};
constexpr std::string_view kEosCandidates[] = {"</s>", "<|end_of_text|>", "<|endoftext|>",
                                               "<|eot_id|>", "<|im_end|>"};
constexpr std::string_view kBosCandidates[] = {"<s>", "<|begin_of_text|>", "<|startoftext|>"};

}  // namespace

Result<Tokenizer> make_tokenizer(std::shared_ptr<TokenizerModel> model) {
    if (!model->subword) return make_error("tokenizer has no model");
    // Normalized added tokens are searched for in normalized text, so normalize them too.
    const auto& tokens = model->added.tokens();
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        if (tokens[i].normalized && !model->normalizer.empty()) {
            model->added.set_match_text(static_cast<std::int32_t>(i),
                                        model->normalizer.normalize(tokens[i].content));
        }
    }
    auto lookup = [&](std::string_view text) -> std::int32_t {
        if (const AddedToken* t = model->added.find_by_content(text)) return t->id;
        return model->subword->token_to_id(text).value_or(-1);
    };
    if (model->bos_id < 0) {
        for (std::string_view c : kBosCandidates) {
            if ((model->bos_id = lookup(c)) >= 0) break;
        }
    }
    if (model->eos_id < 0) {
        for (std::string_view c : kEosCandidates) {
            if ((model->eos_id = lookup(c)) >= 0) break;
        }
    }
    if (model->eos_id >= 0) model->end_of_generation.push_back(model->eos_id);
    for (std::string_view c : kEndOfTurnTokens) {
        const std::int32_t id = lookup(c);
        if (id >= 0) model->end_of_generation.push_back(id);
    }
    return Tokenizer(std::move(model));
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                            bool parse_special) const {
    return encode_ids(text, add_special, parse_special, model_->truncation);
}

std::vector<std::int32_t> Tokenizer::encode_truncated(std::string_view text, std::size_t max_length,
                                                      bool add_special) const {
    return encode_ids(text, add_special, /*parse_special=*/true, max_length);
}

std::size_t Tokenizer::truncation_length() const { return model_->truncation; }

std::vector<std::int32_t> Tokenizer::encode_ids(std::string_view input, bool add_special,
                                                bool parse_special, std::size_t max_length) const {
    const TokenizerModel& m = *model_;
    const std::string text = sanitize_utf8(input);
    std::vector<std::int32_t> ids;
    if (add_special) ids = m.prefix_ids;
    const bool match_normalized = m.added.has_normalized_tokens();
    bool after_special = true;
    for (const Segment& segment : m.added.split(text, /*normalized=*/false, parse_special)) {
        if (segment.id >= 0) {
            ids.push_back(segment.id);
            after_special = true;
            continue;
        }
        std::string raw = segment.text;
        if (m.space_prefix_after_special && after_special) raw.insert(raw.begin(), ' ');
        after_special = false;
        const std::string normalized = m.normalizer.normalize(raw);
        std::vector<Segment> parts;
        if (match_normalized) {
            parts = m.added.split(normalized, /*normalized=*/true, parse_special);
        } else {
            parts.push_back({normalized, -1, 0});
        }
        for (Segment& part : parts) {
            if (part.id >= 0) {
                ids.push_back(part.id);
                continue;
            }
            const bool at_start = segment.offset == 0 && part.offset == 0;
            for (const Piece& piece : m.pre_tokenizer.split(std::move(part.text), at_start)) {
                m.subword->encode(piece.text, ids);
            }
        }
    }
    if (max_length > 0) {
        const std::size_t specials = add_special ? m.prefix_ids.size() + m.suffix_ids.size() : 0;
        const std::size_t keep = max_length > specials ? max_length - specials : 0;
        const std::size_t prefix = add_special ? m.prefix_ids.size() : 0;
        if (ids.size() > prefix + keep) ids.resize(prefix + keep);
    }
    if (add_special) ids.insert(ids.end(), m.suffix_ids.begin(), m.suffix_ids.end());
    return ids;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special) const {
    return decode_ids(ids, skip_special, /*raw_bytes=*/false);
}

std::string Tokenizer::decode_ids(std::span<const std::int32_t> ids, bool skip_special,
                                  bool raw_bytes) const {
    const TokenizerModel& m = *model_;
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (std::int32_t id : ids) {
        if (const AddedToken* t = m.added.find_by_id(id)) {
            if (!(skip_special && t->special)) tokens.push_back(t->content);
            continue;
        }
        const std::string_view text = m.subword->id_to_token(id);
        if (!text.empty()) tokens.emplace_back(text);
    }
    return m.decoder.decode(std::move(tokens), raw_bytes);
}

std::string Tokenizer::decode_piece(std::int32_t id) const { return piece(id, false); }

std::string Tokenizer::token_bytes(std::int32_t id) const { return piece(id, true); }

std::string Tokenizer::piece(std::int32_t id, bool raw_bytes) const {
    const std::int32_t one[] = {id};
    const std::optional<std::int32_t> anchor = token_id("a");
    if (!anchor) return decode_ids(one, false, raw_bytes);
    const std::int32_t both[] = {*anchor, id};
    const std::string lead = decode_ids(std::span(both, 1), false, raw_bytes);
    std::string text = decode_ids(both, false, raw_bytes);
    if (lead.empty() || text.compare(0, lead.size(), lead) != 0)
        return decode_ids(one, false, raw_bytes);
    return text.substr(lead.size());
}

std::int64_t Tokenizer::vocab_size() const {
    std::int64_t size = model_->subword->size();
    for (const AddedToken& t : model_->added.tokens())
        size = std::max<std::int64_t>(size, t.id + 1);
    return size;
}

std::int32_t Tokenizer::bos_id() const { return model_->bos_id; }
std::int32_t Tokenizer::eos_id() const { return model_->eos_id; }

bool Tokenizer::is_end_of_generation(std::int32_t id) const {
    const auto& ends = model_->end_of_generation;
    return std::find(ends.begin(), ends.end(), id) != ends.end();
}

std::optional<std::int32_t> Tokenizer::token_id(std::string_view token_text) const {
    if (const AddedToken* t = model_->added.find_by_content(token_text)) return t->id;
    return model_->subword->token_to_id(token_text);
}

std::string_view Tokenizer::token_text(std::int32_t id) const {
    if (const AddedToken* t = model_->added.find_by_id(id)) return t->content;
    return model_->subword->id_to_token(id);
}

bool Tokenizer::is_special(std::int32_t id) const {
    const AddedToken* t = model_->added.find_by_id(id);
    return t != nullptr && t->special;
}

}  // namespace inferscale::tokenizer
