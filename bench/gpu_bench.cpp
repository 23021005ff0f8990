// gpu_bench: where the CUDA backend stands against the device's own limits at 8B scale, on
// random weights of a real config (configs/*.json). One run measures, in this order:
//   copy  HBM bandwidth (device-to-device copy, read + write) and pinned readback rate;
//   gemm  bf16 GEMM rate of Backend::linear on n x n x n random data, single and back to back;
//   linears  one layer's linear groups at 1..128 tokens on each linear path: cuBLASLt per
//         target, cuBLASLt over the stacked targets, the small-batch kernel (bench/linear_bench.h);
//   decode1  batch-1 decode ms/token at `context` KV (after a real prefill) vs the time to read
//         the weights and KV once at the measured bandwidth;
//   ttft  a `prompt`-token prompt, forward plus logits, vs the same read limit (the larger of
//         read and GEMM-bound time, which is the read time at this size);
//   prefill  1 x prefill_len and prefill_seqs x prefill_seq_len tokens/s vs the GEMM-bound
//         rate (FLOPs counted as in model_cost.h, over the GEMM rate measured back to back:
//         like a long prefill, that runs at the chip's power cap, where single GEMMs after a
//         pause see its boost clocks);
//   decode  batch 64/128/256 tokens/s at `context` KV each, with the roofline
//         max(bytes / bandwidth, FLOPs / GEMM rate) for reference.
// Every time is the median of repeats after warm-up, bracketed by CUDA events on the
// backend's stream. Decode rows run through DecodeGraphRunner: CUDA-graph replays of padded
// batch buckets with greedy argmax on the device, so a step reads back only [batch] i32 ids
// (one metadata upload, one replay, one readback). TTFT and prefill rows are eager forwards
// that copy their f32 logits to pinned host memory and synchronize.
//
// --profile instead runs decode b=1 and each --decode-batches batch at `context`, a
// 1 x prefill_len and the batched prefill eagerly through ProfilingBackend (events around every
// op) and prints per-op tables.
//
//   gpu_bench --config configs/llama-3.1-8b.json [--json out.json] [--rows decode1,ttft]
//   gpu_bench --config configs/llama-3.1-8b.json --profile [--json profile.json]
// --timeline runs decode b=1, TTFT and each --decode-batches batch as measured (graphs and
// all) under CUPTI's kernel records and prints, per kernel, its time and how much of the step
// it did not overlap (kernel_timeline.h).
//
//   gpu_bench --config configs/llama-3.1-8b.json --timeline [--decode-batches 64]
// --queue-ahead-ms holds the stream before each timed step until the host has enqueued it,
// so eager rows (TTFT, prefill) read the GPU's time without the host's launch pace; next to
// a plain run it shows how much of a row the host's launches bound.
// --backend cpu runs the same logic on the CPU backend (a dry run for small configs).

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/cuda_backend.h"
#include "bench/bench_support.h"
#include "bench/device_bench.h"
#include "bench/kernel_timeline.h"
#include "bench/linear_bench.h"
#include "bench/model_bench.h"
#include "bench/profiling_backend.h"
#include "model/hf_config.h"

