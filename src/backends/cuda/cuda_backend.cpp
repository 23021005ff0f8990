// CudaBackend construction, memory, weight upload and the dispatch of the simple op families.
// RoPE, KV writes and attention are in paged_attention.cpp, linears in linear.cpp.

#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_sampling.h"
#include "backends/cuda/linear_small.h"
#include "backends/cuda/lt_matmul.h"
#include "tensor/random_fill.h"

namespace inferscale::backends::cuda {
namespace {

using tensor::DType;
using tensor::Tensor;

Error cuda_error(const std::string& what, cudaError_t err) {
    return make_error("cuda backend: " + what + ": " + cudaGetErrorName(err) + " (" +
                      cudaGetErrorString(err) + ")");
}

// Upload conversions go through a bounded device staging buffer, chunk by chunk.
constexpr std::size_t kStagingBytes = std::size_t{64} << 20;

// A scratch allocation made once at creation (at least 256 bytes, so it is never null).
template <class T>
Status allocate_scratch(T** p, std::size_t bytes, const std::string& what) {
    const cudaError_t err = cudaMalloc(p, std::max<std::size_t>(bytes, 256));
    if (err == cudaSuccess) return {};
    cudaGetLastError();
    return cuda_error(what, err);
}

void check_decode_options(const DecodeAttentionOptions& o) {
    IS_CHECK(o.split_tokens >= 1 && o.min_split_tokens >= 1 && o.ctas_per_sm >= 0 &&
             o.tensor_core_min_pairs >= 0)
        << "decode options: split_tokens " << o.split_tokens << ", min_split_tokens "
        << o.min_split_tokens << ", ctas_per_sm " << o.ctas_per_sm << ", tensor_core_min_pairs "
        << o.tensor_core_min_pairs;
}

}  // namespace

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(int device,
                                                         const CudaBackendOptions& options) {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        cudaGetLastError();  // clear it: no device is an expected condition here
        return cuda_error("no usable CUDA device", err);
    }
    if (device < 0 || device >= count) {
        return make_error("cuda backend: device " + std::to_string(device) + " not present (" +
                          std::to_string(count) + " devices)");
    }
    IS_CHECK(options.max_kv_splits >= 1 && options.max_kv_splits <= kMaxDecodeSplits)
        << "max_kv_splits " << options.max_kv_splits << " (1.." << kMaxDecodeSplits << ")";
    check_decode_options(options.decode);
    std::unique_ptr<CudaBackend> backend(new CudaBackend(device, options));
    IS_RETURN_IF_ERROR(backend->init());
    return backend;
}

Result<std::unique_ptr<tensor::Backend>> make_cuda_backend(int device,
                                                           const CudaBackendOptions& options) {
    std::unique_ptr<CudaBackend> backend = IS_TRY(CudaBackend::create(device, options));
    return std::unique_ptr<tensor::Backend>(std::move(backend));
}

void CudaBackend::set_decode_options(const DecodeAttentionOptions& o) {
    check_decode_options(o);
    options_.decode = o;
}

CudaBackend::CudaBackend(int device, const CudaBackendOptions& options)
    : device_(device), options_(options), pinned_(options.pinned_cache_bytes) {}

