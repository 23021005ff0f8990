#pragma once
// Reciprocal-rank fusion (Cormack, Clarke & Buettcher, SIGIR 2009): hybrid retrieval from ranked
// lists whose scores are not comparable (BM25 and dense dot products).
//
//   score(d) = sum over the lists l that hold d of 1 / (c + rank_l(d)),   rank 1 for the best
//
// summed in list order. A fact that appears twice in one list counts at its first rank. Only ranks
// matter: the lists' own scores are ignored.

#include <cstddef>
#include <span>
#include <vector>

#include "retrieval/hit.h"

namespace inferscale::retrieval {

// The paper's constant: it damps the weight of the very top ranks of any single list.
inline constexpr double kRankFusionC = 60.0;

// The at most k facts with the largest fused score, best first, ties by ascending fact id. Each
// list is best first (a Bm25Index, VectorIndex or FactRetriever result). c > 0.
std::vector<Hit> reciprocal_rank_fusion(std::span<const std::vector<Hit>> lists, std::size_t k,
                                        double c = kRankFusionC);

}  // namespace inferscale::retrieval
