// inject_bench: the H200 measurement of memory injection ("Memory injection" issue). At a real
// model's shape (configs/*.json, random weights) and the reference's memory scaffold
// (M = header ~60 tokens ‖ k facts of ~25 tokens ‖ footer 15 tokens, then a ~30-token query),
// for every k it times, with CUDA events on the backend's stream, median of repeats after
// warm-up, blocks freed between requests, one mode at a time over every k:
//   kv (GPU tier)   facts selected → first-token logits on the host: compose the InjectPlan,
//                   allocate blocks, ONE fused inject op (all chunks, all layers), forward of
//                   the tail (< 16 tokens) + query with logits. Chunks resident on the GPU.
//   kv (host tier)  the same, but the k fact chunks start in pinned host memory and come up
//                   into device staging slots inside the timed region, layer group by layer
//                   group on the transfer stream (8 groups, each chunk's group one async copy);
//                   each group is injected inside the forward (ForwardBatch::before_layer) once
//                   its copies landed, so the transfer overlaps the layers before it.
//   prompt          a forward of all |M| + query tokens (the facts as text) with logits.
//   inject op       bytes the op moves (chunk K,V read + page K,V written) over the op's own
//                   time (events around the kernel alone), against the device-to-device copy
//                   bandwidth measured in the same run.
// Then the issue's four ratios against their targets, and the absolute TTFTs next to the
// reference's (vLLM + connector, Llama-3.1-8B; reference-system.md §8.2).
// --profile instead runs the kv requests (GPU tier) of every k through ProfilingBackend (events
// around every op) and prints a per-op table per k: where TTFT grows with k.
//
//   inject_bench --config configs/llama-3.1-8b.json [--json out.json] [--ks 5,10,20,50]
//   inject_bench --config configs/llama-3.1-8b.json --profile --ks 5,50
//   inject_bench --config tests/fixtures/golden/llama_gqa/config.json --backend cpu   (dry run)

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "bench/bench_support.h"
#include "bench/device_bench.h"
#include "bench/inject_bench_harness.h"
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
    std::vector<std::int64_t> ks{5, 10, 20, 50};
    int warmup = 3;
    int repeats = 25;
    std::int64_t copy_mib = 1024;
    bool host_tier = true;
    bool profile = false;
    InjectShape shape;
};

// Reference TTFTs, Llama-3.1-8B (reference-system.md §8.2, digitized): k → {kv, prompt} ms.
const std::map<std::int64_t, std::pair<double, double>> kReference{
    {5, {16.5, 33.0}}, {10, {16.5, 39.0}}, {20, {16.9, 46.0}}, {50, {17.6, 70.0}}};
// The issue's endpoints (k 5 → 50) and the ratios it derives from them.
constexpr double kRefKv5 = 16.6, kRefKv50 = 17.3, kRefPrompt5 = 33.0, kRefPrompt50 = 68.0;

struct Row {
    std::int64_t k = 0;
    std::int64_t memory_tokens = 0, loaded_tokens = 0, tail_tokens = 0, forward_tokens = 0;
    Samples kv, kv_inject;            // GPU tier: total, and up to "injected"
    Samples host, host_issued;
    Samples prompt;
    Samples op, call;                 // the inject op alone; the whole Injector::inject call
    std::size_t inject_bytes = 0;
    bool finite = true;
    double host_gpu_max_diff = -1.0;  // |logits(host tier) - logits(GPU tier)|, same facts
    double logit_scale = 0.0;

    double op_bytes_per_s() const {
        return op.median() > 0 ? static_cast<double>(inject_bytes) / (op.median() * 1e-3) : 0.0;
    }
    double call_bytes_per_s() const {
        return call.median() > 0 ? static_cast<double>(inject_bytes) / (call.median() * 1e-3)
                                 : 0.0;
    }
};

json samples_json(const Samples& s) {
    return json{{"median_ms", s.median()}, {"min_ms", s.min()}, {"max_ms", s.max()},
                {"repeats", s.ms.size()}};
}

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

enum class Mode { KvGpu, KvHost, Prompt };