Status CudaBackend::init() {
    cudaError_t err = cudaSetDevice(device_);
    if (err != cudaSuccess) return cuda_error("cudaSetDevice", err);
    IS_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device_));
    IS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    IS_RETURN_IF_ERROR(allocate_scratch(&attention_workspace_,
                                        options_.attention_workspace_bytes,
                                        "attention workspace"));
    IS_RETURN_IF_ERROR(allocate_scratch(&cublas_workspace_, options_.cublas_workspace_bytes,
                                        "cublas workspace"));
    IS_RETURN_IF_ERROR(
        allocate_scratch(&decode_item_counter_, 2 * sizeof(int), "decode item counters"));
    IS_CUDA_CHECK(cudaMemset(decode_item_counter_, 0, 2 * sizeof(int)));
    IS_RETURN_IF_ERROR(
        allocate_scratch(&split_arrivals_, kSplitArrivals * sizeof(int), "split arrivals"));
    IS_CUDA_CHECK(cudaMemset(split_arrivals_, 0, kSplitArrivals * sizeof(int)));
    IS_RETURN_IF_ERROR(allocate_scratch(&linear_partials_, options_.small_linear_scratch_bytes,
                                        "small linear scratch"));
    IS_RETURN_IF_ERROR(allocate_scratch(&linear_counters_, kSmallLinearCounters * sizeof(int),
                                        "small linear counters"));
    IS_RETURN_IF_ERROR(allocate_scratch(&stacked_output_, options_.stacked_linear_scratch_bytes,
                                        "stacked linear output"));
    IS_CUDA_CHECK(cudaMemset(linear_counters_, 0, kSmallLinearCounters * sizeof(int)));
    IS_RETURN_IF_ERROR(allocate_scratch(&side_cublas_workspace_, options_.cublas_workspace_bytes,
                                        "side cublas workspace"));
    IS_CUDA_CHECK(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking));
    IS_CUDA_CHECK(cudaEventCreateWithFlags(&fork_event_, cudaEventDisableTiming));
    IS_CUDA_CHECK(cudaEventCreateWithFlags(&join_event_, cudaEventDisableTiming));
    const auto make_matmul = [&](void* workspace) {
        cublasLtHandle_t handle = nullptr;
        IS_CUBLAS_CHECK(cublasLtCreate(&handle));
        return std::make_unique<LtMatmul>(handle, workspace, options_.cublas_workspace_bytes,
                                          options_.autotune_matmul);
    };
    matmul_ = make_matmul(cublas_workspace_);
    side_matmul_ = make_matmul(side_cublas_workspace_);
    init_prefill_attention();
    decode_tc_limits_ = init_decode_tc_attention();
    cluster_linear_limits_ = init_small_linear();
    init_quant_gemv_ring();
    return {};
}

