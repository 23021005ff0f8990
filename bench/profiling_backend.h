#pragma once
// ProfilingBackend: a tensor::Backend decorator for gpu_bench --profile and inject_bench
// --profile. Every call goes to the real backend; while recording, each op is bracketed by a
// pair of CUDA events on the real backend's stream, and end_step() (which waits for the
// device) adds the elapsed times into per-(op, shape class) totals: linear by [out x in] and
// row count, attention by decode or prefill, the rest by name. Bytes and FLOPs per call are
// estimated from the shapes (each operand read once, each result written once), so the table
// can show achieved GB/s and TFLOP/s next to the measured ceilings.
//
// Events between ops add a few microseconds of host work per op, and an event pair measures
// from the moment the stream reaches it, so launch gaps while the GPU waits for the host show
// up inside the op after the gap: the sum of the ops is close to, not equal to, the step time.
// Graph capture is not offered (supports_graphs false), so DecodeGraphRunner runs eagerly
// through it and every op is seen. A linear's RopeAttention epilogue runs unfused here, so the
// table keeps the q/k/v projection and the attention apart (the real backend's fusion of the
// two, which saves a column split, is not what the profile times).

#include <cuda_runtime_api.h>

#include <map>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensor/backend.h"

namespace inferscale::bench {

struct OpProfile {
    std::string op, shape;
    double calls = 0.0;  // over all recorded steps
    double ms = 0.0;
    double bytes = 0.0;
    double flops = 0.0;
};

class ProfilingBackend final : public tensor::Backend {
  public:
    // `inner` must outlive this; `stream` is the stream its ops run on.
    ProfilingBackend(tensor::Backend& inner, cudaStream_t stream);
    ~ProfilingBackend() override;
    ProfilingBackend(const ProfilingBackend&) = delete;
    ProfilingBackend& operator=(const ProfilingBackend&) = delete;

    // Ops between begin_step and end_step are timed; end_step waits for the device.
    void begin_step();
    void end_step();
    // Totals since the last reset, most expensive first, and the recorded step count.
    std::vector<OpProfile> totals() const;
    int steps() const { return steps_; }
    void reset();

    std::string_view name() const override { return inner_.name(); }
    tensor::Device device() const override { return inner_.device(); }
    tensor::DType activation_dtype() const override { return inner_.activation_dtype(); }
    tensor::DType kv_dtype() const override { return inner_.kv_dtype(); }
    Result<tensor::Buffer> allocate(std::size_t bytes) override { return inner_.allocate(bytes); }
    void free_buffer(void* data, std::size_t bytes) override { inner_.free_buffer(data, bytes); }
    void* allocate_host(std::size_t bytes) override { return inner_.allocate_host(bytes); }
    void free_host(void* p) override { inner_.free_host(p); }
    void copy_from_host(tensor::Tensor dst, const void* src, std::size_t bytes) override;
    void copy_to_host(void* dst, const tensor::Tensor& src, std::size_t bytes) override;
    void fill_zero(tensor::Tensor t) override { inner_.fill_zero(t); }
    void fill_random(tensor::Tensor t, std::uint64_t seed, float scale, float offset) override {
        inner_.fill_random(t, seed, scale, offset);
    }
    void synchronize() override { inner_.synchronize(); }
    Result<tensor::DeviceWeight> upload_weight(const tensor::Tensor& host) override {
        return inner_.upload_weight(host);
    }

    void embedding(const tensor::Tensor& table, const tensor::Tensor& ids,
                   tensor::Tensor out) override;
    void gather_rows(const tensor::Tensor& x, const tensor::Tensor& rows,
                     tensor::Tensor out) override;
    void rms_norm(const tensor::Tensor& x, const tensor::Tensor& weight, float eps,
                  tensor::Tensor out) override;
    // One row per group: "[sum of outs x in] n=rows", its bytes those of all targets.
    using tensor::Backend::linear;
    void linear(const tensor::LinearArgs& args) override;
    void add(tensor::Tensor x, const tensor::Tensor& y) override;
    void add_rms_norm(tensor::Tensor x, const tensor::Tensor& y, const tensor::Tensor& weight,
                      float eps, tensor::Tensor out) override;
    // The encoder ops pass through untimed: no benchmark runs an encoder.
    void layer_norm(const tensor::Tensor& x, const tensor::Tensor& weight,
                    const tensor::Tensor& bias, float eps, tensor::Tensor out) override {
        inner_.layer_norm(x, weight, bias, eps, out);
    }
    void convert(const tensor::Tensor& src, tensor::Tensor dst) override {
        inner_.convert(src, dst);
    }
    void gelu(tensor::Tensor x) override { inner_.gelu(x); }
    void sequence_attention(const tensor::Tensor& q, const tensor::Tensor& k,
                            const tensor::Tensor& v, const tensor::SequenceAttentionArgs& args,
                            tensor::Tensor out) override {
        inner_.sequence_attention(q, k, v, args, out);
    }
    void swiglu(const tensor::Tensor& gate, const tensor::Tensor& up,
                tensor::Tensor out) override;
    void geglu(const tensor::Tensor& gate, const tensor::Tensor& up,
               tensor::Tensor out) override;
    void scale(tensor::Tensor x, float factor) override;
    // Named by what it does: rope, rope_qk, rope_write_kv or rope_attention (whose bytes are
    // rope_write_kv's and paged_attention's together).
    void rope(const tensor::RopeArgs& args) override;
    void write_kv(const tensor::Tensor& k, const tensor::Tensor& v, const tensor::Tensor& slots,
                  const tensor::KvPages& pages) override;
    void paged_attention(const tensor::Tensor& q, const tensor::KvPages& pages,
                         const tensor::PagedAttentionArgs& args, tensor::Tensor out) override;
    void inject_chunks(const tensor::InjectArgs& args, const tensor::RopeTables& tables) override;
    void argmax(const tensor::Tensor& logits, const tensor::Tensor& allowed,
                tensor::Tensor ids) override;
    void dot_top_k(const tensor::Tensor& matrix, const tensor::Tensor& query, tensor::Tensor rows,
                   tensor::Tensor scores) override;

  private:
    struct Pending {
        int key;  // index into keys_
        int event;  // start event; end is event + 1
        double bytes, flops;
    };
    // Records the start event of an op and returns its slot; close() records the end.
    int open(const std::string& op, const std::string& shape, double bytes, double flops);
    void close(int slot);

    tensor::Backend& inner_;
    cudaStream_t stream_;
    bool recording_ = false;
    int steps_ = 0;
    std::vector<cudaEvent_t> events_;  // grows to the largest step, reused
    std::vector<Pending> pending_;     // ops of the current step
    std::map<std::pair<std::string, std::string>, int> key_index_;
    std::vector<OpProfile> keys_;
};

// Prints the per-op table of what `prof` recorded (per step: calls, ms, share of `step_ms`,
// achieved GB/s and TFLOP/s) and appends it to out["profile"] under `title`.
void print_profile(const std::string& title, const ProfilingBackend& prof, double step_ms,
                   nlohmann::json& out);

}  // namespace inferscale::bench
