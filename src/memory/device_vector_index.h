#pragma once
// DeviceVectorIndex: one user's fact vectors mirrored in backend memory (the GPU when serving on
// CUDA), searched there by Backend::dot_top_k, so a dense search moves only the query and the k
// results across the bus. It ranks as retrieval::VectorIndex does: best first, ties by ascending
// fact id (with the CPU backend its scores are VectorIndex's bit for bit; the GPU sums in another
// order).
//
// The rows are one [capacity, dim] f32 matrix whose first size() rows are live; an update writes
// one row, a removal moves the last row into the hole (read back from the device: no host copy of
// the vectors is kept), and a full matrix is reallocated at twice the capacity. f32 rather than f16
// rows: the scan of 10k facts reads 15 MB, about 5 us at an H100's 3.35 TB/s, far below the
// launches and copies around it, while f16's rounding could reorder near-tied facts against the
// host index. Like its backend, it is used from one thread at a time.

#include <cstddef>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "retrieval/hit.h"
#include "tensor/backend.h"

namespace inferscale::memory {

class DeviceVectorIndex {
  public:
    // Room for `capacity` rows at first (at least one). `backend` must outlive the index. An Error
    // when the backend's memory is full.
    static Result<std::unique_ptr<DeviceVectorIndex>> create(tensor::Backend& backend,
                                                             std::size_t dim,
                                                             std::size_t capacity = 1024);
    DeviceVectorIndex(const DeviceVectorIndex&) = delete;
    DeviceVectorIndex& operator=(const DeviceVectorIndex&) = delete;

    std::size_t dim() const { return dim_; }
    std::size_t size() const { return fact_ids_.size(); }
    std::size_t capacity() const { return capacity_; }

    // Adds the fact's vector, or replaces it when the id is already mirrored. An Error when the
    // matrix must grow and the backend's memory is full; the index is then unchanged. A vector of
    // another size than dim() is a bug.
    Status upsert(retrieval::FactId fact_id, std::span<const float> vector);
    // Returns false when the id was not mirrored.
    bool remove(retrieval::FactId fact_id);
    void clear();

    // The at most k facts with the largest dot product with `query`, best first, ties by ascending
    // fact id (exactly so for tie groups within Backend::kDotTopKMax places of the top); 1 <= k <=
    // kDotTopKMax, or empty for k == 0. Synchronizes the backend.
    std::vector<retrieval::Hit> search(std::span<const float> query, std::size_t k);

  private:
    DeviceVectorIndex(tensor::Backend& backend, std::size_t dim) : backend_(backend), dim_(dim) {}
    tensor::Tensor row(std::size_t r) const;  // [1, dim] view of matrix_'s row r
    // Reallocates the matrix with room for `capacity` rows, keeping the live ones.
    Status reserve(std::size_t capacity);

    tensor::Backend& backend_;
    std::size_t dim_;
    std::size_t capacity_ = 0;
    tensor::Buffer matrix_;                    // [capacity, dim] f32
    tensor::Buffer query_;                     // [dim] f32
    tensor::Buffer out_rows_;                  // [kDotTopKMax] i32
    tensor::Buffer out_scores_;                // [kDotTopKMax] f32
    std::vector<retrieval::FactId> fact_ids_;  // [size]: the fact of each live row
    std::unordered_map<retrieval::FactId, std::size_t> row_of_;
};

}  // namespace inferscale::memory
