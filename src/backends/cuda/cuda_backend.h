#pragma once
// CudaBackend: the Backend on one NVIDIA GPU. Activations are bf16, KV pages bf16, logits f32;
// every op accumulates in f32. upload_weight stores every weight as bf16 (matrices feed
// cuBLASLt or the small-batch kernel; norm weights and biases are read as bf16 too), from
// f32, f16, bf16 or GGUF block-quantized (dequantized exactly on the host first).
// Element-wise ops, norms, RoPE and KV writes also accept f32 activations (all tensors of one
// call in one dtype); linear and attention need bf16 inputs.
//
// All ops enqueue on the backend's own stream and return at once: no allocation, no host
// synchronization, no device-to-host reads, so a step can be captured in a CUDA graph (after a
// warm-up step has built the cuBLASLt plans). The split-KV decode partials and the cuBLASLt
// workspace are allocated once at creation. Device-side index checks (token ids, positions,
// slots, page ids) trap the kernel: the error surfaces at the next synchronize and aborts.
// copy_from_host/copy_to_host are stream-ordered; with pageable host memory the runtime makes
// them safe to reuse or read on return, with pinned memory only after synchronize().

#include <cuda_runtime_api.h>

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/decode_schedule.h"
#include "backends/cuda/linear_small.h"
#include "backends/cuda/pinned_host_cache.h"
#include "backends/cuda/stream_stopwatch.h"
#include "backends/cuda/transfer_queue.h"
#include "backends/cuda/tuning_buckets.h"
#include "base/result.h"
#include "tensor/backend.h"

