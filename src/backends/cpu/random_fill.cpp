// CpuBackend::fill_random: the shared counter-based generator, one element per loop step, so
// the values equal the CUDA backend's whatever the thread count.

#include "backends/cpu/cpu_backend.h"
#include "tensor/random_fill.h"

namespace inferscale::backends::cpu {

void CpuBackend::fill_random(tensor::Tensor t, std::uint64_t seed, float scale, float offset) {
    using tensor::DType;
    IS_CHECK(t.device == tensor::Device::Cpu) << "fill_random of device memory";
    IS_CHECK(t.data != nullptr || t.numel() == 0) << "fill_random of a null tensor";
    const std::int64_t n = t.numel();
    switch (t.dtype) {
        case DType::F32: {
            float* p = t.as<float>();
#pragma omp parallel for schedule(static)
            for (std::int64_t i = 0; i < n; ++i) {
                p[i] = tensor::random_uniform(seed, static_cast<std::uint64_t>(i), scale, offset);
            }
            return;
        }
        case DType::BF16:
        case DType::F16: {
            const bool bf16 = t.dtype == DType::BF16;
            auto* p = t.as<std::uint16_t>();
#pragma omp parallel for schedule(static)
            for (std::int64_t i = 0; i < n; ++i) {
                const float v =
                    tensor::random_uniform(seed, static_cast<std::uint64_t>(i), scale, offset);
                p[i] = bf16 ? tensor::f32_to_bf16(v) : tensor::f32_to_f16(v);
            }
            return;
        }
        case DType::F8_E4M3: {
            auto* p = t.as<std::uint8_t>();
#pragma omp parallel for schedule(static)
            for (std::int64_t i = 0; i < n; ++i) {
                p[i] = tensor::f32_to_e4m3(
                    tensor::random_uniform(seed, static_cast<std::uint64_t>(i), scale, offset));
            }
            return;
        }
        default:
            break;
    }
    if (tensor::is_block_quantized(t.dtype)) {
        IS_CHECK(offset == 0.0f) << "random blocks have no offset";
        const std::uint16_t bits = tensor::random_block_scale_bits(t.dtype, scale);
        auto* p = static_cast<std::uint8_t*>(t.data);
        const auto bytes = static_cast<std::int64_t>(t.nbytes());
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < bytes; ++i) {
            p[i] = tensor::random_block_byte(seed, static_cast<std::uint64_t>(i), t.dtype, bits);
        }
        return;
    }
    IS_CHECK(false) << "fill_random dtype " << tensor::dtype_name(t.dtype);
}

}  // namespace inferscale::backends::cpu