// The first of the facts round `rep` reads: a different run each round, so no request reads
// the previous one's chunks.
std::int64_t round_offset(const InjectShape& s, int rep) { return (rep * 37) % s.pool_facts; }

// `repeats` timed requests of one mode at row.k after `warmup` untimed ones (round_offset).
Status measure_mode(const Args& a, InjectBenchHarness& h, StepMarks& marks, Mode mode, Row& row) {
    const std::int64_t k = row.k;
    for (int rep = 0; rep < a.warmup + a.repeats; ++rep) {
        const bool timed = rep >= a.warmup;
        const std::int64_t offset = round_offset(h.shape(), rep);
        if (mode == Mode::Prompt) {
            const double pm = IS_TRY(h.prompt_request(k, offset, marks));
            if (timed) row.prompt.ms.push_back(pm);
        } else {
            const bool host = mode == Mode::KvHost;
            const KvRequestTimes t = IS_TRY(h.kv_request(k, offset, host, marks));
            if (timed && host) {
                row.host.ms.push_back(t.total_ms);
                row.host_issued.ms.push_back(t.issued_ms);
            } else if (timed) {
                row.kv.ms.push_back(t.total_ms);
                row.kv_inject.ms.push_back(t.injected_ms);
            }
        }
        row.finite = row.finite && h.logits_finite();
        if (h.blocks_in_use() != 0) return make_error("blocks leaked between requests");
    }
    return {};
}

// After the requests of every mode: the inject op alone at row.k, then the tier check.
Status finish_k(const Args& a, InjectBenchHarness& h, StepMarks& marks, ProfilingBackend* prof,
                Row& row, const Progress& progress) {
    const InjectShape& s = h.shape();
    const std::int64_t k = row.k;
    // The op alone (through the profiler's events on CUDA), and separately the whole call
    // without the profiler in the way (metadata staging and its upload included).
    for (int rep = 0; rep < a.warmup + a.repeats; ++rep) {
        const std::int64_t offset = round_offset(s, rep);
        const InjectOpTimes op = IS_TRY(h.inject_only(k, offset, prof, marks));
        const InjectOpTimes call = IS_TRY(h.inject_only(k, offset, nullptr, marks));
        if (rep >= a.warmup) {
            row.op.ms.push_back(op.op_ms);
            row.call.ms.push_back(call.call_ms);
        }
        row.inject_bytes = op.bytes;
        if (op.tokens != row.loaded_tokens || call.bytes != op.bytes)
            return make_error("inject plan loaded an unexpected token count");
    }
    if (a.host_tier) {
        // Same facts through both tiers: the staging copies must hand the op the same KV.
        IS_TRY(h.kv_request(k, 0, false, marks));
        const std::vector<float> gpu(h.logits().begin(), h.logits().end());
        IS_TRY(h.kv_request(k, 0, true, marks));
        double diff = 0.0, scale = 0.0;
        for (std::size_t i = 0; i < gpu.size(); ++i) {
            diff = std::max(diff, static_cast<double>(std::fabs(gpu[i] - h.logits()[i])));
            scale = std::max(scale, static_cast<double>(std::fabs(gpu[i])));
        }
        row.host_gpu_max_diff = diff;
        row.logit_scale = scale;
    }
    progress("  k=%lld: M %lld tok (%lld injected, tail %lld, forward %lld): kv %.3f ms "
             "(inject done at %.3f), host tier %.3f ms (first copies issued at %.3f), "
             "prompt %.3f ms; inject op %.1f us for %.1f MB = %.0f GB/s (call %.1f us)%s",
             static_cast<long long>(k), static_cast<long long>(row.memory_tokens),
             static_cast<long long>(row.loaded_tokens), static_cast<long long>(row.tail_tokens),
             static_cast<long long>(row.forward_tokens), row.kv.median(), row.kv_inject.median(),
             row.host.median(), row.host_issued.median(), row.prompt.median(),
             row.op.median() * 1e3, static_cast<double>(row.inject_bytes) / 1e6,
             row.op_bytes_per_s() / 1e9, row.call.median() * 1e3,
             row.finite ? "" : "  NON-FINITE LOGITS");
    return {};
}

