#pragma once
// A stand-in embedding model for tests of what carries embeddings (indexes, retrievers): a unit
// vector of the text's letter counts, bucketed by code unit modulo `dim`. Texts with the same
// letters point the same way; nothing about meaning.

#include <cmath>
#include <cstddef>
#include <string_view>
#include <vector>

namespace inferscale::retrieval::testing {

inline std::vector<float> letter_embedding(std::string_view text, std::size_t dim) {
    std::vector<float> v(dim, 0.0f);
    for (unsigned char c : text) v[c % dim] += 1.0f;
    double norm = 0;
    for (float x : v) norm += double(x) * x;
    for (float& x : v) x = static_cast<float>(x / std::sqrt(norm));
    return v;
}

}  // namespace inferscale::retrieval::testing
