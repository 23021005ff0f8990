#include <string_view>

#include "tokenizer/tokenizer.h"

namespace inferscale::tokenizer {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

bool ends_with_replacement(const std::string& s) {
    return s.size() >= kReplacement.size() &&
           s.compare(s.size() - kReplacement.size(), kReplacement.size(), kReplacement) == 0;
}

}  // namespace

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string IncrementalDecoder::push(std::int32_t id) {
    ids_.push_back(id);
    const std::span<const std::int32_t> all(ids_);
    const std::string committed = tokenizer_.decode(all.first(read_offset_), skip_special_);
    const std::string text = tokenizer_.decode(all, skip_special_);
    // A trailing U+FFFD is most likely a character whose remaining bytes are still to come.
    if (text.size() <= committed.size() || ends_with_replacement(text)) return {};
    std::string out = text.substr(committed.size());
    // The new window starts at the previous commit point: one id of context keeps decoders that
    // treat the first token specially (leading-space strip) consistent with a full decode.
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(read_offset_));
    read_offset_ = ids_.size();
    return out;
}

std::string IncrementalDecoder::flush() {
    const std::span<const std::int32_t> all(ids_);
    const std::string committed = tokenizer_.decode(all.first(read_offset_), skip_special_);
    const std::string text = tokenizer_.decode(all, skip_special_);
    ids_.clear();
    read_offset_ = 0;
    return text.size() > committed.size() ? text.substr(committed.size()) : std::string();
}

}  // namespace inferscale::tokenizer
