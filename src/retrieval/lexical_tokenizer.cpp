#include "retrieval/lexical_tokenizer.h"

#include <algorithm>
#include <array>

#include "retrieval/porter_stemmer.h"

namespace inferscale::retrieval {
namespace {

// Lucene's EnglishAnalyzer default stop set, sorted for binary search.
constexpr std::array<std::string_view, 33> kStopwords = {
    "a",    "an",    "and",   "are",  "as",   "at",   "be",    "but",  "by",
    "for",  "if",    "in",    "into", "is",   "it",   "no",    "not",  "of",
    "on",   "or",    "such",  "that", "the",  "their", "then", "there", "these",
    "they", "this",  "to",    "was",  "will", "with"};

bool is_term_byte(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

char ascii_lower(unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
}

}  // namespace

bool is_stopword(std::string_view term) {
    return std::binary_search(kStopwords.begin(), kStopwords.end(), term);
}

std::vector<std::string> lexical_terms(std::string_view text, LexicalOptions options) {
    std::vector<std::string> terms;
    std::string current;
    auto flush = [&] {
        if (!current.empty() && !is_stopword(current))
            terms.push_back(options.stem && current.size() > 2 ? porter_stem(current) : current);
        current.clear();
    };
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if (is_term_byte(c)) {
            current.push_back(ascii_lower(c));
        } else {
            flush();
        }
    }
    flush();
    return terms;
}

}  // namespace inferscale::retrieval
