#pragma once
// Hit: what every retrieval method (lexical, dense, fused) ranks, best first.

#include <cstdint>

namespace inferscale::retrieval {

// The store's fact id (memory::FactId is the same type; retrieval ranks below memory).
using FactId = std::int64_t;

struct Hit {
    FactId fact_id = 0;
    double score = 0.0;  // higher is better; only comparable within one search
    bool operator==(const Hit&) const = default;
};

}  // namespace inferscale::retrieval
