// CudaBackend::quantized_linear_group: linears whose weights are ggml blocks (upload_weight
// keeps a GGUF file's blocks as they are). A few tokens stream the weight once, so the GEMV
// reads the blocks and dequantizes in registers, on int8 activations quantized once for the
// group (as llama.cpp's CUDA backend does): the weight bytes moved are the file's. Past
// kQuantGemvMaxRows tokens a linear is worth the tensor cores: the weight is dequantized into
// the bf16 scratch and takes the bf16 paths (linear_group), one target after another.

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"

namespace inferscale::backends::cuda {

using tensor::DType;
using tensor::Tensor;

void CudaBackend::quantized_linear_group(const Tensor& x,
                                         std::span<const tensor::LinearTarget> targets) {
    const std::int64_t n = x.shape[0], in = x.shape[1];
    const bool gemv = n <= kQuantGemvMaxRows;
    const QuantActivations xq = gemv ? quant_activations(n, in) : QuantActivations{};
    if (gemv) launch_quantize_activations(x.data, n, in, xq, stream_);
    for (const tensor::LinearTarget& t : targets) {
        if (!tensor::is_block_quantized(t.w.dtype)) {
            linear_group(x, {&t, 1});
            continue;
        }
        const std::int64_t out = t.w.shape[0];
        if (gemv) {
            const QuantLinearTarget q{t.w.data,  t.w.dtype, t.bias.empty() ? nullptr : t.bias.data,
                                      t.bias.dtype == DType::F32, t.y.data, out};
            launch_quant_gemv(xq, n, in, q, t.y.dtype == DType::F32, stream_);
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
