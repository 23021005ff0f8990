#pragma once
// DenseIndex: fact embeddings kept searchable by their dot product with a query, as
// memory::FactEmbedder feeds them and FactRetriever reads them. VectorIndex keeps them in host
// memory; memory::DeviceUserVectors mirrors them on a backend's device.

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "retrieval/hit.h"

namespace inferscale::retrieval {

class DenseIndex {
  public:
    virtual ~DenseIndex() = default;

    virtual std::size_t dim() const = 0;
    // The most hits one search returns.
    virtual std::size_t max_k() const = 0;

    // Adds the fact's vector, or replaces its vector (and user). An Error when the index's memory
    // is full; the index is then unchanged. A vector of another size than dim() is a bug.
    virtual Status put(std::string_view user, FactId fact_id, std::span<const float> vector) = 0;
    virtual void erase(FactId fact_id) = 0;
    virtual void erase_user(std::string_view user) = 0;

    // The at most min(k, max_k()) facts of `user` with the largest dot product with `query`,
    // best first, ties by ascending fact id. Safe to call concurrently with updates.
    virtual Result<std::vector<Hit>> nearest(std::string_view user, std::span<const float> query,
                                             std::size_t k) = 0;
};

}  // namespace inferscale::retrieval