namespace inferscale::bench {
namespace {

using nlohmann::json;

struct Args {
    std::string config_path;
    std::string json_path;
    std::string backend = "cuda";
    int device = 0;
    std::vector<std::string> rows{"copy",    "gemm",    "linears", "decode1",
                                  "ttft",    "prefill", "decode"};
    std::int64_t gemm_size = 8192;
    std::int64_t copy_mib = 2048;
    std::int64_t d2h_mib = 256;
    bool profile = false;
    bool timeline = false;
    double queue_ahead_ms = 0.0;
    std::string quant;  // parsed into model.quant
    std::string kv_cache_dtype = "auto";  // or fp8: parsed into model.kv_dtype
    bool graphs = true;
    int small_linear_max_rows = -1;  // -1: the backend's default
    bool gemv = true;
    bool linear_autotune = true;
    int concurrent_linear_max_rows = -1;  // -1: the backend's default
    backends::cuda::DecodeAttentionOptions decode;
    backends::cuda::PrefillAttentionOptions prefill;
    ModelBenchOptions model;
};

struct TableRow {
    std::string metric, measured, limit, ratio;
};

// "SEQSxLEN", and " @+CONTEXT" when the sequences already hold KV.
std::string prefill_shape(std::int64_t seqs, std::int64_t len, std::int64_t context) {
    return std::to_string(seqs) + "x" + std::to_string(len) +
           (context > 0 ? " @+" + std::to_string(context) : "");
}

std::string pct(double limit_ms, double measured_ms) {
    if (limit_ms <= 0.0 || measured_ms <= 0.0) return "n/a";
    return fmt("%.0f%%", 100.0 * limit_ms / measured_ms);
}

json samples_json(const Samples& s) {
    return json{{"median_ms", s.median()}, {"min_ms", s.min()}, {"max_ms", s.max()},
                {"repeats", s.ms.size()}};
}

// The larger of the read-bound and GEMM-bound times of a step; 0 when a rate is missing.
double roofline_ms(const Measurement& m, const DeviceRates& r) {
    const double gemm = r.gemm_bound_flops_per_s();
    if (r.copy_bytes_per_s <= 0.0 || gemm <= 0.0) return 0.0;
    return 1e3 * std::max(m.bytes / r.copy_bytes_per_s, m.flops / gemm);
}

// The model of --profile and --timeline on `backend` (pinned logits); null after printing why
// it could not be made.
std::unique_ptr<ModelBench> device_model(const Args& a, const model::ModelConfig& config,
                                         tensor::Backend& backend, StepTimer& timer,
                                         Progress& progress) {
    ModelBenchOptions mo = a.model;
    mo.pinned_logits = true;
    auto created = ModelBench::create(backend, timer, config, mo, progress);
    if (!created.ok()) {
        std::fprintf(stderr, "gpu_bench: model: %s\n", created.error().message.c_str());
        return nullptr;
    }
    return std::move(created.value());
}

// --profile: the model on a ProfilingBackend, three scenarios, one table each.
int run_profile(const Args& a, const model::ModelConfig& config,
                backends::cuda::CudaBackend& cuda, Progress& progress, json& out) {
    ProfilingBackend prof(cuda, cuda.stream());
    StepTimer timer(prof, cuda.stream(), true);
    const std::unique_ptr<ModelBench> model = device_model(a, config, prof, timer, progress);
    if (model == nullptr) return 1;
    ModelBench& mb = *model;
    const ModelBenchOptions& mo = a.model;
    mb.set_step_hooks([&prof] { prof.begin_step(); }, [&prof] { prof.end_step(); });
    const auto fail = [](const char* what, const Error& e) {
        std::fprintf(stderr, "gpu_bench: profile %s: %s\n", what, e.message.c_str());
        return 1;
    };
    const std::string ctx = std::to_string(mo.context);
    progress("profile: decode b=1 @%s", ctx.c_str());
    prof.reset();
    double prefill_ms = 0.0;
    Result<Measurement> d1 = mb.decode_single(&prefill_ms);
    if (!d1.ok()) return fail("decode1", d1.error());
    print_profile("decode b=1 @" + ctx + " (eager, device argmax)", prof, d1->samples.median(),
                  out);

    for (const std::int64_t b : mo.decode_batches) {
        const std::string name = "decode b=" + std::to_string(b) + " @" + ctx;
        progress("profile: %s", name.c_str());
        prof.reset();
        Result<Measurement> d = mb.decode_batch(b);
        if (!d.ok()) return fail("decode", d.error());
        print_profile(name + " (eager, device argmax)", prof, d->samples.median(), out);
    }

    const auto profile_prefill = [&](std::int64_t seqs, std::int64_t len,
                                     std::int64_t context) {
        const std::string shape = prefill_shape(seqs, len, context);
        progress("profile: prefill %s", shape.c_str());
        prof.reset();
        Result<Measurement> r = mb.prefill(seqs, len, context);
        if (!r.ok()) return fail("prefill", r.error());
        print_profile("prefill " + shape, prof, r->samples.median(), out);
        return 0;
    };
    if (const int rc = profile_prefill(1, mo.prefill_len, 0); rc != 0) return rc;
    return profile_prefill(mo.prefill_seqs, mo.prefill_seq_len, mo.prefill_context);
}

void print_timeline(const std::string& title, const TimelineTable& t, json& out) {
    std::printf("\n== timeline: %s: %d steps, %.1f us from first start to last end ==\n",
                title.c_str(), t.steps, t.step_us);
    std::printf("%-44s %10s %10s %12s %7s\n", "kernel", "calls/step", "busy us", "exposed us",
                "% step");
    json rows = json::array();
    for (const TimelineRow& r : t.rows) {
        std::printf("%-44.44s %10.1f %10.1f %12.1f %6.1f%%\n", r.kernel.c_str(), r.calls,
                    r.busy_us, r.exposed_us, 100.0 * r.exposed_us / t.step_us);
        rows.push_back({{"kernel", r.kernel},
                        {"calls", r.calls},
                        {"busy_us", r.busy_us},
                        {"exposed_us", r.exposed_us}});
    }
    out["timeline"][title] = {{"steps", t.steps}, {"step_us", t.step_us}, {"kernels", rows}};
}

// --timeline: decode b=1, TTFT and the --decode-batches as they run (graphs, programmatic
// dependent launch), each kernel charged with what it adds to the step (kernel_timeline.h).
int run_timeline(const Args& a, const model::ModelConfig& config, tensor::Backend& backend,
                 StepTimer& timer, Progress& progress, json& out) {
    const std::unique_ptr<ModelBench> model = device_model(a, config, backend, timer, progress);
    if (model == nullptr) return 1;
    ModelBench& mb = *model;
    const ModelBenchOptions& mo = a.model;
    const auto measure = [&](const std::string& title, auto&& run_steps) {
        Result<KernelTimeline> t = KernelTimeline::start();
        if (!t.ok()) {
            std::fprintf(stderr, "gpu_bench: timeline: %s\n", t.error().message.c_str());
            return 1;
        }
        mb.set_step_hooks([&t] { t->begin_step(); }, [&t] { t->end_step(); });
        progress("timeline: %s", title.c_str());
        const Result<Measurement> ran = run_steps();
        mb.set_step_hooks({}, {});
        Result<TimelineTable> table = t->finish();
        if (!ran.ok() || !table.ok()) {
            std::fprintf(stderr, "gpu_bench: timeline %s: %s\n", title.c_str(),
                         (!ran.ok() ? ran.error() : table.error()).message.c_str());
            return 1;
        }
        print_timeline(title, *table, out);
        return 0;
    };
    const std::string ctx = std::to_string(mo.context);
    double prefill_ms = 0.0;
    int rc = measure("decode b=1 @" + ctx, [&] { return mb.decode_single(&prefill_ms); });
    if (rc == 0) {
        rc = measure("TTFT " + std::to_string(mo.prompt) + " tok", [&] { return mb.ttft(); });
    }
    for (const std::int64_t b : mo.decode_batches) {
        if (rc != 0) break;
        rc = measure("decode b=" + std::to_string(b) + " @" + ctx,
                     [&] { return mb.decode_batch(b); });
    }
    return rc;
}

int run(const Args& a) {
    Progress progress;
    const std::set<std::string> rows(a.rows.begin(), a.rows.end());
    const auto want = [&rows](const char* r) { return rows.count(r) > 0; };

    Result<model::HfConfig> hf = model::load_hf_config(a.config_path);
    if (!hf.ok()) {
        std::fprintf(stderr, "gpu_bench: %s\n", hf.error().message.c_str());
        return 2;
    }
    const model::ModelConfig& config = hf.value().config;

    auto opened = open_bench_backend(a.backend, a.device, progress);
    if (!opened.ok()) {
        std::fprintf(stderr, "gpu_bench: %s\n", opened.error().message.c_str());
        return 2;
    }
    const bool cuda = opened->cuda;
    cudaStream_t stream = opened->stream;
    const std::string device_name = opened->device_name;
    std::unique_ptr<tensor::Backend> backend = std::move(opened->backend);
    if (cuda) {
        auto& cuda_backend = static_cast<backends::cuda::CudaBackend&>(*backend);
        cuda_backend.set_decode_options(a.decode);
        cuda_backend.set_prefill_options(a.prefill);
        backends::cuda::LinearPathOptions o = cuda_backend.linear_path_options();
        if (a.small_linear_max_rows >= 0) o.small_max_rows = a.small_linear_max_rows;
        if (!a.gemv) o.gemv = false;
        if (!a.linear_autotune) o.autotune = false;
        if (a.concurrent_linear_max_rows >= 0) {
            o.concurrent_max_rows = a.concurrent_linear_max_rows;
        }
        cuda_backend.set_linear_path_options(o);
    }
    StepTimer timer(*backend, stream, cuda);
    timer.set_queue_ahead_ms(a.queue_ahead_ms);

    json out;
    out["config"] = a.config_path;
    out["model"] = config.name;
    out["device"] = device_name;
    out["backend"] = a.backend;
    out["queue_ahead_ms"] = a.queue_ahead_ms;
    std::vector<TableRow> table;

    if (a.profile) {
        if (!cuda) {
            std::fprintf(stderr, "gpu_bench: --profile needs the cuda backend\n");
            return 2;
        }
        const int rc = run_profile(a, config,
                                   static_cast<backends::cuda::CudaBackend&>(*backend), progress,
                                   out);
        if (rc == 0 && !a.json_path.empty() && !write_json(out, a.json_path, "gpu_bench", progress))
            return 1;
        return rc;
    }

    if (a.timeline) {
        if (!cuda) {
            std::fprintf(stderr, "gpu_bench: --timeline needs the cuda backend\n");
            return 2;
        }
        const int rc = run_timeline(a, config, *backend, timer, progress, out);
        if (rc == 0 && !a.json_path.empty() && !write_json(out, a.json_path, "gpu_bench", progress))
            return 1;
        return rc;
    }

    DeviceRates rates;
    if (want("copy")) {
        progress("copy bandwidth: %lld MiB device-to-device", static_cast<long long>(a.copy_mib));
        Result<DeviceRates> r = measure_copy(*backend, timer, cuda, stream,
                                             static_cast<std::size_t>(a.copy_mib) << 20,
                                             static_cast<std::size_t>(a.d2h_mib) << 20);
        if (!r.ok()) {
            std::fprintf(stderr, "gpu_bench: copy: %s\n", r.error().message.c_str());
            return 1;
        }
        rates = r.value();
        out["copy"] = samples_json(rates.copy);
        out["copy"]["bytes_per_s"] = rates.copy_bytes_per_s;
        out["d2h_pinned"] = samples_json(rates.d2h);
        out["d2h_pinned"]["bytes_per_s"] = rates.d2h_bytes_per_s;
        progress("  copy %.2f TB/s (read + write), pinned readback %.1f GB/s",
                 rates.copy_bytes_per_s / 1e12, rates.d2h_bytes_per_s / 1e9);
        table.push_back({"d2d copy (read+write)", fmt("%.2f TB/s", rates.copy_bytes_per_s / 1e12),
                         "", ""});
    }
    if (want("gemm")) {
        progress("gemm: %lld^3 through Backend::linear", static_cast<long long>(a.gemm_size));
        if (Status s = measure_gemm(*backend, timer, a.gemm_size, rates); !s.ok()) {
            std::fprintf(stderr, "gpu_bench: gemm: %s\n", s.error().message.c_str());
            return 1;
        }
        out["gemm"] = samples_json(rates.gemm);
        out["gemm"]["size"] = rates.gemm_size;
        out["gemm"]["flops_per_s"] = rates.gemm_flops_per_s;
        out["gemm"]["sustained"] = samples_json(rates.gemm_sustained);
        out["gemm"]["sustained_flops_per_s"] = rates.gemm_sustained_flops_per_s;
        progress("  gemm %.1f TFLOP/s, back to back %.1f TFLOP/s", rates.gemm_flops_per_s / 1e12,
                 rates.gemm_sustained_flops_per_s / 1e12);
        table.push_back({"gemm " + std::to_string(a.gemm_size) + "^3",
                         fmt("%.1f TFLOP/s", rates.gemm_flops_per_s / 1e12), "", ""});
        table.push_back({"gemm " + std::to_string(a.gemm_size) + "^3 back to back",
                         fmt("%.1f TFLOP/s", rates.gemm_sustained_flops_per_s / 1e12), "", ""});
    }

    if (want("linears") && cuda) {
        if (Status s = run_linear_sweep(static_cast<backends::cuda::CudaBackend&>(*backend), timer,
                                        config, progress, out);
            !s.ok()) {
            std::fprintf(stderr, "gpu_bench: linears: %s\n", s.error().message.c_str());
            return 1;
        }
    }

    const bool any_model = want("decode1") || want("ttft") || want("prefill") || want("decode");
    if (any_model) {
        ModelBenchOptions mo = a.model;
        mo.pinned_logits = cuda;
        mo.decode_runner = a.graphs;
        auto created = ModelBench::create(*backend, timer, config, mo, progress);
        if (!created.ok()) {
            std::fprintf(stderr, "gpu_bench: model: %s\n", created.error().message.c_str());
            return 1;
        }
        ModelBench& mb = *created.value();
        const ModelCost& cost = mb.cost();
        progress("model ready in %.1f s: %.2f GB weights (%.2f GB read per step), KV %.1f GiB "
                 "(%.0f KiB/token)",
                 mb.create_seconds(), cost.total_weight_bytes() / 1e9,
                 cost.step_weight_bytes() / 1e9, static_cast<double>(mb.kv_bytes()) / (1 << 30),
                 cost.kv_bytes_per_token() / 1024);
        out["weights_bytes"] = cost.total_weight_bytes();
        out["step_weight_bytes"] = cost.step_weight_bytes();
        out["kv_bytes_per_token"] = cost.kv_bytes_per_token();
        out["matmul_params"] = cost.layer_matmul_params() + cost.head_params();
        out["model_create_s"] = mb.create_seconds();
        const double read_bw = rates.copy_bytes_per_s;
        const auto fail = [](const char* what, const Error& e) {
            std::fprintf(stderr, "gpu_bench: %s: %s\n", what, e.message.c_str());
            return 1;
        };
        bool all_finite = true;

        if (want("decode1")) {
            progress("decode batch 1: prefill %lld tokens, then decode",
                     static_cast<long long>(mo.context));
            double prefill_ms = 0.0;
            Result<Measurement> r = mb.decode_single(&prefill_ms);
            if (!r.ok()) return fail("decode1", r.error());
            const Measurement& m = r.value();
            const double ms = m.samples.median();
            const double limit = read_bw > 0 ? 1e3 * m.bytes / read_bw : 0.0;
            all_finite = all_finite && m.logits_finite;
            out["decode1"] = samples_json(m.samples);
            out["decode1"].update({{"context", mo.context}, {"ms_per_token", ms},
                                   {"tokens_per_s", 1e3 / ms}, {"read_limit_ms", limit},
                                   {"bytes_per_step", m.bytes}, {"prefill_ms", prefill_ms},
                                   {"logits_finite", m.logits_finite}});
            progress("  %.3f ms/token (read limit %.3f ms: %s), prefill of the context %.1f ms",
                     ms, limit, pct(limit, ms).c_str(), prefill_ms);
            table.push_back({"decode b=1 @" + std::to_string(mo.context) + " ms/token",
                             fmt("%.3f ms", ms), fmt("%.3f ms read", limit), pct(limit, ms)});
        }
        if (want("ttft")) {
            progress("ttft: %lld-token prompt", static_cast<long long>(mo.prompt));
            Result<Measurement> r = mb.ttft();
            if (!r.ok()) return fail("ttft", r.error());
            const Measurement& m = r.value();
            const double ms = m.samples.median(), limit = roofline_ms(m, rates);
            all_finite = all_finite && m.logits_finite;
            out["ttft"] = samples_json(m.samples);
            out["ttft"].update({{"prompt", mo.prompt}, {"ms", ms}, {"limit_ms", limit},
                                {"flops", m.flops}, {"bytes", m.bytes}});
            progress("  %.3f ms (limit %.3f ms: %s)", ms, limit, pct(limit, ms).c_str());
            table.push_back({"TTFT " + std::to_string(mo.prompt) + " tok", fmt("%.3f ms", ms),
                             fmt("%.3f ms read", limit), pct(limit, ms)});
        }
        if (want("prefill")) {
            const std::tuple<std::int64_t, std::int64_t, std::int64_t> shapes[] = {
                {1, mo.prefill_len, 0}, {mo.prefill_seqs, mo.prefill_seq_len, mo.prefill_context}};
            for (const auto& [seqs, len, context] : shapes) {
                const std::string shape = prefill_shape(seqs, len, context);
                progress("prefill %s", shape.c_str());
                Result<Measurement> r = mb.prefill(seqs, len, context);
                if (!r.ok()) return fail("prefill", r.error());
                const Measurement& m = r.value();
                const double ms = m.samples.median();
                const auto bound_ms = [&m](double flops_per_s) {
                    return flops_per_s > 0 ? 1e3 * m.flops / flops_per_s : 0.0;
                };
                const double gemm_ms = bound_ms(rates.gemm_bound_flops_per_s());
                const double single_ms = bound_ms(rates.gemm_flops_per_s);
                const auto tokens = static_cast<double>(m.new_tokens);
                const double tps = tokens / (ms * 1e-3);
                const double bound_tps = gemm_ms > 0 ? tokens / (gemm_ms * 1e-3) : 0.0;
                all_finite = all_finite && m.logits_finite;
                json row = samples_json(m.samples);
                row.update({{"seqs", seqs}, {"len", len}, {"context", context},
                            {"tokens_per_s", tps},
                            {"flops", m.flops}, {"gemm_bound_ms", gemm_ms},
                            {"gemm_bound_tokens_per_s", bound_tps},
                            {"single_gemm_bound_ms", single_ms},
                            {"achieved_flops_per_s", m.flops / (ms * 1e-3)}});
                out["prefill"].push_back(row);
                progress("  %.1f ms, %.0f tokens/s, %.0f TFLOP/s (GEMM-bound %.1f ms: %s; at the "
                         "single-GEMM rate %.1f ms: %s)",
                         ms, tps, m.flops / (ms * 1e-3) / 1e12, gemm_ms, pct(gemm_ms, ms).c_str(),
                         single_ms, pct(single_ms, ms).c_str());
                table.push_back({"prefill " + shape + " tok/s", fmt("%.0f", tps),
                                 gemm_ms > 0 ? fmt("%.0f gemm-bound", bound_tps) : "",
                                 pct(gemm_ms, ms)});
            }
        }
        if (want("decode")) {
            for (std::int64_t b : mo.decode_batches) {
                progress("decode batch %lld @ %lld (random KV)", static_cast<long long>(b),
                         static_cast<long long>(mo.context));
                Result<Measurement> r = mb.decode_batch(b);
                if (!r.ok()) return fail("decode", r.error());
                const Measurement& m = r.value();
                const double ms = m.samples.median(), limit = roofline_ms(m, rates);
                const double tps = static_cast<double>(b) / (ms * 1e-3);
                all_finite = all_finite && m.logits_finite;
                json row = samples_json(m.samples);
                row.update({{"batch", b}, {"context", mo.context}, {"ms_per_step", ms},
                            {"tokens_per_s", tps}, {"roofline_ms", limit}, {"flops", m.flops},
                            {"bytes", m.bytes}});
                out["decode"].push_back(row);
                progress("  %.2f ms/step, %.0f tokens/s (roofline %.2f ms: %s)", ms, tps, limit,
                         pct(limit, ms).c_str());
                table.push_back({"decode b=" + std::to_string(b) + " @" +
                                     std::to_string(mo.context) + " tok/s",
                                 fmt("%.0f", tps), fmt("%.2f ms roofline", limit), pct(limit, ms)});
            }
        }
        out["decode_graphs"] = mb.graphs_captured();
        out["decode_graph_error"] = mb.graph_error();
        progress("decode graphs recorded: %d%s%s", mb.graphs_captured(),
                 mb.graph_error().empty() ? "" : ", fell back to eager: ",
                 mb.graph_error().c_str());
        out["logits_finite"] = all_finite;
        if (!all_finite) progress("WARNING: non-finite logits (random weights overflowed?)");
    }

    std::printf("\n== gpu_bench %s on %s ==\n", a.config_path.c_str(), device_name.c_str());
    std::printf("%-28s %16s %22s %8s\n", "metric", "measured", "limit", "% limit");
    for (const TableRow& r : table) {
        std::printf("%-28s %16s %22s %8s\n", r.metric.c_str(), r.measured.c_str(), r.limit.c_str(),
                    r.ratio.c_str());
    }
    std::fflush(stdout);
    if (!a.json_path.empty() && !write_json(out, a.json_path, "gpu_bench", progress)) return 1;
    return 0;
}

}  // namespace
}  // namespace inferscale::bench

