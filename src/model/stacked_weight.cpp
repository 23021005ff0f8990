#include "model/stacked_weight.h"

#include <cstring>
#include <memory>

#include "tensor/views.h"

namespace inferscale::model {

StackedWeight split_rows(tensor::DeviceWeight whole, std::span<const std::int64_t> part_rows) {
    StackedWeight s;
    std::int64_t begin = 0;
    for (std::int64_t rows : part_rows) {
        s.parts.push_back(tensor::rows(whole.tensor, begin, rows));
        begin += rows;
    }
    IS_CHECK_EQ(begin, whole.tensor.shape[0]);
    s.storage.push_back(std::move(whole));
    return s;
}

Result<StackedWeight> upload_stacked(tensor::Backend& backend,
                                     std::span<const tensor::Tensor> host_parts) {
    IS_CHECK(!host_parts.empty()) << "nothing to stack";
    const tensor::Tensor& first = host_parts.front();
    bool same_dtype = true;
    std::int64_t total_rows = 0;
    std::size_t total_bytes = 0;
    std::vector<std::int64_t> part_rows;
    for (const tensor::Tensor& t : host_parts) {
        IS_CHECK(t.rank == first.rank && t.rank >= 1) << "stacked parts differ in rank";
        for (int d = 1; d < t.rank; ++d) {
            IS_CHECK_EQ(t.shape[d], first.shape[d]);
        }
        same_dtype = same_dtype && t.dtype == first.dtype;
        total_rows += t.shape[0];
        total_bytes += t.nbytes();
        part_rows.push_back(t.shape[0]);
    }
    if (!same_dtype || host_parts.size() == 1) {
        StackedWeight s;
        for (const tensor::Tensor& t : host_parts) {
            s.storage.push_back(IS_TRY(backend.upload_weight(t)));
            s.parts.push_back(s.storage.back().tensor);
        }
        return s;
    }
    const std::unique_ptr<char[]> joined(new char[total_bytes]);
    std::size_t offset = 0;
    for (const tensor::Tensor& t : host_parts) {
        std::memcpy(joined.get() + offset, t.data, t.nbytes());
        offset += t.nbytes();
    }
    tensor::Tensor stack = first;
    stack.data = joined.get();
    stack.shape[0] = total_rows;
    return split_rows(IS_TRY(backend.upload_weight(stack)), part_rows);
}

}  // namespace inferscale::model
