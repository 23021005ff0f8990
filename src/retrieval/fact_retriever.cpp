#include "retrieval/fact_retriever.h"

#include <algorithm>
#include <array>
#include <string>

#include "retrieval/rank_fusion.h"

namespace inferscale::retrieval {

const char* retrieval_method_name(RetrievalMethod method) {
    switch (method) {
        case RetrievalMethod::Bm25:
            return "bm25";
        case RetrievalMethod::Dense:
            return "dense";
        case RetrievalMethod::Hybrid:
            return "hybrid";
    }
    return "?";
}

Result<RetrievalMethod> parse_retrieval_method(std::string_view name) {
    for (RetrievalMethod m :
         {RetrievalMethod::Bm25, RetrievalMethod::Dense, RetrievalMethod::Hybrid})
        if (name == retrieval_method_name(m)) return m;
    return make_error(ErrorKind::InvalidArgument, "unknown retrieval method '" + std::string(name) +
                                                      "' (expected bm25, dense or hybrid)");
}

FactRetriever::FactRetriever(const Bm25Index& lexical, DenseRetrieval dense)
    : lexical_(lexical), dense_(std::move(dense)) {}

RetrievalMethod FactRetriever::default_method() const {
    return has_dense() ? RetrievalMethod::Hybrid : RetrievalMethod::Bm25;
}

Result<std::vector<Hit>> FactRetriever::dense_search(std::string_view user, std::string_view query,
                                                     std::size_t k) const {
    const std::vector<float> q = IS_TRY(dense_.embed(query));
    DenseIndex* index =
        dense_.fast != nullptr && k <= dense_.fast->max_k() ? dense_.fast : dense_.exact;
    return index->nearest(user, q, k);
}

Result<std::vector<Hit>> FactRetriever::search(std::string_view user, std::string_view query,
                                               std::size_t k, RetrievalMethod method) const {
    if (method != RetrievalMethod::Bm25 && !has_dense())
        return make_error(ErrorKind::InvalidArgument,
                          std::string("retrieval method ") + retrieval_method_name(method) +
                              " needs an embedding model, and this server has none");
    if (k == 0) return std::vector<Hit>{};
    switch (method) {
        case RetrievalMethod::Bm25:
            return lexical_.search(user, query, k);
        case RetrievalMethod::Dense:
            return dense_search(user, query, k);
        case RetrievalMethod::Hybrid:
            break;
    }
    const std::size_t depth = std::max(k, kFusionDepth);
    // The dense list first: an early return from inside the array's initializer would leak
    // the elements made before it (GCC's statement expressions).
    std::vector<Hit> dense = IS_TRY(dense_search(user, query, depth));
    const std::array<std::vector<Hit>, 2> lists{lexical_.search(user, query, depth),
                                                std::move(dense)};
    return reciprocal_rank_fusion(lists, k, kFusionC);
}

}  // namespace inferscale::retrieval