// --profile: the harness on a ProfilingBackend; per k, warm-up then the timed kv requests.
int run_profile(const Args& a, tensor::Backend& backend, cudaStream_t stream,
                const model::ModelConfig& config, const Progress& progress) {
    ProfilingBackend prof(backend, stream);
    auto created = InjectBenchHarness::create(prof, true, config, a.shape, progress);
    if (!created.ok()) {
        std::fprintf(stderr, "inject_bench: setup: %s\n", created.error().message.c_str());
        return 1;
    }
    InjectBenchHarness& h = *created.value();
    StepMarks marks(prof, stream, true);
    json out;
    for (std::int64_t k : a.ks) {
        Samples total;
        prof.reset();
        for (int rep = 0; rep < a.warmup + a.repeats; ++rep) {
            const bool timed = rep >= a.warmup;
            if (timed) prof.begin_step();
            const Result<KvRequestTimes> t =
                h.kv_request(k, round_offset(a.shape, rep), false, marks);
            if (timed) prof.end_step();
            if (!t.ok()) {
                std::fprintf(stderr, "inject_bench: k=%lld: %s\n", static_cast<long long>(k),
                             t.error().message.c_str());
                return 1;
            }
            if (timed) total.ms.push_back(t->total_ms);
        }
        print_profile("kv request k=" + std::to_string(k), prof, total.median(), out);
    }
    return a.json_path.empty() || write_json(out, a.json_path, "inject_bench", progress) ? 0 : 1;
}

