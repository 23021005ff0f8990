#pragma once
// VectorIndex: dense retrieval over each user's fact embeddings, in host memory, updated one fact
// at a time. A search scores every fact of the user by its dot product with the query (the cosine
// for L2-normalised embeddings such as all-MiniLM-L6-v2's) and keeps the k best.
//
// A user's rows are one contiguous [n, dim] f32 matrix (row-major; a removed row is replaced by the
// last), so a search is one streaming matrix-vector product followed by a selection of the k best:
// memory-bound, it reads n * dim * 4 bytes once. Dot products are summed in f32 over kLanes
// interleaved partial sums (lane j takes elements j, j + kLanes, ...), added up lane by lane at the
// end: the compiler vectorizes that loop without reassociating anything, so scores do not depend on
// the build's vector width. Large users are scanned by an OpenMP team.

#include <cstddef>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "retrieval/dense_index.h"
#include "retrieval/hit.h"

namespace inferscale::retrieval {

class VectorIndex final : public DenseIndex {
  public:
    static constexpr std::size_t kLanes = 32;
    // Rows scanned by an OpenMP team from this many up; fewer are scanned by the caller alone
    // (forking a team costs more than the scan of a small user).
    static constexpr std::size_t kParallelRows = 8192;

    // Every vector of the index (facts and queries) has `dim` elements; dim > 0.
    explicit VectorIndex(std::size_t dim);

    std::size_t dim() const override { return dim_; }
    std::size_t max_k() const override;

    // Adds the fact's vector, or replaces its vector (and user) when the id is already indexed. A
    // vector of another size than dim() is a bug.
    void upsert(std::string_view user, FactId fact_id, std::span<const float> vector);
    // Returns false when the id was not indexed.
    bool remove(FactId fact_id);
    // Drops every fact of `user`; returns how many there were.
    std::size_t remove_user(std::string_view user);

    std::size_t size() const;                       // facts over all users
    std::size_t size(std::string_view user) const;  // facts of one user

    // The at most k facts of `user` with the largest dot product with `query`, best first, ties by
    // ascending fact id (as every retrieval method); every fact of the user is a candidate. Empty
    // for an unknown user or k == 0. A query of another size than dim() is a bug. Safe to call
    // concurrently with updates and other searches.
    std::vector<Hit> search(std::string_view user, std::span<const float> query,
                            std::size_t k) const;

    // DenseIndex: the methods above, never failing.
    Status put(std::string_view user, FactId fact_id, std::span<const float> vector) override;
    void erase(FactId fact_id) override { remove(fact_id); }
    void erase_user(std::string_view user) override { remove_user(user); }
    Result<std::vector<Hit>> nearest(std::string_view user, std::span<const float> query,
                                     std::size_t k) override {
        return search(user, query, k);
    }

  private:
    struct UserRows {
        std::vector<float> matrix;     // [n, dim] f32, row-major
        std::vector<FactId> fact_ids;  // [n]: the fact of each row
        std::unordered_map<FactId, std::size_t> row_of;
    };

    void remove_locked(FactId fact_id);

    std::size_t dim_;
    mutable std::shared_mutex mutex_;
    std::unordered_map<std::string, UserRows> users_;
    std::unordered_map<FactId, std::string> owner_;  // fact id -> user
};

// The dot product VectorIndex scores with (kLanes interleaved f32 partial sums, see above).
float lane_dot(const float* a, const float* b, std::size_t n);

// The k best of (score, id) pairs, best first: higher score, then lower id. Used by every dense
// search so all of them order ties alike.
std::vector<Hit> top_k_hits(std::span<const float> scores, std::span<const FactId> ids,
                            std::size_t k);

}  // namespace inferscale::retrieval
