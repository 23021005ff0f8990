#pragma once
// Hit and Retriever: what every retrieval method (lexical, vector) hands the serving path.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace inferscale::retrieval {

// The store's fact id (memory::FactId is the same type; retrieval ranks below memory).
using FactId = std::int64_t;

struct Hit {
    FactId fact_id = 0;
    double score = 0.0;  // higher is better; only comparable within one search
    bool operator==(const Hit&) const = default;
};

class Retriever {
  public:
    virtual ~Retriever() = default;

    // The at most k best facts of `user` for `query`, best first, ties by ascending fact id so
    // results are reproducible. Never returns another user's fact. Empty for an unknown user,
    // k == 0, or when nothing matches. Safe to call concurrently with updates.
    virtual std::vector<Hit> search(std::string_view user, std::string_view query,
                                    std::size_t k) const = 0;
};

}  // namespace inferscale::retrieval