int run(Args a) {
    Progress progress;
    Result<model::HfConfig> hf = model::load_hf_config(a.config_path);
    if (!hf.ok()) {
        std::fprintf(stderr, "inject_bench: %s\n", hf.error().message.c_str());
        return 2;
    }
    const model::ModelConfig& config = hf.value().config;
    std::sort(a.ks.begin(), a.ks.end());
    a.ks.erase(std::unique(a.ks.begin(), a.ks.end()), a.ks.end());
    if (a.ks.empty() || a.ks.front() < 1) {
        std::fprintf(stderr, "inject_bench: --ks must list k >= 1\n");
        return 2;
    }
    a.shape.max_k = a.ks.back();
    a.shape.pool_facts = std::max(a.shape.pool_facts, a.shape.max_k);

    auto opened = open_bench_backend(a.backend, a.device, progress);
    if (!opened.ok()) {
        std::fprintf(stderr, "inject_bench: %s\n", opened.error().message.c_str());
        return 2;
    }
    const bool cuda = opened->cuda;
    cudaStream_t stream = opened->stream;
    const std::string device_name = opened->device_name;
    std::unique_ptr<tensor::Backend> backend = std::move(opened->backend);
    StepTimer timer(*backend, stream, cuda);

    progress("copy bandwidth: %lld MiB device-to-device", static_cast<long long>(a.copy_mib));
    Result<DeviceRates> rates_r = measure_copy(*backend, timer, cuda, stream,
                                               static_cast<std::size_t>(a.copy_mib) << 20, 0);
    if (!rates_r.ok()) {
        std::fprintf(stderr, "inject_bench: copy: %s\n", rates_r.error().message.c_str());
        return 1;
    }
    const DeviceRates rates = rates_r.value();
    const double d2d = rates.copy_bytes_per_s;
    if (a.profile) {
        if (!cuda) {
            std::fprintf(stderr, "inject_bench: --profile needs the CUDA backend\n");
            return 2;
        }
        return run_profile(a, *backend, stream, config, progress);
    }
    progress("  d2d copy %.3f TB/s (read + write)", d2d / 1e12);

    auto created = InjectBenchHarness::create(*backend, cuda, config, a.shape, progress);
    if (!created.ok()) {
        std::fprintf(stderr, "inject_bench: setup: %s\n", created.error().message.c_str());
        return 1;
    }
    InjectBenchHarness& h = *created.value();
    StepMarks marks(*backend, stream, cuda);
    std::unique_ptr<ProfilingBackend> prof;
    if (cuda) prof = std::make_unique<ProfilingBackend>(*backend, stream);

    // Mode by mode over every k, not interleaved: a prompt request at k = 50 is a 1.4K-token
    // prefill at full GEMM power, and a kv request right after it ran ~0.2 ms slower (the
    // clocks or power state it left, by all signs), partly measuring the other mode; the kv
    // requests of every k run first, in the same state.
    std::vector<Row> rows(a.ks.size());
    for (std::size_t i = 0; i < a.ks.size(); ++i) {
        Row& r = rows[i];
        r.k = a.ks[i];
        r.memory_tokens = a.shape.memory_tokens(r.k);
        r.loaded_tokens = r.memory_tokens / a.shape.block_size * a.shape.block_size;
        r.tail_tokens = r.memory_tokens - r.loaded_tokens;
        r.forward_tokens = r.tail_tokens + a.shape.query_tokens;
    }
    std::vector<std::pair<Mode, const char*>> modes{{Mode::KvGpu, "kv (GPU tier)"}};
    if (a.host_tier) modes.emplace_back(Mode::KvHost, "kv (host tier)");
    modes.emplace_back(Mode::Prompt, "prompt");
    for (const auto& [mode, name] : modes) {
        progress("%s: %d warm-up + %d timed requests per k", name, a.warmup, a.repeats);
        for (Row& r : rows) {
            if (Status st = measure_mode(a, h, marks, mode, r); !st.ok()) {
                std::fprintf(stderr, "inject_bench: %s k=%lld: %s\n", name,
                             static_cast<long long>(r.k), st.error().message.c_str());
                return 1;
            }
        }
    }
    for (Row& r : rows) {
        if (Status st = finish_k(a, h, marks, prof.get(), r, progress); !st.ok()) {
            std::fprintf(stderr, "inject_bench: k=%lld: %s\n", static_cast<long long>(r.k),
                         st.error().message.c_str());
            return 1;
        }
    }

    // ---- table ----
    const Row& lo = rows.front();
    const Row& hi = rows.back();
    std::printf("\n== inject_bench %s on %s: d2d %.3f TB/s, KV %.1f KiB/token, chunk %lld tok "
                "= %.2f MB ==\n",
                a.config_path.c_str(), device_name.c_str(), d2d / 1e12,
                static_cast<double>(h.kv_bytes_per_token()) / 1024,
                static_cast<long long>(a.shape.fact_tokens),
                static_cast<double>(h.chunk_bytes()) / 1e6);
    std::printf("TTFT ms, median of %d (header %lld, facts %lld each, footer %lld, query %lld "
                "tokens)\n",
                a.repeats, static_cast<long long>(a.shape.header_tokens),
                static_cast<long long>(a.shape.fact_tokens),
                static_cast<long long>(a.shape.footer_tokens),
                static_cast<long long>(a.shape.query_tokens));
    std::printf("%4s %6s %6s %5s | %8s %8s | %8s %8s | %8s | %7s %7s | %8s %6s | %7s %7s\n", "k",
                "|M|", "inject", "fwd", "kv GPU", "(inj)", "kv host", "(issued)", "prompt",
                "pr/kv", "hst/gpu", "inj GB/s", "%d2d", "ref kv", "ref pr");
    for (const Row& r : rows) {
        const auto ref = kReference.find(r.k);
        std::printf("%4lld %6lld %6lld %5lld | %8.3f %8.3f | %8s %8s | %8.3f | %7.2f %7s | %8.0f "
                    "%5.0f%% | %7s %7s\n",
                    static_cast<long long>(r.k), static_cast<long long>(r.memory_tokens),
                    static_cast<long long>(r.loaded_tokens),
                    static_cast<long long>(r.forward_tokens), r.kv.median(),
                    r.kv_inject.median(), a.host_tier ? fmt("%.3f", r.host.median()).c_str() : "-",
                    a.host_tier ? fmt("%.3f", r.host_issued.median()).c_str() : "-",
                    r.prompt.median(), ratio(r.prompt.median(), r.kv.median()),
                    a.host_tier ? fmt("%.2f", ratio(r.host.median(), r.kv.median())).c_str() : "-",
                    r.op_bytes_per_s() / 1e9, 100.0 * ratio(r.op_bytes_per_s(), d2d),
                    ref != kReference.end() ? fmt("%.1f", ref->second.first).c_str() : "-",
                    ref != kReference.end() ? fmt("%.0f", ref->second.second).c_str() : "-");
    }

    struct Check {
        std::string name;
        double value, target, reference;
        bool at_most;  // target is an upper bound
        bool pass() const { return at_most ? value <= target : value >= target; }
    };
    const std::string klo = std::to_string(lo.k), khi = std::to_string(hi.k);
    std::vector<Check> checks{
        {"kv@" + khi + " / kv@" + klo, ratio(hi.kv.median(), lo.kv.median()), 1.10,
         kRefKv50 / kRefKv5, true},
        {"prompt@" + khi + " / kv@" + khi, ratio(hi.prompt.median(), hi.kv.median()), 5.0,
         kRefPrompt50 / kRefKv50, false},
        {"inject op bytes/s / d2d @" + khi, ratio(hi.op_bytes_per_s(), d2d), 0.50, 0.0, false},
    };
    if (a.host_tier)
        checks.push_back({"host-tier kv@" + khi + " / GPU kv@" + khi,
                          ratio(hi.host.median(), hi.kv.median()), 1.5, 0.0, true});
    std::printf("\nissue ratios (reference: vLLM + connector, reference-system.md §8.2)\n");
    std::printf("%-34s %9s %9s %10s %6s\n", "ratio", "measured", "target", "reference", "");
    for (const Check& c : checks) {
        std::printf("%-34s %9.3f %8s%.2f %10s %6s\n", c.name.c_str(), c.value,
                    c.at_most ? "<= " : ">= ", c.target,
                    c.reference > 0 ? fmt("%.2f", c.reference).c_str() : "-",
                    c.pass() ? "PASS" : "FAIL");
    }
    std::printf("absolute TTFT k=%s -> %s: kv %.2f -> %.2f ms (reference %.1f -> %.1f), prompt "
                "%.2f -> %.2f ms (reference %.0f -> %.0f)%s\n",
                klo.c_str(), khi.c_str(), lo.kv.median(), hi.kv.median(), kRefKv5, kRefKv50,
                lo.prompt.median(), hi.prompt.median(), kRefPrompt5, kRefPrompt50,
                (lo.k == 5 && hi.k == 50) ? "" : "  (reference is for k 5 -> 50)");
    bool all_finite = true, tiers_match = true;
    for (const Row& r : rows) {
        all_finite = all_finite && r.finite;
        if (a.host_tier && r.host_gpu_max_diff > 1e-3 * std::max(1.0, r.logit_scale))
            tiers_match = false;
    }
    if (a.host_tier) {
        std::printf("host tier vs GPU tier logits (same facts): %s (max |diff| %.3g at k=%s)\n",
                    tiers_match ? "match" : "MISMATCH", hi.host_gpu_max_diff, khi.c_str());
    }
    if (!all_finite) std::printf("WARNING: non-finite logits (random weights overflowed?)\n");
    std::fflush(stdout);

    if (!a.json_path.empty()) {
        json out;
        out["config"] = a.config_path;
        out["model"] = config.name;
        out["device"] = device_name;
        out["backend"] = a.backend;
        out["shape"] = {{"header_tokens", a.shape.header_tokens},
                        {"fact_tokens", a.shape.fact_tokens},
                        {"footer_tokens", a.shape.footer_tokens},
                        {"query_tokens", a.shape.query_tokens},
                        {"block_size", a.shape.block_size},
                        {"pool_facts", a.shape.pool_facts},
                        {"warmup", a.warmup},
                        {"repeats", a.repeats}};
        out["d2d"] = samples_json(rates.copy);
        out["d2d"]["bytes_per_s"] = d2d;
        out["d2d"]["copy_bytes"] = rates.copy_bytes;
        out["kv_bytes_per_token"] = h.kv_bytes_per_token();
        out["chunk_bytes"] = h.chunk_bytes();
        for (const Row& r : rows) {
            json j{{"k", r.k},
                   {"memory_tokens", r.memory_tokens},
                   {"injected_tokens", r.loaded_tokens},
                   {"tail_tokens", r.tail_tokens},
                   {"kv_forward_tokens", r.forward_tokens},
                   {"prompt_forward_tokens", r.memory_tokens + a.shape.query_tokens},
                   {"kv_gpu", samples_json(r.kv)},
                   {"kv_gpu_injected_at", samples_json(r.kv_inject)},
                   {"prompt", samples_json(r.prompt)},
                   {"inject_op", samples_json(r.op)},
                   {"inject_call", samples_json(r.call)},
                   {"inject_bytes", r.inject_bytes},
                   {"inject_op_bytes_per_s", r.op_bytes_per_s()},
                   {"inject_call_bytes_per_s", r.call_bytes_per_s()},
                   {"inject_op_fraction_of_d2d", ratio(r.op_bytes_per_s(), d2d)},
                   {"prompt_over_kv", ratio(r.prompt.median(), r.kv.median())},
                   {"logits_finite", r.finite}};
            if (a.host_tier) {
                j["kv_host"] = samples_json(r.host);
                j["kv_host_issued_at"] = samples_json(r.host_issued);
                j["host_over_gpu"] = ratio(r.host.median(), r.kv.median());
                j["host_gpu_logits_max_diff"] = r.host_gpu_max_diff;
            }
            const auto ref = kReference.find(r.k);
            if (ref != kReference.end())
                j["reference"] = {{"kv_ms", ref->second.first}, {"prompt_ms", ref->second.second}};
            out["rows"].push_back(j);
        }
        for (const Check& c : checks) {
            out["ratios"].push_back({{"name", c.name}, {"value", c.value}, {"target", c.target},
                                     {"at_most", c.at_most}, {"pass", c.pass()},
                                     {"reference", c.reference > 0 ? json(c.reference) : json()}});
        }
        out["reference_endpoints_ms"] = {{"kv", {kRefKv5, kRefKv50}},
                                         {"prompt", {kRefPrompt5, kRefPrompt50}}};
        out["logits_finite"] = all_finite;
        out["host_gpu_logits_match"] = tiers_match;
        if (!write_json(out, a.json_path, "inject_bench", progress)) return 1;
    }
    return 0;
}

}  // namespace
}  // namespace inferscale::bench