namespace inferscale::backends::cuda {

class LtMatmul;

// paged_attention's launches for one batch, planned from the host metadata (paged_attention.cpp).
struct AttentionShape;
struct AttentionPlan {
    PagedKvView view;
    AttentionBatch batch;
    std::optional<PrefillLaunch> prefill;  // sequences of more than one query row
    // Sequences of one query row (every row where the prefill kernel has no head_dim).
    std::optional<DecodeLaunch> decode;
    bool fast_decode = false;  // decode runs the fast kernel (decode_fast_supports)
};

// How paged_attention runs chunks of more than one query row.
struct PrefillAttentionOptions {
    // Wide tiles (two 16-row fragments a warp, head_dim <= 128) when they still give the GPU
    // this many blocks per SM; 0: always, negative: never.
    int wide_min_blocks_per_sm = 2;
};

// Decode attention's kernel choice and the tensor-core kernel's plan (paged_attention.cpp).
struct DecodeAttentionOptions {
    // Decode rows at head_dim 64/128 on the tensor-core kernel (attention_decode_tc.cu) when
    // the step has at least tensor_core_min_pairs (sequence, kv head) pairs (0: the SM count);
    // false, or fewer pairs, runs the CUDA-core kernels. Since the tensor-core kernel picks its
    // schedule per step (CTA items at small batches) it wins from one pair: against the
    // CUDA-core kernel from 132 pairs, same call on the H200, the batch-1 step is 1.6% / 4.9% /
    // 1.4% faster (llama / qwen / mistral) and batch 16 6.4-6.7%, batches 4 and 8 within the
    // spread.
    bool tensor_cores = true;
    int tensor_core_min_pairs = 1;
    // A split covers at least this many KV tokens (two iterations of the CUDA-core kernels'
    // four warps): shorter splits cost more in the merge and in per-block setup than they win
    // in parallelism. Batch 1 at 1K context with 8 kv heads thus runs 17 splits = 136 blocks.
    // Same-call A/B on the H200 against 64 at batch 1: 32 1.001x, 128 1.021x, 256 1.055x the
    // step time.
    int min_split_tokens = 64;
    // KV tokens per (split, sequence, kv head) item of the tensor-core kernel, at most (small
    // batches split finer). Measured on the H200 (Llama-3.1-8B, warp items): 1024 is within 3%
    // of the best of 256/512/1024/2048 at batch 64/128/256 x 1K and best for 100 sequences at
    // 1750 tokens replayed under a 4096 bound.
    int split_tokens = 1024;
    // CTAs of the tensor-core kernel's persistent grid per SM; 0: as many as fit.
    int ctas_per_sm = 0;
    // How the tensor-core kernel's warps take its (split, sequence, kv head) items: Auto picks
    // per step shape (decode_schedule.h's choose_tc_schedule; Llama-3.1-8B at 1K context: CTA
    // items at batch 1 and 32-64, warp items from 128).
    DecodeSchedule schedule = DecodeSchedule::Auto;
};

// How a linear group (the targets of one Backend::linear) runs (linear.cpp).
enum class LinearPath : std::uint8_t {
    SmallKernel,  // the small-batch kernel (linear_small.cu), every target in one launch
    PerTarget,    // cuBLASLt, one GEMM per target
    Stacked,      // cuBLASLt, one GEMM over targets whose weights (and biases) adjoin in memory
                  // as consecutive rows (model/stacked_weight.h), then its columns split
};

// Which paths a linear group may take; the fastest available one is chosen per group shape.
struct LinearPathOptions {
    // The small-batch kernel only for groups of at most this many tokens (up to
    // kSmallLinearMaxRows); 0: never.
    int small_max_rows = 128;
    // The stacked GEMM for adjoining targets whose stacked output fits the backend's scratch.
    // At the Llama-3.1-8B shape cuBLASLt takes as long for k or v (1024 rows) as for o (4096)
    // at 32-128 tokens, ~11 us each: one 6144-row GEMM streams all three at o's rate.
    bool stacked = true;
    // Time the available paths once per new group shape and token-count bucket (outside graph
    // capture) and keep the fastest: on the H200 the kernel won for q/k/v at 1..16 tokens and
    // lost for gate/up at every size, so no fixed cut-over fits every shape. A shape first seen
    // inside a capture, or with this false, takes the kernel where it may, else the stack.
    bool autotune = true;
    // One-token groups on the small-batch path run on the GEMV (one warp per weight row);
    // false: on the mma kernel like larger groups. At 2 and 4 tokens the GEMV's f32 FMAs
    // already cost more than its longer reads gain.
    bool gemv = true;
    // Groups of at most this many tokens whose targets run as separate cuBLASLt GEMMs (gate
    // and up) run every second target on a side stream, forked from and joined back into the
    // backend's stream, so one GEMM's ramp and tail overlap the other's stream of weights; 0:
    // never. Measured on the H200 (gate and up of 32 layers as CUDA graphs): 60.9 -> 57.2 us a
    // pair at 32 tokens, 60.7 -> 58.6 at 64, 64.7 -> 63.1 at 128 (a 4.24 TB/s copy); in the
    // model TTFT-32 -2.0%, decode b=64 / 128 +0.9% / +0.6%, b=256 -0.5%.
    int concurrent_max_rows = 128;
};
struct CudaBackendOptions {
    // Split-KV decode partials: [seqs, heads, splits, head_dim + 2] f32. Decode uses as many
    // splits (up to max_kv_splits, at most kMaxDecodeSplits) as fit; with less room it splits
    // less, never fails.
    std::size_t attention_workspace_bytes = std::size_t{64} << 20;
    int max_kv_splits = 32;
    // cuBLASLt's scratch; 32 MiB is what NVIDIA suggests for Hopper.
    std::size_t cublas_workspace_bytes = std::size_t{32} << 20;
    // Freed pinned host buffers kept for reuse (allocate_host / free_host), at most this many
    // bytes (PinnedHostCache).
    std::size_t pinned_cache_bytes = std::size_t{1} << 30;
    // Fuse linear's bias into the cuBLASLt epilogue when it can; false always uses the
    // separate bias kernel (tests use it to cover both paths).
    bool fuse_bias = true;
    // Time cuBLASLt's top heuristic candidates once per new GEMM shape (outside graph capture)
    // and keep the fastest; false takes the heuristic's first choice.
    bool autotune_matmul = true;
    LinearPathOptions linear_paths;
    // The small-batch kernel's split-K partials; with less room it splits less.
    std::size_t small_linear_scratch_bytes = std::size_t{8} << 20;
    // The stacked GEMM's output before its columns are split: [n, sum of outs] in y's dtype.
    std::size_t stacked_linear_scratch_bytes = std::size_t{16} << 20;
    DecodeAttentionOptions decode;
    PrefillAttentionOptions prefill;
};

class CudaBackend final : public tensor::Backend {
  public:
    // An Error when there is no CUDA device `device` (or no driver) or its memory is full.
    static Result<std::unique_ptr<CudaBackend>> create(int device,
                                                       const CudaBackendOptions& options = {});
    ~CudaBackend() override;
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    std::string_view name() const override { return "cuda"; }
    tensor::Device device() const override { return tensor::Device::Cuda; }
    tensor::DType activation_dtype() const override { return tensor::DType::BF16; }
    tensor::DType kv_dtype() const override { return tensor::DType::BF16; }

