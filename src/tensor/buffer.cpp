#include "tensor/buffer.h"

#include "tensor/backend.h"

namespace inferscale::tensor {

Buffer& Buffer::operator=(Buffer&& other) noexcept {
    if (this != &other) {
        reset();
        owner_ = other.owner_;
        data_ = other.data_;
        bytes_ = other.bytes_;
        device_ = other.device_;
        other.owner_ = nullptr;
        other.data_ = nullptr;
        other.bytes_ = 0;
    }
    return *this;
}

void Buffer::reset() {
    if (data_ != nullptr && owner_ != nullptr) owner_->free_buffer(data_, bytes_);
    owner_ = nullptr;
    data_ = nullptr;
    bytes_ = 0;
}

Tensor Buffer::view(DType dtype, std::initializer_list<std::int64_t> dims,
                    std::size_t offset) const {
    Tensor t(static_cast<char*>(data_) + offset, dtype, dims, device_);
    IS_CHECK(offset + t.nbytes() <= bytes_)
        << "view of " << t.nbytes() << " bytes at " << offset << " in a buffer of " << bytes_;
    return t;
}

std::size_t Arena::reserve(DType dtype, std::initializer_list<std::int64_t> dims) {
    std::size_t n = dtype_size(dtype);
    for (std::int64_t d : dims) {
        IS_CHECK(d >= 0) << "negative dim";
        n *= static_cast<std::size_t>(d);
    }
    std::size_t offset = bytes_;
    bytes_ += (n + kAlign - 1) / kAlign * kAlign;
    return offset;
}

}  // namespace inferscale::tensor
