#pragma once
// Tensor: a non-owning, row-major view of device or host memory with dtype and shape (rank <= 4).
// The owner of the memory (a Buffer, a mapped file, a workspace) must outlive the view.

#include <array>
#include <cstdint>
#include <initializer_list>

#include "base/check.h"
#include "tensor/dtype.h"

namespace inferscale::tensor {

enum class Device : std::uint8_t { Cpu, Cuda };

struct Tensor {
    void* data = nullptr;
    DType dtype = DType::F32;
    Device device = Device::Cpu;
    int rank = 0;
    std::array<std::int64_t, 4> shape{0, 0, 0, 0};

    Tensor() = default;
    Tensor(void* ptr, DType type, std::initializer_list<std::int64_t> dims,
           Device dev = Device::Cpu)
        : data(ptr), dtype(type), device(dev), rank(static_cast<int>(dims.size())) {
        IS_CHECK(dims.size() <= 4) << "rank " << dims.size();
        int i = 0;
        for (std::int64_t d : dims) shape[i++] = d;
    }

    std::int64_t dim(int i) const {
        IS_CHECK(i >= 0 && i < rank) << "dim " << i << " of rank " << rank;
        return shape[i];
    }
    std::int64_t numel() const {
        std::int64_t n = 1;
        for (int i = 0; i < rank; ++i) n *= shape[i];
        return n;
    }
    // Block-quantized rows are whole blocks, so the size is per block, not per element.
    std::size_t nbytes() const {
        if (!is_block_quantized(dtype))
            return static_cast<std::size_t>(numel()) * dtype_size(dtype);
        IS_CHECK(rank > 0 && shape[rank - 1] % dtype_block_elems(dtype) == 0)
            << dtype_name(dtype) << " rows of " << (rank > 0 ? shape[rank - 1] : 0) << " elements";
        return dtype_row_bytes(dtype, numel());
    }
    bool empty() const { return data == nullptr; }

    template <class T>
    T* as() const {
        return static_cast<T*>(data);
    }
};

}  // namespace inferscale::tensor
