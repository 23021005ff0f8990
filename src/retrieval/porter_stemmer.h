#pragma once
// The Porter stemmer (M. F. Porter, "An algorithm for suffix stripping", Program 14(3), 1980),
// as the Snowball project's "porter" stemmer defines it (PyPI snowballstemmer, stemmer("porter"),
// which tools/make_porter_fixture.py uses to make the golden test fixture):
//   - consonant-y: a "y" at the start of the word or after a vowel counts as a consonant;
//   - the regions R1 and R2 (where m > 0 and m > 1 hold) are found once, on the whole word;
//   - step 1b undoubles only bb dd ff gg mm nn pp rr tt (the paper's "*d and not (*L or *S or *Z)"
//     would also undouble cc, hh, jj, kk, qq, vv, ww, xx, yy: "revving" stays "revv");
//   - words of one or two letters are stemmed too ("is" -> "i").
// The stemmer knows lowercase ASCII letters only; lexical_terms() gives it no other words.

#include <string>
#include <string_view>

namespace inferscale::retrieval {

// The stem of `word`, which must consist of 'a'..'z' only (anything else comes back unchanged).
std::string porter_stem(std::string_view word);

}  // namespace inferscale::retrieval
