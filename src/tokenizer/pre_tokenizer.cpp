#include "tokenizer/pre_tokenizer.h"

#include <utf8proc.h>

#include <cctype>
#include <utility>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace inferscale::tokenizer {
namespace {

using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;

// Cuts `piece` by delimiter ranges according to HF's SplitDelimiterBehavior.
void split_by(const Piece& piece, const Ranges& delims, SplitBehavior behavior,
              std::vector<Piece>& out) {
    struct Part {
        std::size_t begin, end;
        bool delim;
    };
    std::vector<Part> parts;
    std::size_t pos = 0;
    for (const auto& [b, e] : delims) {
        if (b > pos) parts.push_back({pos, b, false});
        parts.push_back({b, e, true});
        pos = e;
    }
    if (pos < piece.text.size()) parts.push_back({pos, piece.text.size(), false});

    std::vector<std::pair<std::size_t, std::size_t>> spans;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        const Part& p = parts[i];
        switch (behavior) {
            case SplitBehavior::Removed:
                if (!p.delim) spans.emplace_back(p.begin, p.end);
                break;
            case SplitBehavior::Isolated: spans.emplace_back(p.begin, p.end); break;
            case SplitBehavior::MergedWithPrevious:
                if (p.delim && !spans.empty() && spans.back().second == p.begin && i > 0 &&
                    !parts[i - 1].delim) {
                    spans.back().second = p.end;
                } else {
                    spans.emplace_back(p.begin, p.end);
                }
                break;
            case SplitBehavior::MergedWithNext:
                if (!p.delim && i > 0 && parts[i - 1].delim && !spans.empty() &&
                    spans.back().second == p.begin) {
                    spans.back().second = p.end;
                } else {
                    spans.emplace_back(p.begin, p.end);
                }
                break;
            case SplitBehavior::Contiguous:
                if (p.delim && i > 0 && parts[i - 1].delim && !spans.empty()) {
                    spans.back().second = p.end;
                } else {
                    spans.emplace_back(p.begin, p.end);
                }
                break;
        }
    }
    for (const auto& [b, e] : spans) {
        if (e > b) out.push_back({piece.text.substr(b, e - b), piece.at_text_start && b == 0});
    }
}

Ranges invert_ranges(const Ranges& matches, std::size_t size) {
    Ranges out;
    std::size_t pos = 0;
    for (const auto& [b, e] : matches) {
        if (b > pos) out.emplace_back(pos, b);
        pos = e;
    }
    if (pos < size) out.emplace_back(pos, size);
    return out;
}

// Rust's char::is_numeric: general categories Nd, Nl and No.
bool is_numeric(char32_t cp) {
    const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL ||
           cat == UTF8PROC_CATEGORY_NO;
}

Ranges digit_ranges(std::string_view text, bool individual) {
    Ranges out;
    std::size_t pos = 0;
    while (pos < text.size()) {
        char32_t cp = 0;
        std::size_t n = utf8_sequence_at(text, pos, &cp);
        if (n == 0) n = 1;
        if (is_numeric(cp)) {
            if (!individual && !out.empty() && out.back().second == pos) {
                out.back().second = pos + n;
            } else {
                out.emplace_back(pos, pos + n);
            }
        }
        pos += n;
    }
    return out;
}

// BertPreTokenizer's punctuation: ASCII punctuation (which includes symbols such as $ + < = > ^
// ` |) and the Unicode punctuation categories.
bool is_bert_punctuation(char32_t cp) {
    if (cp < 0x80) return cp > 0x20 && cp < 0x7F && !std::isalnum(static_cast<int>(cp));
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
        case UTF8PROC_CATEGORY_PC:
        case UTF8PROC_CATEGORY_PD:
        case UTF8PROC_CATEGORY_PS:
        case UTF8PROC_CATEGORY_PE:
        case UTF8PROC_CATEGORY_PI:
        case UTF8PROC_CATEGORY_PF:
        case UTF8PROC_CATEGORY_PO: return true;
        default: return false;
    }
}

// The code points of `text` for which `pred` holds, one range each.
template <typename Pred>
Ranges code_point_ranges(std::string_view text, Pred pred) {
    Ranges out;
    std::size_t pos = 0;
    while (pos < text.size()) {
        char32_t cp = 0;
        std::size_t n = utf8_sequence_at(text, pos, &cp);
        if (n == 0) n = 1;
        if (pred(cp)) out.emplace_back(pos, pos + n);
        pos += n;
    }
    return out;
}

std::string replace_spaces(std::string_view text, std::string_view with) {
    std::string out;
    for (char c : text) {
        if (c == ' ') {
            out.append(with);
        } else {
            out.push_back(c);
        }
    }
    return out;
}

void apply_step(const PreTokenizerStep& step, const Piece& piece, std::vector<Piece>& out) {
    switch (step.kind) {
        case PreTokenizerStep::Kind::Split: {
            Ranges matches = step.regex.find_all(piece.text);
            if (step.invert) matches = invert_ranges(matches, piece.text.size());
            split_by(piece, matches, step.behavior, out);
            return;
        }
        case PreTokenizerStep::Kind::Digits:
            split_by(piece, digit_ranges(piece.text, step.individual_digits),
                     step.individual_digits ? SplitBehavior::Isolated : SplitBehavior::Contiguous,
                     out);
            return;
        case PreTokenizerStep::Kind::ByteLevel: {
            Piece p = piece;
            if (step.add_prefix_space && (p.text.empty() || p.text[0] != ' '))
                p.text = " " + p.text;
            std::vector<Piece> parts;
            if (step.use_regex) {
                split_by(p, step.regex.find_all(p.text), SplitBehavior::Isolated, parts);
            } else if (!p.text.empty()) {
                parts.push_back(std::move(p));
            }
            for (Piece& part : parts)
                out.push_back({byte_level_encode(part.text), part.at_text_start});
            return;
        }
        case PreTokenizerStep::Kind::Bert: {
            std::vector<Piece> words;
            split_by(piece, code_point_ranges(piece.text, is_unicode_whitespace),
                     SplitBehavior::Removed, words);
            for (const Piece& word : words) {
                split_by(word, code_point_ranges(word.text, is_bert_punctuation),
                         SplitBehavior::Isolated, out);
            }
            return;
        }
        case PreTokenizerStep::Kind::Metaspace: {
            Piece p{replace_spaces(piece.text, step.replacement), piece.at_text_start};
            const bool starts = p.text.compare(0, step.replacement.size(), step.replacement) == 0;
            const bool prepend =
                !starts && (step.prepend_scheme == PrependScheme::Always ||
                            (step.prepend_scheme == PrependScheme::First && piece.at_text_start));
            if (prepend) p.text = step.replacement + p.text;
            if (!step.split) {
                if (!p.text.empty()) out.push_back(std::move(p));
                return;
            }
            Ranges delims;
            for (std::size_t at = p.text.find(step.replacement); at != std::string::npos;
                 at = p.text.find(step.replacement, at + step.replacement.size())) {
                delims.emplace_back(at, at + step.replacement.size());
            }
            split_by(p, delims, SplitBehavior::MergedWithNext, out);
            return;
        }
    }
}

}  // namespace

std::vector<Piece> PreTokenizer::split(std::string text, bool at_text_start) const {
    std::vector<Piece> pieces;
    if (!text.empty()) pieces.push_back({std::move(text), at_text_start});
    for (const PreTokenizerStep& step : steps_) {
        std::vector<Piece> next;
        for (const Piece& piece : pieces) apply_step(step, piece, next);
        pieces = std::move(next);
    }
    return pieces;
}

}  // namespace inferscale::tokenizer