    Result<tensor::Buffer> allocate(std::size_t bytes) override;
    void free_buffer(void* data, std::size_t bytes) override;
    void copy_from_host(tensor::Tensor dst, const void* src, std::size_t bytes) override;
    void copy_to_host(void* dst, const tensor::Tensor& src, std::size_t bytes) override;
    void fill_zero(tensor::Tensor t) override;
    void fill_random(tensor::Tensor t, std::uint64_t seed, float scale, float offset) override;
    void synchronize() override;
    Result<tensor::DeviceWeight> upload_weight(const tensor::Tensor& host) override;

    void embedding(const tensor::Tensor& table, const tensor::Tensor& ids,
                   tensor::Tensor out) override;
    void gather_rows(const tensor::Tensor& x, const tensor::Tensor& rows,
                     tensor::Tensor out) override;
    void rms_norm(const tensor::Tensor& x, const tensor::Tensor& weight, float eps,
                  tensor::Tensor out) override;
    void add_rms_norm(tensor::Tensor x, const tensor::Tensor& y, const tensor::Tensor& weight,
                      float eps, tensor::Tensor out) override;
    // In linear.cpp: the small-batch kernel for few tokens, cuBLASLt otherwise; the SwiGLU
    // epilogue fused where one token takes the GEMV (paged_attention.cpp: RopeAttention).
    using tensor::Backend::linear;
    void linear(const tensor::LinearArgs& args) override;
    void add(tensor::Tensor x, const tensor::Tensor& y) override;
    void layer_norm(const tensor::Tensor& x, const tensor::Tensor& weight,
                    const tensor::Tensor& bias, float eps, tensor::Tensor out) override;
    void convert(const tensor::Tensor& src, tensor::Tensor dst) override;
    void gelu(tensor::Tensor x) override;
    // Needs head_dim <= 128 and sequences short enough for their scores to fit shared memory
    // (about 11K rows).
    void sequence_attention(const tensor::Tensor& q, const tensor::Tensor& k,
                            const tensor::Tensor& v, const tensor::SequenceAttentionArgs& args,
                            tensor::Tensor out) override;
    void swiglu(const tensor::Tensor& gate, const tensor::Tensor& up,
                tensor::Tensor out) override;
    void geglu(const tensor::Tensor& gate, const tensor::Tensor& up,
               tensor::Tensor out) override;
    void scale(tensor::Tensor x, float factor) override;
    // In paged_attention.cpp: q and k in one launch, the KV write in the same launch where it
    // can be, and the attention too where the batch is decode rows on the fast kernel (small
    // batches), which then leaves q and k unrotated.
    void rope(const tensor::RopeArgs& args) override;
    void write_kv(const tensor::Tensor& k, const tensor::Tensor& v, const tensor::Tensor& slots,
                  const tensor::KvPages& pages) override;
    void paged_attention(const tensor::Tensor& q, const tensor::KvPages& pages,
                         const tensor::PagedAttentionArgs& args, tensor::Tensor out) override;
    // In inject.cu.
    void inject_chunks(const tensor::InjectArgs& args,
                       const tensor::RopeTables& tables) override;

