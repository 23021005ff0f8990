#include "bench/profiling_backend.h"

#include <algorithm>
#include <cstdio>

#include "backends/cuda/cuda_check.h"
#include "bench/bench_support.h"

namespace inferscale::bench {
namespace {

using tensor::Tensor;

double bytes_of(const Tensor& t) { return t.empty() ? 0.0 : static_cast<double>(t.nbytes()); }

// "[out x in] n=rows"; snprintf rather than string concatenation, which trips GCC 12's
// -Wrestrict false positive.
std::string linear_shape(std::int64_t out, std::int64_t in, std::int64_t rows) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "[%lld x %lld] n=%lld", static_cast<long long>(out),
                  static_cast<long long>(in), static_cast<long long>(rows));
    return buf;
}

// A linear group's shape class (all targets' rows stacked) and cost: x and every weight, bias
// and output once; 2 x rows x outs x in FLOPs.
struct GroupCost {
    std::string shape;
    double bytes = 0.0, flops = 0.0;
};

GroupCost group_cost(const Tensor& x, std::span<const tensor::LinearTarget> targets) {
    GroupCost c;
    std::int64_t outs = 0;
    c.bytes = bytes_of(x);
    for (const tensor::LinearTarget& t : targets) {
        outs += t.w.shape[0];
        c.bytes += bytes_of(t.w) + bytes_of(t.bias) + bytes_of(t.y);
    }
    c.shape = linear_shape(outs, x.shape[1], x.shape[0]);
    c.flops = 2.0 * static_cast<double>(x.shape[0]) * static_cast<double>(outs) *
              static_cast<double>(x.shape[1]);
    return c;
}

// Paged attention's KV bytes and FLOPs from the staged host metadata (every page read once;
// causal FLOPs), q and out included in the bytes.
struct AttentionCost {
    bool decode = false;
    double bytes = 0.0, flops = 0.0;
};

AttentionCost attention_cost(const Tensor& q, const tensor::KvPages& pages,
                             const tensor::PagedAttentionArgs& args, const Tensor& out) {
    AttentionCost c;
    const double page_bytes = 2.0 * static_cast<double>(pages.k.shape[1] * pages.k.shape[2] *
                                                        pages.k.shape[3]) *
                              static_cast<double>(tensor::dtype_size(pages.k.dtype));
    const double bs = static_cast<double>(pages.k.shape[1]);
    const double hd = static_cast<double>(q.shape[1] * q.shape[2]);
    c.bytes = bytes_of(q) + bytes_of(out);
    if (args.host_indptr != nullptr && args.host_qo_indptr != nullptr) {
        for (int i = 0; i < args.num_seqs; ++i) {
            const double np = args.host_indptr[i + 1] - args.host_indptr[i];
            const double ql = args.host_qo_indptr[i + 1] - args.host_qo_indptr[i];
            c.bytes += np * page_bytes;
            c.flops += 4.0 * hd * ql * std::max(1.0, np * bs - ql / 2.0);
        }
    }
    c.decode = q.shape[0] == args.num_seqs;
    return c;
}

// rope_write_kv's bytes: q and k read and written, k and v written to the pages, v read.
double rope_write_kv_bytes(const Tensor& q, const Tensor& k, const Tensor& v) {
    return 2.0 * (bytes_of(q) + bytes_of(k)) + bytes_of(k) + 2.0 * bytes_of(v);
}

}  // namespace

ProfilingBackend::ProfilingBackend(tensor::Backend& inner, cudaStream_t stream)
    : inner_(inner), stream_(stream) {}

ProfilingBackend::~ProfilingBackend() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

void ProfilingBackend::begin_step() {
    IS_CHECK(!recording_) << "begin_step twice";
    pending_.clear();
    recording_ = true;
}

void ProfilingBackend::end_step() {
    IS_CHECK(recording_) << "end_step without begin_step";
    recording_ = false;
    if (pending_.empty()) return;
    IS_CUDA_CHECK(cudaEventSynchronize(events_[pending_.back().event + 1]));
    for (const Pending& p : pending_) {
        float ms = 0.0f;
        IS_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[p.event], events_[p.event + 1]));
        OpProfile& k = keys_[p.key];
        k.calls += 1.0;
        k.ms += ms;
        k.bytes += p.bytes;
        k.flops += p.flops;
    }
    ++steps_;
}

