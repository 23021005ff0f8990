#pragma once
// StackedWeight: weights that read the same input (q/k/v and their biases) kept as consecutive
// rows of one backend weight, so a backend can see from the addresses that a linear's
// targets adjoin and multiply them as one matrix (one GEMM of 6144 rows instead of 4096, 1024
// and 1024 at the Llama-3.1-8B shape). Each part is a row view of the stack.

#include <span>
#include <vector>

#include "base/result.h"
#include "tensor/backend.h"

namespace inferscale::model {

struct StackedWeight {
    std::vector<tensor::DeviceWeight> storage;  // the stack, or one weight per part
    std::vector<tensor::Tensor> parts;          // in the order given
};

// Uploads host tensors of equal trailing dims as one stack: concatenated on the host (their
// bytes are copied once) when they share a dtype, else one weight each (still usable, just not
// adjoining). An Error from the backend's upload_weight.
Result<StackedWeight> upload_stacked(tensor::Backend& backend,
                                     std::span<const tensor::Tensor> host_parts);

// Splits one weight into consecutive row ranges of `part_rows` rows (their sum is its dim 0).
StackedWeight split_rows(tensor::DeviceWeight whole, std::span<const std::int64_t> part_rows);

}  // namespace inferscale::model
