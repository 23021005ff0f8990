// Dense retrieval's scan on the host: the same lane-summed dot products and top-k selection as
// retrieval::VectorIndex, so an index mirrored into CPU backend memory ranks exactly as the host
// index does. f16 rows are widened one row at a time into a per-thread buffer.

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "retrieval/vector_index.h"
#include "tensor/dtype.h"

namespace inferscale::backends::cpu {

using tensor::DType;
using tensor::Tensor;

void CpuBackend::dot_top_k(const Tensor& matrix, const Tensor& query, Tensor rows, Tensor scores) {
    tensor::check_dot_top_k_args(matrix, query, rows, scores, kDotTopKMax);
    for (const Tensor* t : std::initializer_list<const Tensor*>{&matrix, &query, &rows, &scores}) {
        IS_CHECK(t->device == tensor::Device::Cpu) << "dot_top_k: an operand is not host memory";
    }
    const std::int64_t n = matrix.shape[0], k = rows.shape[0];
    const auto dim = static_cast<std::size_t>(matrix.shape[1]);
    const float* q = query.as<float>();
    std::vector<float> all(static_cast<std::size_t>(n));
#pragma omp parallel if (static_cast <std::size_t>(n) >= retrieval::VectorIndex::kParallelRows)
    {
        std::vector<float> widened(matrix.dtype == DType::F16 ? dim : 0);
#pragma omp for schedule(static)
        for (std::int64_t r = 0; r < n; ++r) {
            const float* row = nullptr;
            if (matrix.dtype == DType::F32) {
                row = matrix.as<float>() + static_cast<std::size_t>(r) * dim;
            } else {
                const std::uint16_t* h =
                    matrix.as<std::uint16_t>() + static_cast<std::size_t>(r) * dim;
                for (std::size_t i = 0; i < dim; ++i) widened[i] = tensor::f16_to_f32(h[i]);
                row = widened.data();
            }
            all[static_cast<std::size_t>(r)] = retrieval::lane_dot(row, q, dim);
        }
    }
    std::vector<retrieval::FactId> ids(static_cast<std::size_t>(n));
    std::iota(ids.begin(), ids.end(), retrieval::FactId{0});
    const std::vector<retrieval::Hit> best =
        retrieval::top_k_hits(all, ids, static_cast<std::size_t>(k));
    for (std::int64_t j = 0; j < k; ++j) {
        const bool filled = static_cast<std::size_t>(j) < best.size();
        rows.as<std::int32_t>()[j] = filled ? static_cast<std::int32_t>(best[j].fact_id) : -1;
        scores.as<float>()[j] =
            filled ? static_cast<float>(best[j].score) : -std::numeric_limits<float>::infinity();
    }
}

}  // namespace inferscale::backends::cpu