CudaBackend::~CudaBackend() {
    // Teardown errors cannot be handled; finish queued work, then release quietly.
    if (stream_ != nullptr) {
        cudaSetDevice(device_);
        cudaStreamSynchronize(stream_);
    }
    if (side_stream_ != nullptr) cudaStreamSynchronize(side_stream_);
    matmul_.reset();
    side_matmul_.reset();
    if (side_cublas_workspace_ != nullptr) cudaFree(side_cublas_workspace_);
    if (fork_event_ != nullptr) cudaEventDestroy(fork_event_);
    if (join_event_ != nullptr) cudaEventDestroy(join_event_);
    if (side_stream_ != nullptr) cudaStreamDestroy(side_stream_);
    if (attention_workspace_ != nullptr) cudaFree(attention_workspace_);
    if (cublas_workspace_ != nullptr) cudaFree(cublas_workspace_);
    if (decode_item_counter_ != nullptr) cudaFree(decode_item_counter_);
    if (split_arrivals_ != nullptr) cudaFree(split_arrivals_);
    if (linear_partials_ != nullptr) cudaFree(linear_partials_);
    if (linear_counters_ != nullptr) cudaFree(linear_counters_);
    if (stacked_output_ != nullptr) cudaFree(stacked_output_);
    if (dequant_scratch_ != nullptr) cudaFree(dequant_scratch_);
    if (quant_activations_ != nullptr) cudaFree(quant_activations_);
    if (dot_top_k_workspace_ != nullptr) cudaFree(dot_top_k_workspace_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaBackend::activate() const {
    int current = -1;
    IS_CUDA_CHECK(cudaGetDevice(&current));
    if (current != device_) IS_CUDA_CHECK(cudaSetDevice(device_));
}

// ---- memory ---------------------------------------------------------------------------------

Result<tensor::Buffer> CudaBackend::allocate(std::size_t bytes) {
    activate();
    void* p = nullptr;
    if (bytes > 0) {
        const cudaError_t err = cudaMalloc(&p, bytes);
        if (err != cudaSuccess) {
            cudaGetLastError();  // not sticky, but would confuse the next launch check
            return cuda_error("allocating " + std::to_string(bytes) + " bytes", err);
        }
    }
    return tensor::Buffer(this, p, bytes, tensor::Device::Cuda);
}

std::optional<tensor::Backend::MemoryInfo> CudaBackend::memory_info() {
    activate();
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
        cudaGetLastError();
        return std::nullopt;
    }
    return MemoryInfo{total, free};
}

void* CudaBackend::allocate_host(std::size_t bytes) {
    activate();
    return pinned_.allocate(bytes);
}

void CudaBackend::free_host(void* p) {
    activate();
    pinned_.free(p);
}

void CudaBackend::free_buffer(void* data, std::size_t) {
    activate();
    // cudaFree waits for the device, so no queued op can still be using the memory.
    IS_CUDA_CHECK(cudaFree(data));
}

void CudaBackend::copy_from_host(Tensor dst, const void* src, std::size_t bytes) {
    IS_CHECK(dst.device == tensor::Device::Cuda) << "copy_from_host into host memory";
    IS_CHECK(bytes <= dst.nbytes()) << bytes << " bytes into " << dst.nbytes();
    if (bytes == 0) return;
    activate();
    IS_CUDA_CHECK(cudaMemcpyAsync(dst.data, src, bytes, cudaMemcpyHostToDevice, stream_));
}

void CudaBackend::copy_to_host(void* dst, const Tensor& src, std::size_t bytes) {
    IS_CHECK(src.device == tensor::Device::Cuda) << "copy_to_host from host memory";
    IS_CHECK(bytes <= src.nbytes()) << bytes << " bytes from " << src.nbytes();
    if (bytes == 0) return;
    activate();
    IS_CUDA_CHECK(cudaMemcpyAsync(dst, src.data, bytes, cudaMemcpyDeviceToHost, stream_));
}

void CudaBackend::fill_zero(Tensor t) {
    IS_CHECK(t.device == tensor::Device::Cuda) << "fill_zero of host memory";
    if (t.nbytes() == 0) return;
    activate();
    IS_CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.nbytes(), stream_));
}

void CudaBackend::fill_random(Tensor t, std::uint64_t seed, float scale, float offset) {
    IS_CHECK(t.device == tensor::Device::Cuda) << "fill_random of host memory";
    IS_CHECK(t.data != nullptr || t.numel() == 0) << "fill_random of a null tensor";
    activate();
    if (tensor::is_block_quantized(t.dtype)) {
        IS_CHECK(offset == 0.0f) << "random blocks have no offset";
        IS_CHECK(t.rank == 2) << "random blocks make matrices";
        const Status scratch = reserve_block_weight_scratch(t.shape[0], t.shape[1]);
        IS_CHECK(scratch.ok()) << scratch.error().message;
        launch_fill_random_blocks(t.data, t.dtype, static_cast<std::int64_t>(t.nbytes()), seed,
                                  tensor::random_block_scale_bits(t.dtype, scale), stream_);
        return;
    }
    launch_fill_random(t.data, t.dtype, t.numel(), seed, scale, offset, stream_);
}

