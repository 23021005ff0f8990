// CudaBackend::quantized_linear_group: linears whose weights are ggml blocks (upload_weight
// keeps a GGUF file's blocks as they are). One token: consecutive targets of one K-quant type
// take the ring GEMV (quant_gemv_ring.cu), one launch for them all, x quantized inside it. A few
// tokens stream the weight once, so the GEMV reads the blocks and dequantizes in registers, on
// int8 activations quantized once for the group (as llama.cpp's CUDA backend does): the weight
// bytes moved are the file's. Past kQuantGemvMaxRows tokens a linear is worth the tensor cores:
// the weight is dequantized into the bf16 scratch and takes the bf16 paths (linear_group), one
// target after another.

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/linear_small.h"

namespace inferscale::backends::cuda {

using tensor::DType;
using tensor::Tensor;

namespace {

QuantLinearTarget quant_target(const tensor::LinearTarget& t) {
    return {
        t.w.data, t.w.dtype,   t.bias.empty() ? nullptr : t.bias.data, t.bias.dtype == DType::F32,
        t.y.data, t.w.shape[0]};
}

}  // namespace

bool CudaBackend::quantized_gated_gemv(const Tensor& x,
                                       std::span<const tensor::LinearTarget> gate_up) {
    if (x.shape[0] != 1 || gate_up.size() != 2 || gate_up[0].y.dtype != DType::BF16) return false;
    const QuantLinearTarget q[2] = {quant_target(gate_up[0]), quant_target(gate_up[1])};
    return launch_quant_gemv_ring(x.data, x.shape[1], q, true, false, num_sms_, stream_);
}

void CudaBackend::quantized_linear_group(const Tensor& x,
                                         std::span<const tensor::LinearTarget> targets) {
    const std::int64_t n = x.shape[0], in = x.shape[1];
    // Targets the ring GEMV took (one token), by bit.
    IS_CHECK(targets.size() < 32) << targets.size() << " targets in one linear";
    std::uint32_t ringed = 0;
    for (std::size_t i = 0; n == 1 && i < targets.size();) {
        const tensor::LinearTarget& first = targets[i];
        QuantLinearTarget run[kSmallLinearMaxTargets];
        std::size_t count = 0;
        while (i + count < targets.size() && count < std::size(run) &&
               targets[i + count].w.dtype == first.w.dtype &&
               targets[i + count].y.dtype == first.y.dtype) {
            run[count] = quant_target(targets[i + count]);
            ++count;
        }
        if (tensor::is_block_quantized(first.w.dtype) &&
            launch_quant_gemv_ring(x.data, in, {run, count}, false, first.y.dtype == DType::F32,
                                   num_sms_, stream_)) {
            ringed |= ((1u << count) - 1) << i;
        }
        i += count;
    }
    const bool gemv = n <= kQuantGemvMaxRows;
    const bool any_left = ringed != (1u << targets.size()) - 1;
    const QuantActivations xq = gemv && any_left ? quant_activations(n, in) : QuantActivations{};
    if (gemv && any_left) launch_quantize_activations(x.data, n, in, xq, stream_);
    for (std::size_t i = 0; i < targets.size(); ++i) {
        const tensor::LinearTarget& t = targets[i];
        if ((ringed >> i) & 1u) continue;
        if (!tensor::is_block_quantized(t.w.dtype)) {
            linear_group(x, {&t, 1});
            continue;
        }
        const std::int64_t out = t.w.shape[0];
        if (gemv) {
            launch_quant_gemv(xq, n, in, quant_target(t), t.y.dtype == DType::F32, stream_);
            continue;
        }
        IS_CHECK(static_cast<std::size_t>(out * in) * 2 <= dequant_scratch_bytes_)
            << "block weight [" << out << "," << in << "] without its dequantization scratch";
        tensor::LinearTarget wide = t;
        wide.w = Tensor(dequant_scratch_, DType::BF16, {out, in}, tensor::Device::Cuda);
        launch_dequantize_rows(t.w.data, t.w.dtype, in, out, nullptr, out, dequant_scratch_,
                               DType::BF16, stream_);
        linear_group(x, {&wide, 1});
    }
}

}  // namespace inferscale::backends::cuda