    // Greedy sampling on the device: ids[r] = argmax of logits row r (first on ties).
    //   logits [rows, vocab] f32, ids [rows] i32
    void argmax(const tensor::Tensor& logits, const tensor::Tensor& allowed,
                tensor::Tensor ids) override;
    // In dot_top_k.cu: the product kernel, then bitonic selection passes. Its workspace (about
    // 4 bytes a row) grows at the first search of a larger matrix, which must not be in a
    // graph capture; a device out of memory there aborts.
    void dot_top_k(const tensor::Tensor& matrix, const tensor::Tensor& query, tensor::Tensor rows,
                   tensor::Tensor scores) override;

    // Pinned host memory and CUDA graphs of the backend's stream (cuda_graph.cpp). Capture is
    // thread-local: other threads may keep using the runtime meanwhile.
    void* allocate_host(std::size_t bytes) override;
    void free_host(void* p) override;
    std::optional<MemoryInfo> memory_info() override;
    bool supports_graphs() const override { return true; }
    Status begin_capture() override;
    Result<std::unique_ptr<tensor::CapturedGraph>> end_capture() override;
    void replay(const tensor::CapturedGraph& graph) override;
    // GEMM algorithms and the small-linear choice are tuned per token-count bucket on first use.
    bool wants_warm_up() const override { return true; }

    int device_index() const { return device_; }
    // Replaces the decode attention options (benchmarks compare plans); takes effect at the
    // next paged_attention (graphs keep what they recorded).
    void set_decode_options(const DecodeAttentionOptions& o);
    void set_prefill_options(const PrefillAttentionOptions& o) { options_.prefill = o; }
    // Replaces the linear path options (benchmarks compare the paths); graphs keep what they
    // recorded, and shapes already timed keep their measured choice.
    void set_linear_path_options(const LinearPathOptions& o) { options_.linear_paths = o; }
    const LinearPathOptions& linear_path_options() const { return options_.linear_paths; }
    // The stream every op is enqueued on (for graph capture and interop).
    cudaStream_t stream() const { return stream_; }

    std::uint64_t copy_from_host_async(tensor::Tensor dst, const void* src,
                                       std::size_t bytes) override;
    void copy_from_host_untracked(tensor::Tensor dst, const void* src, std::size_t bytes) override;
    tensor::TransferTotals transfer_totals() const override;
    bool transfer_done(std::uint64_t ticket) override;
    void order_after(std::uint64_t ticket) override;
    std::uint64_t copy_to_host_async(void* dst, const tensor::Tensor& src,
                                     std::size_t bytes) override;
    std::uint64_t compute_fence() override;
    void transfer_after(std::uint64_t fence) override;
    void wait_for(std::uint64_t fence, std::uint64_t ticket) override;

  private:
    CudaBackend(int device, const CudaBackendOptions& options);
    Status init();
    // Makes this backend's device current for the calling thread.
    void activate() const;
    // True while begin_capture has recorded and end_capture not yet closed the stream.
    bool capturing_ = false;

