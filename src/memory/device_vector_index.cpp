#include "memory/device_vector_index.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"
#include "retrieval/vector_index.h"

namespace inferscale::memory {

using tensor::DType;
using tensor::Tensor;

namespace {

constexpr auto kMaxK = static_cast<std::size_t>(tensor::Backend::kDotTopKMax);

// As the selection ranks: NaN below every number.
float rank_value(float s) { return std::isnan(s) ? -std::numeric_limits<float>::infinity() : s; }

}  // namespace

Result<std::unique_ptr<DeviceVectorIndex>> DeviceVectorIndex::create(tensor::Backend& backend,
                                                                     std::size_t dim,
                                                                     std::size_t capacity) {
    IS_CHECK(dim > 0) << "dim 0";
    std::unique_ptr<DeviceVectorIndex> index(new DeviceVectorIndex(backend, dim));
    index->query_ = IS_TRY(backend.allocate(dim * sizeof(float)));
    index->out_rows_ = IS_TRY(backend.allocate(kMaxK * sizeof(std::int32_t)));
    index->out_scores_ = IS_TRY(backend.allocate(kMaxK * sizeof(float)));
    IS_RETURN_IF_ERROR(index->reserve(std::max<std::size_t>(capacity, 1)));
    return index;
}

Tensor DeviceVectorIndex::row(std::size_t r) const {
    return matrix_.view(DType::F32, {1, static_cast<std::int64_t>(dim_)}, r * dim_ * sizeof(float));
}

Status DeviceVectorIndex::reserve(std::size_t capacity) {
    tensor::Buffer grown = IS_TRY(backend_.allocate(capacity * dim_ * sizeof(float)));
    const auto live = static_cast<std::int64_t>(fact_ids_.size());
    if (live > 0) {
        // Through the host: the Backend has no device-to-device copy, and growth is geometric, so
        // its cost is amortized over the rows added.
        const auto d = static_cast<std::int64_t>(dim_);
        std::vector<float> rows(fact_ids_.size() * dim_);
        backend_.copy_to_host(rows.data(), matrix_.view(DType::F32, {live, d}),
                              rows.size() * sizeof(float));
        backend_.synchronize();
        backend_.copy_from_host(grown.view(DType::F32, {live, d}), rows.data(),
                                rows.size() * sizeof(float));
        backend_.synchronize();
    }
    capacity_ = capacity;
    matrix_ = std::move(grown);
    return {};
}

Status DeviceVectorIndex::upsert(retrieval::FactId fact_id, std::span<const float> vector) {
    IS_CHECK_EQ(vector.size(), dim_);
    auto it = row_of_.find(fact_id);
    std::size_t r = 0;
    if (it != row_of_.end()) {
        r = it->second;
    } else {
        if (fact_ids_.size() == capacity_) IS_RETURN_IF_ERROR(reserve(2 * capacity_));
        r = fact_ids_.size();
        fact_ids_.push_back(fact_id);
        row_of_.emplace(fact_id, r);
    }
    backend_.copy_from_host(row(r), vector.data(), dim_ * sizeof(float));
    backend_.synchronize();  // `vector` may be gone once this returns
    return {};
}

bool DeviceVectorIndex::remove(retrieval::FactId fact_id) {
    auto it = row_of_.find(fact_id);
    if (it == row_of_.end()) return false;
    const std::size_t r = it->second, last = fact_ids_.size() - 1;
    row_of_.erase(it);
    if (r != last) {
        // Swap-remove, keeping the live rows contiguous for the scan.
        std::vector<float> moved(dim_);
        backend_.copy_to_host(moved.data(), row(last), dim_ * sizeof(float));
        backend_.synchronize();
        backend_.copy_from_host(row(r), moved.data(), dim_ * sizeof(float));
        backend_.synchronize();
        fact_ids_[r] = fact_ids_[last];
        row_of_[fact_ids_[r]] = r;
    }
    fact_ids_.pop_back();
    return true;
}

void DeviceVectorIndex::clear() {
    fact_ids_.clear();
    row_of_.clear();
}

std::vector<retrieval::Hit> DeviceVectorIndex::search(std::span<const float> query, std::size_t k) {
    IS_CHECK_EQ(query.size(), dim_);
    IS_CHECK(k <= kMaxK) << "k " << k;
    const std::size_t n = fact_ids_.size();
    if (k == 0 || n == 0) return {};
    backend_.copy_from_host(query_.view(DType::F32, {static_cast<std::int64_t>(dim_)}),
                            query.data(), dim_ * sizeof(float));
    const Tensor matrix =
        matrix_.view(DType::F32, {static_cast<std::int64_t>(n), static_cast<std::int64_t>(dim_)});
    // The op breaks ties by row, not fact id: ask for one place more than k, and while the last
    // place still ties the k-th, for twice as many, so the whole tie group at the k-th place is in
    // hand before ordering by fact id.
    const std::size_t keep = std::min(k, n);
    std::size_t want = std::min({keep + 1, n, kMaxK});
    std::vector<std::int32_t> rows;
    std::vector<float> scores;
    for (;;) {
        const auto w = static_cast<std::int64_t>(want);
        const Tensor out_rows = out_rows_.view(DType::I32, {w});
        const Tensor out_scores = out_scores_.view(DType::F32, {w});
        backend_.dot_top_k(matrix, query_.view(DType::F32, {static_cast<std::int64_t>(dim_)}),
                           out_rows, out_scores);
        rows.resize(want);
        scores.resize(want);
        backend_.copy_to_host(rows.data(), out_rows, want * sizeof(std::int32_t));
        backend_.copy_to_host(scores.data(), out_scores, want * sizeof(float));
        backend_.synchronize();
        if (want == n || want == kMaxK) break;
        if (rank_value(scores[want - 1]) < rank_value(scores[keep - 1])) break;
        want = std::min({2 * want, n, kMaxK});
    }
    std::vector<retrieval::FactId> ids(want);
    for (std::size_t j = 0; j < want; ++j) ids[j] = fact_ids_[static_cast<std::size_t>(rows[j])];
    return retrieval::top_k_hits(scores, ids, keep);
}

}  // namespace inferscale::memory