int main(int argc, char** argv) {
    inferscale::bench::Args a;
    CLI::App app{"gpu_bench: the CUDA backend against the device's limits on random weights"};
    inferscale::bench::add_common_options(app, a.config_path, a.json_path, a.backend, a.device);
    app.add_option("--rows", a.rows, "copy,gemm,linears,decode1,ttft,prefill,decode")
        ->delimiter(',');
    app.add_option("--gemm-size", a.gemm_size, "M = N = K of the GEMM measurement");
    app.add_option("--copy-mib", a.copy_mib, "bytes of the device-to-device copy, MiB");
    app.add_option("--d2h-mib", a.d2h_mib, "bytes of the pinned readback, MiB");
    app.add_option("--context", a.model.context, "KV length of the decode measurements");
    app.add_option("--prompt", a.model.prompt, "TTFT prompt tokens");
    app.add_option("--prefill-len", a.model.prefill_len, "single-sequence prefill tokens");
    app.add_option("--prefill-seqs", a.model.prefill_seqs, "sequences of the batched prefill");
    app.add_option("--prefill-seq-len", a.model.prefill_seq_len, "tokens per batched sequence");
    app.add_option("--prefill-context", a.model.prefill_context,
                   "KV tokens each batched-prefill sequence already holds (injected memory)");
    app.add_option("--kv-tokens", a.model.kv_tokens,
                   "KV cache capacity (default: what the measurements need)");
    app.add_flag("--shuffle-pages", a.model.shuffle_pages,
                 "pages from a random permutation of the whole cache, as a busy server's are");
    app.add_option("--decode-batches", a.model.decode_batches, "e.g. 64,128,256")
        ->delimiter(',');
    app.add_option("--seed", a.model.seed, "weight seed");
    app.add_option("--quant", a.quant, "block types of the weights: none or q4_k_m");
    app.add_option("--kv-cache-dtype", a.kv_cache_dtype,
                   "auto (the backend's) or fp8 (E4M3 pages, scales of 1)")
        ->check(CLI::IsMember({"auto", "fp8"}));
    app.add_flag("--timeline", a.timeline,
                 "kernel timeline (CUPTI) of decode b=1, TTFT and the --decode-batches: what each "
                 "kernel adds to the step as it runs");
    app.add_option("--queue-ahead-ms", a.queue_ahead_ms,
                   "hold the stream this long before each timed step so the host enqueues all "
                   "of it first: eager steps (TTFT, prefill) then time the GPU alone, without "
                   "the host's launch pace");
    app.add_flag("--profile", a.profile,
                 "per-op profile of decode b=1, the --decode-batches and both prefills");
    app.add_option("--decode-max-kv", a.model.decode_max_kv_len,
                   "KV bound the decode graphs are recorded for (default: the context)");
    app.add_option("--wide-prefill-min-blocks", a.prefill.wide_min_blocks_per_sm,
                   "prefill attention on wide tiles while they give this many blocks per SM "
                   "(0: always, -1: never)");
    app.add_flag("!--no-tc-decode", a.decode.tensor_cores,
                 "decode attention on the CUDA-core kernels instead of the tensor-core one");
    app.add_option("--decode-tc-min-pairs", a.decode.tensor_core_min_pairs,
                   "tensor-core decode from this many (sequence, kv head) pairs (0: the SM count)");
    app.add_option("--decode-min-split-tokens", a.decode.min_split_tokens,
                   "decode attention: KV tokens per split, at least");
    app.add_option("--decode-split-tokens", a.decode.split_tokens,
                   "tensor-core decode: KV tokens per work item, at least");
    app.add_option("--decode-ctas-per-sm", a.decode.ctas_per_sm,
                   "tensor-core decode: persistent CTAs per SM (0: as many as fit)");
    app.add_option("--decode-schedule", a.decode.schedule,
                   "tensor-core decode: how warps take items (auto: per step shape; warp: each "
                   "warp whole items; cta: a CTA's warps share each item)")
        ->transform(CLI::CheckedTransformer(
            std::map<std::string, inferscale::backends::cuda::DecodeSchedule>{
                {"auto", inferscale::backends::cuda::DecodeSchedule::Auto},
                {"warp", inferscale::backends::cuda::DecodeSchedule::WarpItems},
                {"cta", inferscale::backends::cuda::DecodeSchedule::CtaItems}}));
    app.add_option("--small-linear-max-rows", a.small_linear_max_rows,
                   "linears of at most this many tokens on the small-batch kernel (0: cuBLASLt)");
    app.add_flag("!--no-gemv", a.gemv, "one-token linears on the mma kernel, not the GEMV");
    app.add_flag("!--no-linear-autotune", a.linear_autotune,
                 "linears on the small-batch kernel wherever it takes them, the stack else (no "
                 "timing race between the paths)");
    app.add_option("--concurrent-linear-max-rows", a.concurrent_linear_max_rows,
                   "a group's per-target cuBLASLt GEMMs of at most this many tokens alternate "
                   "between two streams (0: one after another on one stream)");
    app.add_flag("!--no-graphs", a.graphs,
                 "decode rows as plain forwards with host logits (the first run's method)");
    CLI11_PARSE(app, argc, argv);
    auto quant = inferscale::model::parse_weight_quant(a.quant);
    if (!quant.ok()) {
        std::fprintf(stderr, "gpu_bench: %s\n", quant.error().message.c_str());
        return 2;
    }
    a.model.quant = quant.value();
    if (a.kv_cache_dtype == "fp8") a.model.kv_dtype = inferscale::tensor::DType::F8_E4M3;
    return inferscale::bench::run(a);
}