    int device_ = 0;
    CudaBackendOptions options_;
    int num_sms_ = 0;
    DecodeTcLimits decode_tc_limits_;  // CTAs per SM of each tensor-core decode kernel
    ClusterLinearLimits cluster_linear_limits_;  // CTAs at once per cluster size
    cudaStream_t stream_ = nullptr;
    void* attention_workspace_ = nullptr;  // options_.attention_workspace_bytes
    void* cublas_workspace_ = nullptr;     // options_.cublas_workspace_bytes
    int* decode_item_counter_ = nullptr;   // DecodeLaunch::item_counter (two ints)
    // DecodeLaunch::split_arrivals: (sequence, kv head) pairs the fast decode kernel can merge
    // itself; larger batches (which a fast-kernel step rarely is) take the merge kernel.
    static constexpr std::int64_t kSplitArrivals = 4096;
    int* split_arrivals_ = nullptr;
    // paged_attention's checks and plan (no launch), and its launches.
    AttentionPlan plan_attention(const tensor::Tensor& q, const tensor::KvPages& pages,
                                 const tensor::PagedAttentionArgs& args,
                                 const tensor::Tensor& out) const;
    // plan_attention's two halves, from what it read of the batch: the prefill launch of the
    // sequences of several query rows, and the decode launch of those of one.
    void plan_prefill(const AttentionShape& shape, AttentionPlan& plan) const;
    void plan_decode(const AttentionShape& shape, AttentionPlan& plan) const;
    void launch_attention(const tensor::Tensor& q, const AttentionPlan& plan, tensor::Tensor out);
    // The launches of a rope with the KV write, and with the attention (planned), operands
    // checked.
    void enqueue_rope_write_kv(const tensor::RopeArgs& args, const PagedKvView& view);
    void enqueue_rope_attention(const tensor::RopeArgs& args, const PagedKvView& view,
                                AttentionPlan plan);
    // The RopeAttention epilogue: where q/k/v take the stacked GEMM and the attention is not
    // the fast kernel's, the rotation and KV write read the GEMM's stacked output (no column
    // split launch; the k and v targets stay unwritten).
    void linear_rope_attention(const tensor::LinearArgs& args);
    PinnedHostCache pinned_;               // allocate_host / free_host
    // The small-batch linear kernel for `targets` when it takes them; false enqueues nothing.
    bool small_linear(const tensor::Tensor& x, std::span<const tensor::LinearTarget> targets);
    SmallLinearScratch small_linear_scratch() const;
    // A linear of no epilogue: the small-batch kernel, the stacked GEMM or a GEMM per target.
    void linear_group(const tensor::Tensor& x, std::span<const tensor::LinearTarget> targets);
    // The SwiGLU epilogue fused as one GEMV launch, where one token's group takes the
    // small-batch kernel anyway; false enqueues nothing.
    bool gated_gemv(const tensor::Tensor& x, std::span<const tensor::LinearTarget> gate_up);
    // swiglu and geglu: out = act(gate) * up.
    void gated(GateActivation act, const tensor::Tensor& gate, const tensor::Tensor& up,
               tensor::Tensor out);
    // Whether LinearPath::Stacked can run `targets` on x: weights (and biases) adjoin, one
    // output dtype, 16-byte output rows, and the stacked output fits the scratch.
    bool stackable(const tensor::Tensor& x, std::span<const tensor::LinearTarget> targets) const;
    // linear_group's operand checks: x bf16 [n, in], each target's weight, bias and output
    // against it.
    static void check_linear_group(const tensor::Tensor& x,
                                   std::span<const tensor::LinearTarget> targets);
    // LinearPath::Stacked (stackable must hold): stacked_gemm, then its columns split into the
    // targets' outputs.
    void stacked_linear(const tensor::Tensor& x, std::span<const tensor::LinearTarget> targets);
    // One cuBLASLt GEMM over the targets' adjoining rows into the stacked scratch; returns that
    // output, [n, sum of outs] in the targets' dtype.
    tensor::Tensor stacked_gemm(const tensor::Tensor& x,
                                std::span<const tensor::LinearTarget> targets);
    // stacked_gemm's output split into the targets' outputs, column range by column range.
    void split_stacked(const tensor::Tensor& stacked,
                       std::span<const tensor::LinearTarget> targets);
    // The path for this group: measured once per shape and bucket among those the options and
    // the group allow (the small kernel up to small_max_rows tokens, the stack where stackable).
    LinearPath choose_linear_path(const tensor::Tensor& x,
                                  std::span<const tensor::LinearTarget> targets);
    // A stream and the cuBLASLt instance (with its own workspace) that enqueues on it.
    struct GemmLane {
        cudaStream_t stream;
        LtMatmul* matmul;
    };
    // LinearPath::PerTarget: a cuBLASLt GEMM per target, every second one on the side lane
    // where options_.linear_paths.concurrent_max_rows allows (graph capture records the fork
    // and the join as two branches).
    void per_target_linear(const tensor::Tensor& x,
                           std::span<const tensor::LinearTarget> targets);
    // One target through cuBLASLt (the bias fused in its epilogue when it can be).
    void lt_linear(const tensor::Tensor& x, const tensor::LinearTarget& target, GemmLane lane);
    // linear_group where a weight is block-quantized (linear_quantized.cpp): one token, the
    // ring GEMV for K-quant targets; up to kQuantGemvMaxRows tokens, x quantized once into
    // quant_activations_ and the quantized GEMV per target; past it each weight dequantized
    // into dequant_scratch_ for the bf16 paths.
    void quantized_linear_group(const tensor::Tensor& x,
                                std::span<const tensor::LinearTarget> targets);
    // gate and up of one token through the ring GEMV with the SwiGLU epilogue; false when it
    // does not take them (linear_quantized.cpp).
    bool quantized_gated_gemv(const tensor::Tensor& x,
                              std::span<const tensor::LinearTarget> gate_up);
    // Grows the scratch of block weights to serve a weight of this shape [out, in] (a bf16 copy
    // of it, int8 activations of kQuantGemvMaxRows tokens of `in`); weights get it as they are
    // made (upload_weight, fill_random), never while a step runs.
    Status reserve_block_weight_scratch(std::int64_t out, std::int64_t in);
    // quant_activations_'s two arrays for n tokens of `in` (within what was reserved).
    QuantActivations quant_activations(std::int64_t n, std::int64_t in) const;
    void* dequant_scratch_ = nullptr;
    std::size_t dequant_scratch_bytes_ = 0;
    void* quant_activations_ = nullptr;
    std::size_t quant_activations_bytes_ = 0;
    void* dot_top_k_workspace_ = nullptr;
    std::size_t dot_top_k_workspace_bytes_ = 0;