void CudaBackend::synchronize() {
    activate();
    IS_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

Result<tensor::DeviceWeight> CudaBackend::upload_weight(const Tensor& host) {
    IS_CHECK(host.device == tensor::Device::Cpu) << "weights arrive in host memory";
    IS_CHECK(host.rank >= 1) << "weight rank " << host.rank;
    const bool blocks = tensor::is_block_quantized(host.dtype);
    if (!blocks && host.dtype != DType::F32 && host.dtype != DType::F16 &&
        host.dtype != DType::BF16) {
        return make_error(std::string("cuda backend: cannot upload a ") +
                          std::string(tensor::dtype_name(host.dtype)) + " weight");
    }
    activate();
    // GGUF blocks stay the file's blocks (the linears dequantize them as they read); bf16
    // is copied; f32 and f16 are narrowed to bf16, what every other CUDA op reads.
    const DType dtype = blocks ? host.dtype : DType::BF16;
    const auto count = static_cast<std::size_t>(host.numel());
    tensor::DeviceWeight w;
    w.tensor = host;
    w.tensor.dtype = dtype;
    w.tensor.device = tensor::Device::Cuda;
    w.storage = IS_TRY(allocate(w.tensor.nbytes()));
    w.tensor.data = w.storage.data();
    if (count == 0) return w;
    if (blocks && host.rank == 2) {
        IS_RETURN_IF_ERROR(reserve_block_weight_scratch(host.shape[0], host.shape[1]));
    }
    if (host.dtype == dtype) {
        IS_CUDA_CHECK(cudaMemcpyAsync(w.tensor.data, host.data, host.nbytes(),
                                      cudaMemcpyHostToDevice, stream_));
        synchronize();  // `host` is only borrowed for the call
        return w;
    }
    const std::size_t elem = tensor::dtype_size(host.dtype);
    const std::size_t chunk = std::min(count, kStagingBytes / elem);
    tensor::Buffer staging = IS_TRY(allocate(chunk * elem));
    // Stream order keeps the next chunk's copy behind this chunk's conversion.
    for (std::size_t first = 0; first < count; first += chunk) {
        const std::size_t n = std::min(chunk, count - first);
        IS_CUDA_CHECK(cudaMemcpyAsync(staging.data(),
                                      static_cast<const char*>(host.data) + first * elem,
                                      n * elem, cudaMemcpyHostToDevice, stream_));
        launch_convert(staging.data(), host.dtype, static_cast<char*>(w.tensor.data) + first * 2,
                       DType::BF16, static_cast<std::int64_t>(n), stream_);
    }
    synchronize();  // before `staging` is freed; `host` is only borrowed for the call
    return w;
}

namespace {

// Grows the device buffer `p` of `bytes` to at least `want` bytes (its contents are lost).
Status grow(void*& p, std::size_t& bytes, std::size_t want, const char* what) {
    if (want <= bytes) return {};
    if (p != nullptr) IS_CUDA_CHECK(cudaFree(p));
    p = nullptr;
    bytes = 0;
    const cudaError_t err = cudaMalloc(&p, want);
    if (err != cudaSuccess) {
        cudaGetLastError();
        p = nullptr;
        return cuda_error("allocating " + std::to_string(want) + " bytes for " + what, err);
    }
    bytes = want;
    return {};
}

// Bytes of the int8 activations of n tokens of `in`, padded to 16 (their scales follow).
std::size_t quant_bytes(std::int64_t n, std::int64_t in) {
    return static_cast<std::size_t>(n * in + 15) / 16 * 16;
}

// Those quants, then their f32 scales, one per 32.
std::size_t quant_activation_bytes(std::int64_t n, std::int64_t in) {
    return quant_bytes(n, in) + static_cast<std::size_t>(n * (in / 32)) * sizeof(float);
}

}  // namespace

Status CudaBackend::reserve_block_weight_scratch(std::int64_t out, std::int64_t in) {
    const auto dequant = static_cast<std::size_t>(out * in) * 2;
    const std::size_t activations = quant_activation_bytes(kQuantGemvMaxRows, in);
    if (dequant <= dequant_scratch_bytes_ && activations <= quant_activations_bytes_) return {};
    activate();
    synchronize();  // the old buffers may still be read
    IS_RETURN_IF_ERROR(grow(dequant_scratch_, dequant_scratch_bytes_, dequant,
                            "the dequantized copy of a block weight"));
    return grow(quant_activations_, quant_activations_bytes_, activations,
                "the int8 activations of block weights");
}

QuantActivations CudaBackend::quant_activations(std::int64_t n, std::int64_t in) const {
    IS_CHECK(quant_activation_bytes(n, in) <= quant_activations_bytes_)
        << n << " x " << in << " activations past the block weights' scratch";
    auto* base = static_cast<char*>(quant_activations_);
    return {reinterpret_cast<std::int8_t*>(base),
            reinterpret_cast<float*>(base + quant_bytes(n, in))};
}

// ---- simple ops -----------------------------------------------------------------------------

void CudaBackend::embedding(const Tensor& table, const Tensor& ids, Tensor out) {
    check_device(table, 2, "embedding table");
    check_device(ids, DType::I32, 1, "embedding ids");
    check_device(out, 2, "embedding out");
    check_activation(out, "embedding out");
    IS_CHECK(out.shape[0] == ids.shape[0] && out.shape[1] == table.shape[1]) << "embedding shape";
    activate();
    if (tensor::is_block_quantized(table.dtype)) {
        launch_dequantize_rows(table.data, table.dtype, table.shape[1], ids.shape[0],
                               ids.as<std::int32_t>(), table.shape[0], out.data, out.dtype,
                               stream_);
        return;
    }
    launch_embedding(table.data, table.dtype, table.shape[0], table.shape[1],
                     ids.as<std::int32_t>(), ids.shape[0], out.data, out.dtype, stream_);
}

void CudaBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor out) {
    check_device(x, 2, "gather x");
    check_device(rows, DType::I32, 1, "gather rows");
    check_device(out, x.dtype, 2, "gather out");
    IS_CHECK(out.shape[0] == rows.shape[0] && out.shape[1] == x.shape[1]) << "gather shape";
    activate();
    launch_gather_rows(x.data, x.shape[0],
                       x.shape[1] * static_cast<std::int64_t>(tensor::dtype_size(x.dtype)),
                       rows.as<std::int32_t>(), rows.shape[0], out.data, stream_);
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor out) {
    check_device(x, 2, "rms_norm x");
    check_activation(x, "rms_norm x");
    check_device(weight, 1, "rms_norm weight");
    check_device(out, x.dtype, 2, "rms_norm out");
    IS_CHECK(x.shape == out.shape && weight.shape[0] == x.shape[1]) << "rms_norm shape";
    activate();
    // Without a residual x is only read.
    launch_rms_norm(x.data, nullptr, x.dtype, weight.data, weight.dtype, eps, x.shape[0],
                    x.shape[1], out.data, stream_);
}

