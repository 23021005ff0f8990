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
        if (cp == 0x130) {
            out += "i\u0307";  // İ: the one unconditional one-to-two lowercase mapping (Rust's)
        } else {
            append_utf8(out,
                        static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
        }
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

// The ideograph blocks BERT's Chinese-character rule covers (not Hangul, kana or CJK symbols).
bool is_cjk_ideograph(char32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// HF's "other" categories, which clean_text drops (tab, newline and carriage return excepted).
bool is_bert_control(char32_t cp) {
    if (cp == '\t' || cp == '\n' || cp == '\r') return false;
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
        case UTF8PROC_CATEGORY_CC:
        case UTF8PROC_CATEGORY_CF:
        case UTF8PROC_CATEGORY_CN:
        case UTF8PROC_CATEGORY_CO:
        case UTF8PROC_CATEGORY_CS: return true;
        default: return false;
    }
}

// Rewrites `text` one code point at a time: `f` appends what each code point becomes.
template <typename F>
std::string map_code_points(std::string_view text, F f) {
    std::string out;
    out.reserve(text.size());
    std::size_t pos = 0;
    while (pos < text.size()) {
        char32_t cp = 0;
        const std::size_t n = utf8_sequence_at(text, pos, &cp);
        if (n == 0) break;
        f(cp, out);
        pos += n;
    }
    return out;
}

std::string bert_normalize(std::string_view text, const BertNormalizerOptions& o) {
    std::string s(text);
    if (o.clean_text) {
        s = map_code_points(s, [](char32_t cp, std::string& out) {
            if (cp == 0 || cp == kReplacementChar || is_bert_control(cp)) return;
            append_utf8(out, is_unicode_whitespace(cp) ? U' ' : cp);
        });
    }
    if (o.handle_chinese_chars) {
        s = map_code_points(s, [](char32_t cp, std::string& out) {
            const bool cjk = is_cjk_ideograph(cp);
            if (cjk) out.push_back(' ');
            append_utf8(out, cp);
            if (cjk) out.push_back(' ');
        });
    }
    if (o.strip_accents) {
        s = map_code_points(
            unicode_normalize(s, UTF8PROC_DECOMPOSE), [](char32_t cp, std::string& out) {
                if (utf8proc_category(static_cast<utf8proc_int32_t>(cp)) != UTF8PROC_CATEGORY_MN)
                    append_utf8(out, cp);
            });
    }
    if (o.lowercase) s = lowercase(s);
    return s;
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
            case NormalizerStep::Kind::Bert: s = bert_normalize(s, step.bert); break;
        }
    }
    return s;
}

}  // namespace inferscale::tokenizer
