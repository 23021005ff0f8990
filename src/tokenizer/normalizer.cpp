#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "tokenizer/utf8.h"

namespace inferscale::tokenizer {
namespace {

std::string unicode_normalize(std::string_view text, int options) {
    if (text.empty()) return {};
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                     static_cast<utf8proc_ssize_t>(text.size()), &out,
                     static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
    if (n < 0) return std::string(text);  // cannot happen on valid UTF-8; keep text unchanged
    std::string result(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
    std::free(out);
    return result;
}

std::string lowercase(std::string_view text) {
    std::string out;
    std::size_t pos = 0;
    while (pos < text.size()) {
        char32_t cp = 0;
        const std::size_t n = utf8_sequence_at(text, pos, &cp);
        if (n == 0) break;
        append_utf8(out,
                    static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
        pos += n;
    }
    return out;
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
    if (from.empty()) return std::string(text);
    std::string out;
    std::size_t pos = 0;
    while (true) {
        const std::size_t hit = text.find(from, pos);
        if (hit == std::string_view::npos) break;
        out.append(text.substr(pos, hit - pos));
        out.append(to);
        pos = hit + from.size();
    }
    out.append(text.substr(pos));
    return out;
}

std::string strip(std::string_view text, bool left, bool right) {
    std::string stripped = python_strip(text);
    if (left && right) return stripped;
    // One-sided strip: locate the stripped core inside the original.
    const std::size_t core = stripped.empty() ? text.size() : text.find(stripped);
    if (left) return std::string(text.substr(core));
    if (right) return std::string(text.substr(0, core + stripped.size()));
    return std::string(text);
}

}  // namespace

std::string Normalizer::normalize(std::string_view text) const {
    std::string s(text);
    for (const NormalizerStep& step : steps_) {
        switch (step.kind) {
            case NormalizerStep::Kind::Nfc: s = unicode_normalize(s, UTF8PROC_COMPOSE); break;
            case NormalizerStep::Kind::Nfd: s = unicode_normalize(s, UTF8PROC_DECOMPOSE); break;
            case NormalizerStep::Kind::Nfkc:
                s = unicode_normalize(s, UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
                break;
            case NormalizerStep::Kind::Nfkd:
                s = unicode_normalize(s, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
                break;
            case NormalizerStep::Kind::Lowercase: s = lowercase(s); break;
            case NormalizerStep::Kind::Prepend:
                if (!s.empty()) s = step.a + s;  // HF prepends only to non-empty text
                break;
            case NormalizerStep::Kind::Replace: s = replace_all(s, step.a, step.b); break;
            case NormalizerStep::Kind::Strip: s = strip(s, step.left, step.right); break;
        }
    }
    return s;
}

}  // namespace inferscale::tokenizer