std::vector<OpProfile> ProfilingBackend::totals() const {
    std::vector<OpProfile> out = keys_;
    std::erase_if(out, [](const OpProfile& p) { return p.calls == 0; });
    std::sort(out.begin(), out.end(),
              [](const OpProfile& a, const OpProfile& b) { return a.ms > b.ms; });
    return out;
}

void ProfilingBackend::reset() {
    IS_CHECK(!recording_) << "reset while recording";
    key_index_.clear();
    keys_.clear();
    steps_ = 0;
}

int ProfilingBackend::open(const std::string& op, const std::string& shape, double bytes,
                           double flops) {
    if (!recording_) return -1;
    auto [it, fresh] = key_index_.try_emplace({op, shape}, static_cast<int>(keys_.size()));
    if (fresh) keys_.push_back(OpProfile{op, shape});
    const int event = static_cast<int>(pending_.size()) * 2;
    while (static_cast<int>(events_.size()) < event + 2) {
        cudaEvent_t e = nullptr;
        IS_CUDA_CHECK(cudaEventCreate(&e));
        events_.push_back(e);
    }
    IS_CUDA_CHECK(cudaEventRecord(events_[event], stream_));
    pending_.push_back(Pending{it->second, event, bytes, flops});
    return static_cast<int>(pending_.size()) - 1;
}

void ProfilingBackend::close(int slot) {
    if (slot < 0) return;
    IS_CUDA_CHECK(cudaEventRecord(events_[pending_[slot].event + 1], stream_));
}

void ProfilingBackend::copy_from_host(Tensor dst, const void* src, std::size_t bytes) {
    const int s = open("copy h2d", "", static_cast<double>(bytes), 0.0);
    inner_.copy_from_host(dst, src, bytes);
    close(s);
}

void ProfilingBackend::copy_to_host(void* dst, const Tensor& src, std::size_t bytes) {
    const int s = open("copy d2h", "", static_cast<double>(bytes), 0.0);
    inner_.copy_to_host(dst, src, bytes);
    close(s);
}

void ProfilingBackend::embedding(const Tensor& table, const Tensor& ids, Tensor out) {
    const int s = open("embedding", "", 2.0 * bytes_of(out), 0.0);
    inner_.embedding(table, ids, out);
    close(s);
}

void ProfilingBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor out) {
    const int s = open("gather_rows", "", 2.0 * bytes_of(out), 0.0);
    inner_.gather_rows(x, rows, out);
    close(s);
}

void ProfilingBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor out) {
    const int s = open("rms_norm", "", bytes_of(x) + bytes_of(out) + bytes_of(weight), 0.0);
    inner_.rms_norm(x, weight, eps, out);
    close(s);
}

void ProfilingBackend::linear(const tensor::LinearArgs& args) {
    if (args.epilogue == tensor::LinearEpilogue::RopeAttention) {
        run_unfused(args);
        return;
    }
    const GroupCost c = group_cost(args.x, args.targets);
    const char* op = args.epilogue == tensor::LinearEpilogue::SwiGLU  ? "linear_swiglu"
                     : args.epilogue == tensor::LinearEpilogue::GeGLU ? "linear_geglu"
                     : args.targets.size() == 1                      ? "linear"
                                                                     : "linear_group";
    const int s = open(op, c.shape, c.bytes, c.flops);
    inner_.linear(args);
    close(s);
}

void ProfilingBackend::add(Tensor x, const Tensor& y) {
    const int s = open("add", "", 3.0 * bytes_of(x), 0.0);
    inner_.add(x, y);
    close(s);
}

void ProfilingBackend::add_rms_norm(Tensor x, const Tensor& y, const Tensor& weight, float eps,
                                    Tensor out) {
    const int s = open("add_rms_norm", "", 4.0 * bytes_of(x) + bytes_of(weight), 0.0);
    inner_.add_rms_norm(x, y, weight, eps, out);
    close(s);
}

void ProfilingBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor out) {
    const int s = open("swiglu", "", bytes_of(gate) + bytes_of(up) + bytes_of(out), 0.0);
    inner_.swiglu(gate, up, out);
    close(s);
}

void ProfilingBackend::geglu(const Tensor& gate, const Tensor& up, Tensor out) {
    const int s = open("geglu", "", bytes_of(gate) + bytes_of(up) + bytes_of(out), 0.0);
    inner_.geglu(gate, up, out);
    close(s);
}

void ProfilingBackend::scale(Tensor x, float factor) {
    const int s = open("scale", "", 2.0 * bytes_of(x), 0.0);
    inner_.scale(x, factor);
    close(s);
}

