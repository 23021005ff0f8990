#pragma once
// CpuBackend: the Backend on host memory. Activations and KV pages are f32; matrix weights keep
// the precision their checkpoint stored (f32, bf16 or f16: widening is exact, and 16-bit
// weights halve the bandwidth of memory-bound decode; ggml blocks (Q8_0 ... Q6_K, IQ4_NL,
// IQ4_XS) stay blocks and multiply as llama.cpp's CPU backend does, see matmul_quantized.cpp);
// vectors (norms, biases) become f32.
// Ops run eagerly on the calling thread plus an OpenMP team; `synchronize` is a no-op.

#include <cstdint>
#include <optional>
#include <vector>

#include "backends/cpu/ggml_isa.h"
#include "tensor/backend.h"

namespace inferscale::backends::cpu {

// How the non-matmul ops round. Reference: plain f32 as transformers computes (the golden tests'
// fp32 tolerance). Ggml: llama.cpp's CPU arithmetic bit for bit (RMSNorm summed in double,
// ggml's exp approximation in softmax and SiLU, its reduction orders in attention; see
// ggml_arith.h) in the build of llama.cpp `ggml_isa` names (AVX-512 or AVX2; by default the
// host's), so a GGUF model greedy-decodes exactly as llama.cpp does. Auto: Reference
// until the first block-quantized matrix (a GGUF Q8_0 ... IQ4_XS weight) is uploaded, Ggml from
// then on; block-quantized matmuls always follow ggml (matmul_quantized.cpp, matmul_kquant.cpp).
enum class Arithmetic { Auto, Reference, Ggml };

struct CpuBackendOptions {
    // OpenMP threads for every op; 0 keeps the OpenMP default (all cores).
    int num_threads = 0;
    // Store f32 matrices as bf16 (lossy): halves decode bandwidth. Meant for weights that were
    // quantized anyway (GGUF Q4/Q8 arrive dequantized to f32); off keeps results exact.
    bool narrow_f32_matrices = false;
    Arithmetic arithmetic = Arithmetic::Auto;
    // Whose build the Ggml arithmetic reproduces; unset: the host's (host_ggml_isa).
    std::optional<GgmlIsa> ggml_isa = std::nullopt;
};

class CpuBackend : public tensor::Backend {
  public:
    explicit CpuBackend(CpuBackendOptions options = {});

    std::string_view name() const override { return "cpu"; }
    tensor::Device device() const override { return tensor::Device::Cpu; }
    tensor::DType activation_dtype() const override { return tensor::DType::F32; }
    tensor::DType kv_dtype() const override { return tensor::DType::F32; }

    Result<tensor::Buffer> allocate(std::size_t bytes) override;
    void free_buffer(void* data, std::size_t bytes) override;
    void copy_from_host(tensor::Tensor dst, const void* src, std::size_t bytes) override;
    void copy_to_host(void* dst, const tensor::Tensor& src, std::size_t bytes) override;
    void fill_zero(tensor::Tensor t) override;
    void fill_random(tensor::Tensor t, std::uint64_t seed, float scale, float offset) override;
    void synchronize() override {}
    // Copies run at once on the calling thread: nothing to wait for afterwards.
    std::uint64_t copy_from_host_async(tensor::Tensor dst, const void* src,
                                       std::size_t bytes) override {
        copy_from_host(dst, src, bytes);
        return 0;
    }
    std::uint64_t copy_to_host_async(void* dst, const tensor::Tensor& src,
                                     std::size_t bytes) override {
        copy_to_host(dst, src, bytes);
        return 0;
    }
    Result<tensor::DeviceWeight> upload_weight(const tensor::Tensor& host) override;

    void embedding(const tensor::Tensor& table, const tensor::Tensor& ids,
                   tensor::Tensor out) override;
    void gather_rows(const tensor::Tensor& x, const tensor::Tensor& rows,
                     tensor::Tensor out) override;
    void rms_norm(const tensor::Tensor& x, const tensor::Tensor& weight, float eps,
                  tensor::Tensor out) override;
    // Target by target; epilogues run unfused.
    using tensor::Backend::linear;
    void linear(const tensor::LinearArgs& args) override;
    void add(tensor::Tensor x, const tensor::Tensor& y) override;
    void layer_norm(const tensor::Tensor& x, const tensor::Tensor& weight,
                    const tensor::Tensor& bias, float eps, tensor::Tensor out) override;
    void convert(const tensor::Tensor& src, tensor::Tensor dst) override;
    void gelu(tensor::Tensor x) override;
    void sequence_attention(const tensor::Tensor& q, const tensor::Tensor& k,
                            const tensor::Tensor& v, const tensor::SequenceAttentionArgs& args,
                            tensor::Tensor out) override;
    void swiglu(const tensor::Tensor& gate, const tensor::Tensor& up, tensor::Tensor out) override;
    void geglu(const tensor::Tensor& gate, const tensor::Tensor& up, tensor::Tensor out) override;
    void scale(tensor::Tensor x, float factor) override;
    // The KV write and attention run unfused.
    void rope(const tensor::RopeArgs& args) override;
    void write_kv(const tensor::Tensor& k, const tensor::Tensor& v, const tensor::Tensor& slots,
                  const tensor::KvPages& pages) override;
    void paged_attention(const tensor::Tensor& q, const tensor::KvPages& pages,
                         const tensor::PagedAttentionArgs& args, tensor::Tensor out) override;
    // In inject.cpp.
    void inject_chunks(const tensor::InjectArgs& args,
                       const tensor::RopeTables& tables) override;
    void argmax(const tensor::Tensor& logits, const tensor::Tensor& allowed,
                tensor::Tensor ids) override;
    // In dot_top_k.cpp: retrieval::VectorIndex's arithmetic.
    void dot_top_k(const tensor::Tensor& matrix, const tensor::Tensor& query, tensor::Tensor rows,
                   tensor::Tensor scores) override;

    // Whether the ops currently use ggml's arithmetic (see Arithmetic).
    bool ggml_arithmetic() const { return ggml_; }
    GgmlIsa ggml_isa() const { return isa_; }

  private:
    CpuBackendOptions options_;
    bool ggml_ = false;
    GgmlIsa isa_;
    // Widened weight rows for sgemm on 16-bit weights; grows to its largest size once.
    std::vector<float> convert_scratch_;
    // Activation rows quantized to Q8_0 / Q8_1 blocks for block-quantized weights.
    std::vector<std::uint8_t> quant_scratch_;
};

}  // namespace inferscale::backends::cpu
