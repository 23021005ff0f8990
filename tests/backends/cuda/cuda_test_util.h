#pragma once
// Helpers for the CUDA op-parity tests: a fixture that skips without a GPU and owns a
// CudaBackend plus the CpuBackend reference, bf16-rounded random data (so the CPU op sees
// exactly the values the GPU op reads), device tensors poisoned with NaN before each run, and
// the relative error ||out - ref|| / ||ref||.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/cuda_backend.h"
#include "tensor/buffer.h"

namespace inferscale::cuda_test {

using backends::cpu::CpuBackend;
using backends::cuda::CudaBackend;
using backends::cuda::CudaBackendOptions;
using tensor::DType;
using tensor::Tensor;

inline bool has_gpu() {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// Normal random values rounded to bf16 and kept as f32; never all zeros.
inline std::vector<float> random_bf16(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = tensor::bf16_to_f32(tensor::f32_to_bf16(dist(rng)));
    return v;
}

inline std::vector<float> round_bf16(std::vector<float> v) {
    for (float& x : v) x = tensor::bf16_to_f32(tensor::f32_to_bf16(x));
    return v;
}

// A device tensor with its own buffer.
struct DeviceTensor {
    tensor::Buffer buffer;
    Tensor tensor;
};

inline DeviceTensor device_empty(CudaBackend& gpu, DType dtype,
                                 std::initializer_list<std::int64_t> dims) {
    Tensor shape(nullptr, dtype, dims);
    auto buffer = gpu.allocate(std::max<std::size_t>(shape.nbytes(), 16));
    IS_CHECK(buffer.ok()) << buffer.error().message;
    DeviceTensor t{std::move(*buffer), Tensor()};
    t.tensor = t.buffer.view(dtype, dims);
    return t;
}

// f32 host data stored as `dtype` (BF16 or F32) on the device.
inline DeviceTensor device_from(CudaBackend& gpu, const std::vector<float>& host, DType dtype,
                                std::initializer_list<std::int64_t> dims) {
    DeviceTensor t = device_empty(gpu, dtype, dims);
    IS_CHECK(static_cast<std::int64_t>(host.size()) == t.tensor.numel()) << "size";
    std::vector<std::uint16_t> narrow;
    const void* src = host.data();
    if (dtype == DType::BF16) {
        narrow.resize(host.size());
        tensor::convert_from_f32(DType::BF16, host.data(), narrow.data(), host.size());
        src = narrow.data();
    }
    gpu.copy_from_host(t.tensor, src, t.tensor.nbytes());
    gpu.synchronize();
    return t;
}

inline DeviceTensor device_ints(CudaBackend& gpu, const std::vector<std::int32_t>& host) {
    DeviceTensor t = device_empty(gpu, DType::I32, {static_cast<std::int64_t>(host.size())});
    gpu.copy_from_host(t.tensor, host.data(), host.size() * sizeof(std::int32_t));
    gpu.synchronize();
    return t;
}

// NaN in every float format (and -1 as i32), so an element a kernel forgets to write fails.
// On the backend's stream: it does not synchronize with the legacy default stream.
inline void poison(CudaBackend& gpu, const Tensor& t) {
    ASSERT_EQ(cudaMemsetAsync(t.data, 0xff, t.nbytes(), gpu.stream()), cudaSuccess);
}

inline std::vector<float> download(CudaBackend& gpu, const Tensor& t) {
    std::vector<float> out(static_cast<std::size_t>(t.numel()));
    if (t.dtype == DType::F32) {
        gpu.copy_to_host(out.data(), t, t.nbytes());
        gpu.synchronize();
    } else {
        std::vector<std::uint16_t> raw(out.size());
        gpu.copy_to_host(raw.data(), t, t.nbytes());
        gpu.synchronize();
        tensor::convert_to_f32(t.dtype, raw.data(), out.data(), out.size());
    }
    return out;
}

inline Tensor host_view(std::vector<float>& v, std::initializer_list<std::int64_t> dims) {
    return Tensor(v.data(), DType::F32, dims);
}
inline Tensor host_view(std::vector<std::int32_t>& v, std::initializer_list<std::int64_t> dims) {
    return Tensor(v.data(), DType::I32, dims);
}

// ||out - ref|| / ||ref||; any non-finite output counts as a total failure.
inline double rel_error(const std::vector<float>& out, const std::vector<float>& ref) {
    EXPECT_EQ(out.size(), ref.size());
    double diff = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < out.size() && i < ref.size(); ++i) {
        if (!std::isfinite(out[i])) return INFINITY;
        diff += (double(out[i]) - ref[i]) * (double(out[i]) - ref[i]);
        norm += double(ref[i]) * ref[i];
    }
    return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

// bf16 storage rounds to 2^-9 relative; f32 accumulation in different orders adds a little.
constexpr double kBf16Tolerance = 1e-2;

class CudaTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!has_gpu()) GTEST_SKIP() << "no CUDA device";
        auto backend = CudaBackend::create(0, options());
        ASSERT_TRUE(backend.ok()) << backend.error().message;
        gpu_ = std::move(*backend);
    }
    virtual CudaBackendOptions options() const { return {}; }

    std::unique_ptr<CudaBackend> gpu_;
    CpuBackend cpu_;
    std::mt19937 rng_{1234};
};

}  // namespace inferscale::cuda_test
