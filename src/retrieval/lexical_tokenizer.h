#pragma once
// The tokenizer of lexical retrieval (BM25); unrelated to the model's tokenizer.
//
// Rules, chosen to be simple enough to reproduce in a few lines of Python
// (tools/make_bm25_fixture.py does):
//   1. ASCII letters are lowercased; other bytes are kept as they are.
//   2. A term is a maximal run of ASCII letters, ASCII digits and non-ASCII bytes (>= 0x80), so
//      UTF-8 words such as "café" or "東京" stay whole; everything else separates terms.
//   3. Terms in Lucene's English stop set (33 words: "a", "the", "of", ...) are dropped.
//   4. With `stem` (the default), a term of three or more ASCII letters becomes its Porter stem
//      (retrieval/porter_stemmer.h): "paints", "painting" and "painted" are all "paint",
//      "allergies" and "allergy" are "allergi". Terms with digits or non-ASCII bytes stay whole,
//      and so do terms of one or two letters (as in Porter's own C implementation and NLTK's:
//      the algorithm would stem "s" to nothing and "us" to "u"). Porter keeps some related
//      words apart: "allergic" is "allerg", so "allergy" does not match it.
// An index and the queries it answers must use the same options (Bm25Params::stem).

#include <string>
#include <string_view>
#include <vector>

namespace inferscale::retrieval {

struct LexicalOptions {
    bool stem = true;
};

// The terms of `text`, in order, repeats kept (BM25 counts them).
std::vector<std::string> lexical_terms(std::string_view text, LexicalOptions options = {});

// True for a term of the stop set; `term` must already be lowercase.
bool is_stopword(std::string_view term);

}  // namespace inferscale::retrieval
