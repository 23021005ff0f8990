#pragma once
// FactRetriever: a user's facts for a query by one of three methods, the one object the serving
// path (engine, memory search, extraction) retrieves through.
//   bm25    Bm25Index (stemmed): only facts sharing a term with the query
//   dense   the query's embedding against the facts' (DenseIndex): every fact is a candidate
//   hybrid  reciprocal-rank fusion of the two lists, each kFusionDepth deep (or k, if deeper),
//           with c = kFusionC
// Dense search goes to the fast index (a device mirror) when there is one and k fits its
// max_k(), else to the exact host index; both rank alike.

#include <cstddef>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "retrieval/bm25_index.h"
#include "retrieval/dense_index.h"
#include "retrieval/hit.h"

namespace inferscale::retrieval {

enum class RetrievalMethod { Bm25, Dense, Hybrid };

const char* retrieval_method_name(RetrievalMethod method);  // "bm25", "dense", "hybrid"
// An Error names the accepted values.
Result<RetrievalMethod> parse_retrieval_method(std::string_view name);

// The query's embedding: unit length, the dense indexes' dim. Called concurrently.
using QueryEmbedder = std::function<Result<std::vector<float>>(std::string_view text)>;

struct DenseRetrieval {
    DenseIndex* exact = nullptr;  // every fact embedding, any k
    DenseIndex* fast = nullptr;   // optional: the same embeddings where search is faster
    QueryEmbedder embed;
};

class FactRetriever {
  public:
    // Each list a hybrid search fuses is this deep, so that a fact ranked well by one method
    // and poorly by the other still takes part.
    static constexpr std::size_t kFusionDepth = 100;
    // RRF's constant: 10 rather than the paper's 60, so the top ranks of each list weigh more.
    // A user's memory is a small corpus (hundreds of facts), whose first few hits by either
    // method are its most telling: on LoCoMo's ten conversations c = 10 lifts recall at k = 5
    // from 0.630 to 0.646 and at k = 50 from 0.788 to 0.797, past dense alone (0.617, 0.793).
    static constexpr double kFusionC = 10.0;

    // Borrows the indexes, which must outlive the retriever. Without dense.exact, only bm25.
    explicit FactRetriever(const Bm25Index& lexical, DenseRetrieval dense = {});

    bool has_dense() const { return dense_.exact != nullptr; }
    // Hybrid when there are embeddings, bm25 otherwise: the best by recall on LoCoMo
    // (tools/locomo_recall.py prints the table).
    RetrievalMethod default_method() const;

    // The at most k best facts of `user` for `query`, best first, ties by ascending fact id.
    // Never another user's fact. Errors: InvalidArgument for dense or hybrid without
    // embeddings; the embedder's and the dense index's errors.
    Result<std::vector<Hit>> search(std::string_view user, std::string_view query, std::size_t k,
                                    RetrievalMethod method) const;
    Result<std::vector<Hit>> search(std::string_view user, std::string_view query,
                                    std::size_t k) const {
        return search(user, query, k, default_method());
    }

  private:
    Result<std::vector<Hit>> dense_search(std::string_view user, std::string_view query,
                                          std::size_t k) const;

    const Bm25Index& lexical_;
    DenseRetrieval dense_;
};

}  // namespace inferscale::retrieval
