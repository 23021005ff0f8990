#pragma once
// Buffer: owns one allocation made by a BufferOwner (a Backend: host memory for the CPU
// backend, device memory for CUDA; or a sub-allocator over memory of its own) and frees it
// through the same owner. Move-only; the owner must outlive it. A Buffer without an owner is a
// view that frees nothing. Views (Tensor) into the buffer are non-owning and die with it.

#include <cstddef>
#include <initializer_list>

#include "tensor/tensor.h"

namespace inferscale::tensor {

class BufferOwner {
  public:
    // Called by Buffer only.
    virtual void free_buffer(void* data, std::size_t bytes) = 0;

  protected:
    ~BufferOwner() = default;
};

class Buffer {
  public:
    Buffer() = default;
    Buffer(BufferOwner* owner, void* data, std::size_t bytes, Device device)
        : owner_(owner), data_(data), bytes_(bytes), device_(device) {}
    ~Buffer() { reset(); }
    Buffer(Buffer&& other) noexcept { *this = static_cast<Buffer&&>(other); }
    Buffer& operator=(Buffer&& other) noexcept;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    void* data() const { return data_; }
    std::size_t bytes() const { return bytes_; }
    Device device() const { return device_; }
    bool empty() const { return data_ == nullptr; }
    const BufferOwner* owner() const { return owner_; }

    // A view of the whole buffer (from byte `offset`) with the given dtype and shape; checks
    // that it fits.
    Tensor view(DType dtype, std::initializer_list<std::int64_t> dims,
                std::size_t offset = 0) const;

    void reset();
    // Gives up ownership without freeing: the memory is the caller's to give back.
    void* release() {
        void* data = data_;
        owner_ = nullptr;
        data_ = nullptr;
        bytes_ = 0;
        return data;
    }

  private:
    BufferOwner* owner_ = nullptr;
    void* data_ = nullptr;
    std::size_t bytes_ = 0;
    Device device_ = Device::Cpu;
};

// Carves aligned sub-views out of one Buffer, so a workspace is a single allocation.
// Call `reserve` for every tensor first (to learn the size), allocate, then `take` in the same
// order.
class Arena {
  public:
    static constexpr std::size_t kAlign = 256;  // cuBLAS and AVX loads both like this

    // Adds a tensor of `dims` and returns its byte offset in the arena.
    std::size_t reserve(DType dtype, std::initializer_list<std::int64_t> dims);
    std::size_t bytes() const { return bytes_; }

  private:
    std::size_t bytes_ = 0;
};

}  // namespace inferscale::tensor
