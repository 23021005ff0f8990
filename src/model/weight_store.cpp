#include "model/weight_store.h"

#include <cstdlib>
#include <sstream>

namespace inferscale::model {

void WeightStore::AlignedFree::operator()(void* p) const { std::free(p); }

const MappedFile& WeightStore::keep_file(MappedFile file) {
    files_.push_back(std::make_unique<MappedFile>(std::move(file)));
    return *files_.back();
}

void* WeightStore::allocate(std::size_t bytes) {
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    IS_CHECK(p != nullptr) << "out of host memory allocating " << bytes << " bytes";
    owned_.emplace_back(p);
    return p;
}

void WeightStore::add(std::string name, tensor::Tensor t) { tensors_[std::move(name)] = t; }

const tensor::Tensor* WeightStore::find(std::string_view name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

Result<tensor::Tensor> WeightStore::get(std::string_view name,
                                        std::initializer_list<std::int64_t> shape) const {
    const tensor::Tensor* t = find(name);
    if (t == nullptr) return make_error("missing weight " + std::string(name));
    bool same = t->rank == static_cast<int>(shape.size());
    int i = 0;
    for (std::int64_t d : shape) same = same && t->shape[i++] == d;
    if (!same) {
        std::ostringstream msg;
        msg << "weight " << name << " has shape [";
        for (int j = 0; j < t->rank; ++j) msg << (j ? ", " : "") << t->shape[j];
        msg << "], expected [";
        i = 0;
        for (std::int64_t d : shape) msg << (i++ ? ", " : "") << d;
        msg << "]";
        return make_error(msg.str());
    }
    return *t;
}

}  // namespace inferscale::model
