#include "retrieval/rank_fusion.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "base/check.h"

namespace inferscale::retrieval {

std::vector<Hit> reciprocal_rank_fusion(std::span<const std::vector<Hit>> lists, std::size_t k,
                                        double c) {
    IS_CHECK(c > 0.0) << "c " << c;
    if (k == 0) return {};
    std::unordered_map<FactId, double> fused;
    std::unordered_set<FactId> seen;
    for (const std::vector<Hit>& list : lists) {
        seen.clear();
        for (std::size_t i = 0; i < list.size(); ++i) {
            if (!seen.insert(list[i].fact_id).second) continue;
            fused[list[i].fact_id] += 1.0 / (c + static_cast<double>(i + 1));
        }
    }
    std::vector<Hit> hits;
    hits.reserve(fused.size());
    for (const auto& [fact_id, score] : fused) hits.push_back({fact_id, score});
    const auto best_first = [](const Hit& a, const Hit& b) {
        return a.score != b.score ? a.score > b.score : a.fact_id < b.fact_id;
    };
    const std::size_t keep = std::min(k, hits.size());
    std::partial_sort(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(keep), hits.end(),
                      best_first);
    hits.resize(keep);
    return hits;
}

}  // namespace inferscale::retrieval
