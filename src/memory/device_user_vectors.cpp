#include "memory/device_user_vectors.h"

#include <algorithm>

namespace inferscale::memory {

DeviceUserVectors::DeviceUserVectors(tensor::Backend& backend, std::size_t dim)
    : backend_(backend), dim_(dim) {}

std::size_t DeviceUserVectors::max_k() const {
    return static_cast<std::size_t>(tensor::Backend::kDotTopKMax);
}

Status DeviceUserVectors::put(std::string_view user, retrieval::FactId fact_id,
                              std::span<const float> vector) {
    const std::lock_guard<std::mutex> lock(mutex_);
    auto owner = owner_.find(fact_id);
    if (owner != owner_.end() && owner->second != user) erase_locked(fact_id);
    auto it = users_.find(std::string(user));
    if (it == users_.end()) {
        std::unique_ptr<DeviceVectorIndex> created =
            IS_TRY(DeviceVectorIndex::create(backend_, dim_, kFirstCapacity));
        it = users_.emplace(std::string(user), std::move(created)).first;
    }
    IS_RETURN_IF_ERROR(it->second->upsert(fact_id, vector));
    owner_[fact_id] = std::string(user);
    return {};
}

void DeviceUserVectors::erase(retrieval::FactId fact_id) {
    const std::lock_guard<std::mutex> lock(mutex_);
    erase_locked(fact_id);
}

void DeviceUserVectors::erase_locked(retrieval::FactId fact_id) {
    auto owner = owner_.find(fact_id);
    if (owner == owner_.end()) return;
    auto it = users_.find(owner->second);
    it->second->remove(fact_id);
    if (it->second->size() == 0) users_.erase(it);
    owner_.erase(owner);
}

void DeviceUserVectors::erase_user(std::string_view user) {
    const std::lock_guard<std::mutex> lock(mutex_);
    auto it = users_.find(std::string(user));
    if (it == users_.end()) return;
    std::erase_if(owner_, [&](const auto& entry) { return entry.second == user; });
    users_.erase(it);
}

Result<std::vector<retrieval::Hit>> DeviceUserVectors::nearest(std::string_view user,
                                                               std::span<const float> query,
                                                               std::size_t k) {
    const std::lock_guard<std::mutex> lock(mutex_);
    auto it = users_.find(std::string(user));
    if (it == users_.end()) return std::vector<retrieval::Hit>{};
    return it->second->search(query, std::min(k, max_k()));
}

}  // namespace inferscale::memory