int main(int argc, char** argv) {
    inferscale::bench::Args a;
    CLI::App app{"inject_bench: memory injection TTFT and bandwidth on random weights"};
    inferscale::bench::add_common_options(app, a.config_path, a.json_path, a.backend, a.device);
    app.add_option("--ks", a.ks, "facts per request, e.g. 5,10,20,50")->delimiter(',');
    app.add_option("--warmup", a.warmup, "untimed rounds per k")->check(CLI::NonNegativeNumber);
    app.add_option("--repeats", a.repeats, "timed rounds per k")->check(CLI::PositiveNumber);
    auto* copy = app.add_option("--copy-mib", a.copy_mib, "bytes of the d2d copy, MiB");
    app.add_option("--header-tokens", a.shape.header_tokens, "memory header tokens");
    app.add_option("--fact-tokens", a.shape.fact_tokens, "tokens per fact chunk");
    app.add_option("--footer-tokens", a.shape.footer_tokens, "footer tokens (>= block - 1)");
    app.add_option("--query-tokens", a.shape.query_tokens, "question + query template tokens");
    app.add_option("--pool-facts", a.shape.pool_facts, "resident fact chunks to rotate through");
    app.add_option("--seed", a.shape.seed, "weight and chunk seed");
    app.add_flag("!--no-host-tier", a.host_tier, "skip the host-tier (pinned memory) requests");
    app.add_flag("--profile", a.profile, "per-op profile of the kv requests of every k");
    CLI11_PARSE(app, argc, argv);
    if (a.backend == "cpu" && copy->count() == 0) a.copy_mib = 64;
    return inferscale::bench::run(a);
}
