#pragma once
// The tokenizer of lexical retrieval (BM25); unrelated to the model's tokenizer.
//
// Rules, chosen to be simple enough to reproduce in a few lines of Python
// (tools/make_bm25_fixture.py does):
//   1. ASCII letters are lowercased; other bytes are kept as they are.
//   2. A term is a maximal run of ASCII letters, ASCII digits and non-ASCII bytes (>= 0x80), so
//      UTF-8 words such as "café" or "東京" stay whole; everything else separates terms.
//   3. Terms in Lucene's English stop set (33 words: "a", "the", "of", ...) are dropped.
// No stemming: "paint" does not match "paints".

#include <string>
#include <string_view>
#include <vector>

namespace inferscale::retrieval {

// The terms of `text`, in order, repeats kept (BM25 counts them).
std::vector<std::string> lexical_terms(std::string_view text);

// True for a term of the stop set; `term` must already be lowercase.
bool is_stopword(std::string_view term);

}  // namespace inferscale::retrieval