    static constexpr int kSmallLinearCounters = 16384;
    float* linear_partials_ = nullptr;  // options_.small_linear_scratch_bytes
    int* linear_counters_ = nullptr;    // [kSmallLinearCounters], zero between launches
    void* stacked_output_ = nullptr;    // options_.stacked_linear_scratch_bytes
    // Measured choices by (n's tuning bucket, in, y dtype, which paths were allowed, then out
    // and has-bias per target).
    BucketChoices<std::vector<std::int64_t>, LinearPath> linear_paths_;
    StreamStopwatch tune_stopwatch_;  // times the paths of a new group shape
    std::unique_ptr<LtMatmul> matmul_;
    // The side lane of per_target_linear: its stream, cuBLASLt and workspace
    // (options_.cublas_workspace_bytes), and the events that fork it from stream_ and join it.
    cudaStream_t side_stream_ = nullptr;
    void* side_cublas_workspace_ = nullptr;
    std::unique_ptr<LtMatmul> side_matmul_;
    cudaEvent_t fork_event_ = nullptr, join_event_ = nullptr;
    TransferQueue transfers_;  // copy_from_host_async's stream and events
};

// The factory the engine uses; the same errors as CudaBackend::create.
Result<std::unique_ptr<tensor::Backend>> make_cuda_backend(int device,
                                                           const CudaBackendOptions& options = {});

}  // namespace inferscale::backends::cuda