void CudaBackend::add_rms_norm(Tensor x, const Tensor& y, const Tensor& weight, float eps,
                               Tensor out) {
    check_device(x, 2, "add_rms_norm x");
    check_activation(x, "add_rms_norm x");
    check_device(y, x.dtype, 2, "add_rms_norm y");
    check_device(weight, 1, "add_rms_norm weight");
    check_device(out, x.dtype, 2, "add_rms_norm out");
    IS_CHECK(x.shape == y.shape && x.shape == out.shape && weight.shape[0] == x.shape[1])
        << "add_rms_norm shape";
    activate();
    launch_rms_norm(x.data, y.data, x.dtype, weight.data, weight.dtype, eps, x.shape[0],
                    x.shape[1], out.data, stream_);
}

void CudaBackend::add(Tensor x, const Tensor& y) {
    IS_CHECK(x.device == tensor::Device::Cuda && y.device == tensor::Device::Cuda) << "add";
    check_activation(x, "add x");
    IS_CHECK(x.dtype == y.dtype && x.numel() == y.numel()) << "add shapes/dtypes";
    activate();
    launch_add(x.data, y.data, x.dtype, x.numel(), stream_);
}

void CudaBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor out) {
    gated(GateActivation::Silu, gate, up, out);
}

void CudaBackend::geglu(const Tensor& gate, const Tensor& up, Tensor out) {
    gated(GateActivation::GeluTanh, gate, up, out);
}