void ProfilingBackend::rope(const tensor::RopeArgs& args) {
    std::string op = args.k.empty() ? "rope" : "rope_qk", shape;
    double bytes = 2.0 * (bytes_of(args.q) + bytes_of(args.k)), flops = 0.0;
    if (!args.pages.k.empty()) {
        op = "rope_write_kv";
        bytes = rope_write_kv_bytes(args.q, args.k, args.v);
    }
    if (args.attention != nullptr) {
        const AttentionCost c = attention_cost(args.q, args.pages, *args.attention, args.out);
        op = "rope_attention";
        shape = c.decode ? "decode" : "prefill/mixed";
        bytes += c.bytes;
        flops = c.flops;
    }
    const int s = open(op, shape, bytes, flops);
    inner_.rope(args);
    close(s);
}

void ProfilingBackend::write_kv(const Tensor& k, const Tensor& v, const Tensor& slots,
                                const tensor::KvPages& pages) {
    const int s = open("write_kv", "", 2.0 * (bytes_of(k) + bytes_of(v)), 0.0);
    inner_.write_kv(k, v, slots, pages);
    close(s);
}

void ProfilingBackend::paged_attention(const Tensor& q, const tensor::KvPages& pages,
                                       const tensor::PagedAttentionArgs& args, Tensor out) {
    const AttentionCost c = attention_cost(q, pages, args, out);
    const int s = open("paged_attention", c.decode ? "decode" : "prefill/mixed", c.bytes, c.flops);
    inner_.paged_attention(q, pages, args, out);
    close(s);
}

void ProfilingBackend::inject_chunks(const tensor::InjectArgs& args,
                                     const tensor::RopeTables& tables) {
    const int s = open("inject_chunks", "", 0.0, 0.0);
    inner_.inject_chunks(args, tables);
    close(s);
}

void ProfilingBackend::argmax(const Tensor& logits, const Tensor& allowed, Tensor ids) {
    const int s = open("argmax", "", bytes_of(logits), 0.0);
    inner_.argmax(logits, allowed, ids);
    close(s);
}

void ProfilingBackend::dot_top_k(const Tensor& matrix, const Tensor& query, Tensor rows,
                                 Tensor scores) {
    const int s = open("dot_top_k", "", bytes_of(matrix), 0.0);
    inner_.dot_top_k(matrix, query, rows, scores);
    close(s);
}

void print_profile(const std::string& title, const ProfilingBackend& prof, double step_ms,
                   nlohmann::json& out) {
    const std::vector<OpProfile> ops = prof.totals();
    const double steps = std::max(1, prof.steps());
    double sum_ms = 0.0;
    for (const OpProfile& p : ops) sum_ms += p.ms / steps;
    std::printf(
        "\n== profile: %s: step %.3f ms (median, profiled), ops %.3f ms, other %.3f ms ==\n",
        title.c_str(), step_ms, sum_ms, step_ms - sum_ms);
    std::printf("%-16s %-28s %10s %9s %7s %9s %8s\n", "op", "shape", "calls/step", "ms/step",
                "% step", "GB/s", "TFLOP/s");
    nlohmann::json rows = nlohmann::json::array();
    for (const OpProfile& p : ops) {
        const double ms = p.ms / steps, sec = p.ms * 1e-3;
        const double gbs = sec > 0 ? p.bytes / sec / 1e9 : 0.0;
        const double tfs = sec > 0 ? p.flops / sec / 1e12 : 0.0;
        std::printf("%-16s %-28s %10.1f %9.3f %6.1f%% %9s %8s\n", p.op.c_str(), p.shape.c_str(),
                    p.calls / steps, ms, step_ms > 0 ? 100.0 * ms / step_ms : 0.0,
                    p.bytes > 0 ? fmt("%.0f", gbs).c_str() : "",
                    p.flops > 0 ? fmt("%.1f", tfs).c_str() : "");
        rows.push_back({{"op", p.op}, {"shape", p.shape}, {"calls_per_step", p.calls / steps},
                        {"ms_per_step", ms}, {"bytes_per_step", p.bytes / steps},
                        {"flops_per_step", p.flops / steps}});
    }
    std::fflush(stdout);
    out["profile"].push_back({{"scenario", title}, {"step_ms", step_ms}, {"ops_ms", sum_ms},
                              {"ops", rows}});
}

}  // namespace inferscale::bench
