#pragma once
// DeviceUserVectors: every user's fact embeddings mirrored on a backend's device, one
// DeviceVectorIndex per user (created at the user's first vector, dropped with their last), so a
// dense search during serving is one Backend::dot_top_k over that user's rows. The backend is
// this object's alone (a backend runs one caller at a time); calls are serialized.

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "memory/device_vector_index.h"
#include "retrieval/dense_index.h"
#include "tensor/backend.h"

namespace inferscale::memory {

class DeviceUserVectors final : public retrieval::DenseIndex {
  public:
    // `backend` must outlive this object and be used by nothing else.
    DeviceUserVectors(tensor::Backend& backend, std::size_t dim);

    std::size_t dim() const override { return dim_; }
    std::size_t max_k() const override;
    Status put(std::string_view user, retrieval::FactId fact_id,
               std::span<const float> vector) override;
    void erase(retrieval::FactId fact_id) override;
    void erase_user(std::string_view user) override;
    Result<std::vector<retrieval::Hit>> nearest(std::string_view user, std::span<const float> query,
                                                std::size_t k) override;

  private:
    void erase_locked(retrieval::FactId fact_id);

    // Rows a user's device matrix has at first: small, since most users have few facts (it
    // doubles as they grow).
    static constexpr std::size_t kFirstCapacity = 64;

    tensor::Backend& backend_;
    std::size_t dim_;
    std::mutex mutex_;
    std::unordered_map<std::string, std::unique_ptr<DeviceVectorIndex>> users_;
    std::unordered_map<retrieval::FactId, std::string> owner_;
};

}  // namespace inferscale::memory