void CudaBackend::gated(GateActivation act, const Tensor& gate, const Tensor& up, Tensor out) {
    IS_CHECK(gate.device == tensor::Device::Cuda && up.device == tensor::Device::Cuda &&
             out.device == tensor::Device::Cuda)
        << "gated activation";
    check_activation(gate, "gated activation gate");
    IS_CHECK(gate.dtype == up.dtype && gate.dtype == out.dtype) << "gated activation dtypes";
    IS_CHECK(gate.numel() == up.numel() && gate.numel() == out.numel()) << "gated activation";
    activate();
    launch_gated(act, gate.data, up.data, out.data, gate.dtype, gate.numel(), stream_);
}

void CudaBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                             Tensor out) {
    check_device(x, 2, "layer_norm x");
    check_activation(x, "layer_norm x");
    check_device(weight, 1, "layer_norm weight");
    check_device(bias, weight.dtype, 1, "layer_norm bias");
    check_device(out, x.dtype, 2, "layer_norm out");
    IS_CHECK(x.shape == out.shape && weight.shape[0] == x.shape[1] && bias.shape[0] == x.shape[1])
        << "layer_norm shape";
    activate();
    launch_layer_norm(x.data, x.dtype, weight.data, bias.data, weight.dtype, eps, x.shape[0],
                      x.shape[1], out.data, stream_);
}

void CudaBackend::convert(const Tensor& src, Tensor dst) {
    check_on_device(src, "convert src");
    check_on_device(dst, "convert dst");
    IS_CHECK(src.numel() == dst.numel()) << "convert sizes";
    activate();
    launch_convert(src.data, src.dtype, dst.data, dst.dtype, src.numel(), stream_);
}

void CudaBackend::gelu(Tensor x) {
    IS_CHECK(x.device == tensor::Device::Cuda) << "gelu x";
    check_activation(x, "gelu x");
    activate();
    launch_gelu(x.data, x.dtype, x.numel(), stream_);
}

void CudaBackend::sequence_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                     const tensor::SequenceAttentionArgs& args, Tensor out) {
    check_device(q, 3, "sequence_attention q");
    check_activation(q, "sequence_attention q");
    check_device(k, q.dtype, 3, "sequence_attention k");
    check_device(v, q.dtype, 3, "sequence_attention v");
    check_device(out, q.dtype, 3, "sequence_attention out");
    check_device(args.seq_indptr, DType::I32, 1, "sequence_attention seq_indptr");
    IS_CHECK(q.shape == k.shape && q.shape == v.shape && q.shape == out.shape)
        << "sequence_attention shape";
    IS_CHECK(args.num_seqs > 0 && args.seq_indptr.shape[0] >= args.num_seqs + 1 &&
             args.max_seq_len > 0)
        << "sequence_attention args";
    activate();
    launch_sequence_attention(q.data, k.data, v.data, q.dtype, q.shape[0],
                              static_cast<int>(q.shape[1]), static_cast<int>(q.shape[2]),
                              args.seq_indptr.as<std::int32_t>(), args.num_seqs, args.max_seq_len,
                              args.scale, out.data, stream_);
}

void CudaBackend::scale(Tensor x, float factor) {
    IS_CHECK(x.device == tensor::Device::Cuda) << "scale x";
    check_activation(x, "scale x");
    activate();
    launch_scale(x.data, x.dtype, x.numel(), factor, stream_);
}

void CudaBackend::argmax(const Tensor& logits, const Tensor& allowed, Tensor ids) {
    check_device(logits, DType::F32, 2, "argmax logits");
    check_device(ids, DType::I32, 1, "argmax ids");
    IS_CHECK_EQ(ids.shape[0], logits.shape[0]);
    if (!allowed.empty()) {
        check_device(allowed, DType::I32, 2, "argmax allowed");
        IS_CHECK(allowed.shape[0] == logits.shape[0] &&
                 allowed.shape[1] == (logits.shape[1] + 31) / 32)
            << "argmax: the mask is not [rows, (vocab + 31) / 32]";
    }
    activate();
    argmax_rows(logits.as<float>(), allowed.empty() ? nullptr : allowed.as<std::uint32_t>(),
                logits.shape[0], logits.shape[1], ids.as<std::int32_t>(), stream_);
}

}  // namespace inferscale::backends::cuda
