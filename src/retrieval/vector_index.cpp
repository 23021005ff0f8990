#include "retrieval/vector_index.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <mutex>

#include "base/check.h"

namespace inferscale::retrieval {
namespace {

// NaN never ranks above a number (and keeps the ordering strict-weak).
float rank_value(float s) { return std::isnan(s) ? -std::numeric_limits<float>::infinity() : s; }

bool better(float sa, FactId a, float sb, FactId b) {
    const float ra = rank_value(sa), rb = rank_value(sb);
    return ra != rb ? ra > rb : a < b;
}

}  // namespace

float lane_dot(const float* a, const float* b, std::size_t n) {
    constexpr std::size_t L = VectorIndex::kLanes;
    std::array<float, L> acc{};
    const std::size_t whole = n - n % L;
    for (std::size_t i = 0; i < whole; i += L) {
        for (std::size_t j = 0; j < L; ++j) acc[j] += a[i + j] * b[i + j];
    }
    for (std::size_t i = whole; i < n; ++i) acc[i - whole] += a[i] * b[i];
    float sum = 0.0f;
    for (std::size_t j = 0; j < L; ++j) sum += acc[j];
    return sum;
}

std::vector<Hit> top_k_hits(std::span<const float> scores, std::span<const FactId> ids,
                            std::size_t k) {
    IS_CHECK_EQ(scores.size(), ids.size());
    k = std::min(k, scores.size());
    if (k == 0) return {};
    struct Entry {
        float score;
        FactId id;
    };
    // A heap whose front is the worst of the k best so far: most rows fail one comparison.
    const auto worse_last = [](const Entry& a, const Entry& b) {
        return better(a.score, a.id, b.score, b.id);
    };
    std::vector<Entry> heap;
    heap.reserve(k);
    for (std::size_t i = 0; i < scores.size(); ++i) {
        const Entry e{scores[i], ids[i]};
        if (heap.size() < k) {
            heap.push_back(e);
            std::push_heap(heap.begin(), heap.end(), worse_last);
        } else if (worse_last(e, heap.front())) {
            std::pop_heap(heap.begin(), heap.end(), worse_last);
            heap.back() = e;
            std::push_heap(heap.begin(), heap.end(), worse_last);
        }
    }
    std::sort_heap(heap.begin(), heap.end(), worse_last);
    std::vector<Hit> hits;
    hits.reserve(heap.size());
    for (const Entry& e : heap) hits.push_back({e.id, e.score});
    return hits;
}

VectorIndex::VectorIndex(std::size_t dim) : dim_(dim) { IS_CHECK(dim_ > 0) << "dim 0"; }

void VectorIndex::upsert(std::string_view user, FactId fact_id, std::span<const float> vector) {
    IS_CHECK_EQ(vector.size(), dim_);
    std::unique_lock lock(mutex_);
    auto owner = owner_.find(fact_id);
    if (owner != owner_.end() && owner->second == user) {
        UserRows& rows = users_.at(owner->second);
        std::copy(vector.begin(), vector.end(),
                  rows.matrix.begin() + rows.row_of.at(fact_id) * dim_);
        return;
    }
    remove_locked(fact_id);
    UserRows& rows = users_[std::string(user)];
    rows.row_of.emplace(fact_id, rows.fact_ids.size());
    rows.fact_ids.push_back(fact_id);
    rows.matrix.insert(rows.matrix.end(), vector.begin(), vector.end());
    owner_.emplace(fact_id, std::string(user));
}

std::size_t VectorIndex::max_k() const { return std::numeric_limits<std::size_t>::max(); }

Status VectorIndex::put(std::string_view user, FactId fact_id, std::span<const float> vector) {
    upsert(user, fact_id, vector);
    return {};
}

bool VectorIndex::remove(FactId fact_id) {
    std::unique_lock lock(mutex_);
    if (!owner_.contains(fact_id)) return false;
    remove_locked(fact_id);
    return true;
}

void VectorIndex::remove_locked(FactId fact_id) {
    auto owner = owner_.find(fact_id);
    if (owner == owner_.end()) return;
    auto user_it = users_.find(owner->second);
    IS_CHECK(user_it != users_.end()) << "fact " << fact_id << " has no user rows";
    UserRows& rows = user_it->second;
    auto row_it = rows.row_of.find(fact_id);
    IS_CHECK(row_it != rows.row_of.end()) << "fact " << fact_id;
    const std::size_t row = row_it->second, last = rows.fact_ids.size() - 1;
    rows.row_of.erase(row_it);
    if (row != last) {
        // Swap-remove: the last row moves into the hole, so rows stay contiguous.
        const FactId moved = rows.fact_ids[last];
        std::copy_n(rows.matrix.begin() + last * dim_, dim_, rows.matrix.begin() + row * dim_);
        rows.fact_ids[row] = moved;
        rows.row_of[moved] = row;
    }
    rows.fact_ids.pop_back();
    rows.matrix.resize(last * dim_);
    if (rows.fact_ids.empty()) users_.erase(user_it);
    owner_.erase(owner);
}

std::size_t VectorIndex::remove_user(std::string_view user) {
    std::unique_lock lock(mutex_);
    auto it = users_.find(std::string(user));
    if (it == users_.end()) return 0;
    const std::size_t n = it->second.fact_ids.size();
    for (FactId fact_id : it->second.fact_ids) owner_.erase(fact_id);
    users_.erase(it);
    return n;
}

std::size_t VectorIndex::size() const {
    std::shared_lock lock(mutex_);
    return owner_.size();
}

std::size_t VectorIndex::size(std::string_view user) const {
    std::shared_lock lock(mutex_);
    auto it = users_.find(std::string(user));
    return it == users_.end() ? 0 : it->second.fact_ids.size();
}

std::vector<Hit> VectorIndex::search(std::string_view user, std::span<const float> query,
                                     std::size_t k) const {
    IS_CHECK_EQ(query.size(), dim_);
    if (k == 0) return {};
    std::shared_lock lock(mutex_);
    auto it = users_.find(std::string(user));
    if (it == users_.end()) return {};
    const UserRows& rows = it->second;
    const auto n = static_cast<std::int64_t>(rows.fact_ids.size());
    const float* matrix = rows.matrix.data();
    const float* q = query.data();
    const std::size_t dim = dim_;
    std::vector<float> scores(rows.fact_ids.size());
#pragma omp parallel for schedule(static) if (rows.fact_ids.size() >= kParallelRows)
    for (std::int64_t r = 0; r < n; ++r) {
        scores[r] = lane_dot(matrix + static_cast<std::size_t>(r) * dim, q, dim);
    }
    return top_k_hits(scores, rows.fact_ids, k);
}

}  // namespace inferscale::retrieval
