// search_bench: retrieval latency for one user with 1k, 10k and 100k facts, the part of a request's
// TTFT that picks its memory. Facts are random unit vectors of all-MiniLM-L6-v2's shape (dim 384,
// f32) and synthetic LoCoMo-like sentences, from a fixed seed. Rows: dense (VectorIndex on the CPU;
// DeviceVectorIndex on the GPU: query up, Backend::dot_top_k, k results down), BM25 (Bm25Index,
// CPU) and hybrid (BM25 and dense top-kFuse each, then reciprocal-rank fusion), p50 and p99 over
// many queries; on the GPU also the op alone, f32 and f16 rows, back to back. Each dense row stands
// beside its physical limit: the bytes the scan must read over the read bandwidth measured in the
// same run (host: a parallel streaming sum; GPU: a device-to-device copy, bytes read + written).
// With --embedding-model, rows of what a request pays: the query's embedding alone ("embed", the
// SentenceEncoder at batch 1), and "dense+embed" / "hybrid+embed", the server's FactRetriever
// embedding the question and searching (on the GPU: the encoder and memory::DeviceUserVectors on
// backends of their own, as `serve --device cuda` runs them).
//
//   build/bin/search_bench [--facts 1000,10000,100000] [--k 10] [--iters 400] [--threads 0]
//                          [--gpu auto|on|off] [--embedding-model DIR] [--json out.json]

#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "base/check.h"
#include "base/timer.h"
#include "embed/sentence_encoder.h"
#include "memory/device_user_vectors.h"
#include "memory/device_vector_index.h"
#include "retrieval/bm25_index.h"
#include "retrieval/fact_retriever.h"
#include "retrieval/rank_fusion.h"
#include "retrieval/vector_index.h"

#if INFERSCALE_SEARCH_BENCH_CUDA
#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#endif

namespace inferscale::bench {
namespace {

constexpr std::size_t kDim = 384;
// Each list's depth before fusion and the fusion's constant: the server's (FactRetriever).
constexpr std::size_t kFuse = retrieval::FactRetriever::kFusionDepth;
constexpr double kFuseC = retrieval::FactRetriever::kFusionC;
constexpr int kQueries = 64;
constexpr std::uint64_t kSeed = 1;
const std::string kUser = "bench-user";

struct Latency {
    double p50_us = 0.0, p99_us = 0.0;
};

// Runs f(i) for i = 0 .. iters-1 after a warm-up, each timed alone.
template <class F>
Latency time_calls(int iters, F&& f) {
    for (int i = 0; i < std::min(iters, 20); ++i) f(i);
    std::vector<double> us(static_cast<std::size_t>(iters));
    for (int i = 0; i < iters; ++i) {
        Timer t;
        f(i);
        us[static_cast<std::size_t>(i)] = t.seconds() * 1e6;
    }
    std::sort(us.begin(), us.end());
    const auto at = [&](double q) {
        return us[std::min(us.size() - 1, static_cast<std::size_t>(std::ceil(q * us.size())) - 1)];
    };
    return {at(0.5), at(0.99)};
}

std::vector<float> unit_vector(std::mt19937_64& rng) {
    std::normal_distribution<float> dist;
    std::vector<float> v(kDim);
    double norm = 0.0;
    for (float& x : v) {
        x = dist(rng);
        norm += double{x} * x;
    }
    for (float& x : v) x = static_cast<float>(x / std::sqrt(norm));
    return v;
}

// Sentences shaped like LoCoMo's extracted facts: who did what, where, when.
struct TextGen {
    std::mt19937_64 rng{kSeed + 1};
    std::vector<std::string> names = {"Caroline", "Melanie", "Jon",    "Gina",   "John",   "Maria",
                                      "Tim",      "Nate",    "Joanna", "Audrey", "Andrew", "Evan"};
    std::vector<std::string> verbs = {"painted",  "visited",  "adopted", "joined", "started",
                                      "finished", "bought",   "cooked",  "read",   "wrote",
                                      "planned",  "attended", "lost",    "found",  "shared"};
    std::vector<std::string> things = {
        "a sunrise landscape",  "a pottery class",          "a rescue dog",
        "a support group",      "a marathon training plan", "a novel about dragons",
        "a vegan lasagna",      "a camping trip",           "a charity run",
        "a new guitar",         "a photography course",     "a dance studio",
        "a LGBTQ pride parade", "a job interview",          "a family reunion",
        "a coding bootcamp",    "a beach cleanup",          "a birthday party",
        "a yoga retreat",       "a vintage camera",         "a poetry reading",
        "a museum exhibit",     "a hiking trail",           "a violin lesson"};
    std::vector<std::string> places = {"in Boston",
                                       "at the lake",
                                       "with her kids",
                                       "with his brother",
                                       "at the community center",
                                       "near the office",
                                       "in the mountains",
                                       "downtown"};
    std::vector<std::string> times = {"last weekend",   "in May 2023",     "yesterday",
                                      "two years ago",  "on her birthday", "last summer",
                                      "in the morning", "after work"};

    const std::string& pick(const std::vector<std::string>& v) { return v[rng() % v.size()]; }
    std::string fact() {
        return pick(names) + " " + pick(verbs) + " " + pick(things) + " " + pick(places) + " " +
               pick(times) + ".";
    }
    std::string question() {
        return "When did " + pick(names) + " " + pick(verbs) + " " + pick(things) + "?";
    }
};

// Read bandwidth of host memory: every thread sums its share of `bytes` into 32 independent lanes
// (so the adds vectorize and never wait on each other), best of five.
double host_read_bytes_per_s(std::size_t bytes) {
    constexpr std::size_t L = 32;
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    const std::size_t n = data.size() / L * L;
    double best = 0.0;
    float total = 0.0f;
    for (int rep = 0; rep < 5; ++rep) {
        Timer t;
        float sum = 0.0f;
#pragma omp parallel reduction(+ : sum)
        {
            const std::size_t threads = static_cast<std::size_t>(omp_get_num_threads());
            const std::size_t me = static_cast<std::size_t>(omp_get_thread_num());
            const std::size_t begin = n / L * me / threads * L,
                              end = n / L * (me + 1) / threads * L;
            std::array<float, L> acc{};
            for (std::size_t i = begin; i < end; i += L) {
                for (std::size_t j = 0; j < L; ++j) acc[j] += data[i + j];
            }
            for (float a : acc) sum += a;
        }
        best = std::max(best, static_cast<double>(n * sizeof(float)) / t.seconds());
        total += sum;
    }
    IS_CHECK(total > 0.0f);  // the sums are used, so the reads stay
    return best;
}

struct Row {
    std::size_t facts = 0;
    std::string method, device;
    Latency latency;
    double bytes_read = 0.0;  // 0: no bandwidth limit stated (BM25's cost is not a scan)
    double limit_us = 0.0;
};

void print_row(const Row& r) {
    if (r.bytes_read > 0) {
        std::printf("%7zu  %-16s %-5s %9.1f %9.1f %11.2f %9.1f %8.2f\n", r.facts, r.method.c_str(),
                    r.device.c_str(), r.latency.p50_us, r.latency.p99_us, r.bytes_read / 1e6,
                    r.limit_us, r.latency.p50_us / r.limit_us);
    } else {
        std::printf("%7zu  %-16s %-5s %9.1f %9.1f %11s %9s %8s\n", r.facts, r.method.c_str(),
                    r.device.c_str(), r.latency.p50_us, r.latency.p99_us, "-", "-", "-");
    }
    std::fflush(stdout);
}

#if INFERSCALE_SEARCH_BENCH_CUDA
// HBM bandwidth from a device-to-device copy (bytes read + written over the time), best of five.
double device_copy_bytes_per_s(std::size_t bytes) {
    void *a = nullptr, *b = nullptr;
    IS_CUDA_CHECK(cudaMalloc(&a, bytes));
    IS_CUDA_CHECK(cudaMalloc(&b, bytes));
    IS_CUDA_CHECK(cudaMemset(a, 0, bytes));
    double best = 0.0;
    for (int rep = 0; rep < 6; ++rep) {
        IS_CUDA_CHECK(cudaDeviceSynchronize());
        Timer t;
        IS_CUDA_CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
        IS_CUDA_CHECK(cudaDeviceSynchronize());
        if (rep > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / t.seconds());
    }
    IS_CUDA_CHECK(cudaFree(a));
    IS_CUDA_CHECK(cudaFree(b));
    return best;
}
#endif

struct Options {
    std::vector<std::size_t> facts = {1000, 10000, 100000};
    std::size_t k = 10;
    int iters = 400;
    int threads = 0;
    std::string gpu = "auto";
    std::string embedding_model;
    std::string json_path;
};

// A query embedder over `encoder` (one text, batch 1), as the server's.
retrieval::QueryEmbedder embedder_of(embed::SentenceEncoder& encoder) {
    return [&encoder](std::string_view text) {
        const std::string one(text);
        return encoder.embed({&one, 1});
    };
}

std::unique_ptr<embed::SentenceEncoder> load_encoder(const std::string& dir,
                                                     tensor::Backend& backend) {
    auto loaded = embed::SentenceEncoder::load(dir, backend);
    IS_CHECK(loaded.ok()) << dir << ": " << loaded.error().message;
    IS_CHECK_EQ(static_cast<std::size_t>((*loaded)->dim()), kDim);
    return std::move(loaded).value();
}

int run(const Options& opt) {
    if (opt.threads > 0) omp_set_num_threads(opt.threads);
    const double host_bw = host_read_bytes_per_s(std::size_t{512} << 20);
    nlohmann::json out = {{"dim", kDim},
                          {"k", opt.k},
                          {"fuse_depth", kFuse},
                          {"iters", opt.iters},
                          {"host_threads", omp_get_max_threads()},
                          {"host_read_bytes_per_s", host_bw},
                          {"rows", nlohmann::json::array()}};
    std::printf(
        "search_bench: one user, dim %zu f32 unit vectors, k %zu, hybrid = RRF(c %g) of "
        "BM25 and dense top-%zu, %d timed searches a row (seed %llu)\n",
        kDim, opt.k, kFuseC, kFuse, opt.iters, static_cast<unsigned long long>(kSeed));
    std::printf("host: %d OpenMP threads, read bandwidth %.1f GB/s (parallel streaming sum)\n",
                omp_get_max_threads(), host_bw / 1e9);

#if INFERSCALE_SEARCH_BENCH_CUDA
    std::unique_ptr<backends::cuda::CudaBackend> gpu;
    double device_bw = 0.0;
    if (opt.gpu != "off") {
        int count = 0;
        if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
            auto created = backends::cuda::CudaBackend::create(0);
            IS_CHECK(created.ok()) << created.error().message;
            gpu = std::move(*created);
            device_bw = device_copy_bytes_per_s(std::size_t{1} << 30);
            cudaDeviceProp prop{};
            IS_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
            std::printf("gpu: %s, copy bandwidth %.1f GB/s (device-to-device, read + written)\n",
                        prop.name, device_bw / 1e9);
            out["gpu"] = prop.name;
            out["device_copy_bytes_per_s"] = device_bw;
        }
    }
    IS_CHECK(opt.gpu != "on" || gpu != nullptr) << "--gpu on: no CUDA device";
#else
    IS_CHECK(opt.gpu != "on") << "--gpu on: this build has no CUDA backend";
#endif
    backends::cpu::CpuBackend cpu_backend;
    std::unique_ptr<embed::SentenceEncoder> cpu_encoder;
    if (!opt.embedding_model.empty()) {
        cpu_encoder = load_encoder(opt.embedding_model, cpu_backend);
        out["embedding_model"] = cpu_encoder->id();
    }
#if INFERSCALE_SEARCH_BENCH_CUDA
    // The serving layout: the encoder on a backend of its own, the device mirror on another.
    std::unique_ptr<backends::cuda::CudaBackend> encoder_gpu;
    std::unique_ptr<embed::SentenceEncoder> gpu_encoder;
    if (gpu != nullptr && cpu_encoder != nullptr) {
        auto created = backends::cuda::CudaBackend::create(0);
        IS_CHECK(created.ok()) << created.error().message;
        encoder_gpu = std::move(*created);
        gpu_encoder = load_encoder(opt.embedding_model, *encoder_gpu);
    }
#endif
    std::printf("%7s  %-16s %-5s %9s %9s %11s %9s %8s\n", "facts", "method", "dev", "p50_us",
                "p99_us", "read_MB", "limit_us", "p50/lim");

    for (const std::size_t n : opt.facts) {
        std::mt19937_64 rng(kSeed);
        TextGen text;
        retrieval::VectorIndex dense(kDim);
        retrieval::Bm25Index bm25;
        for (std::size_t i = 0; i < n; ++i) {
            const auto id = static_cast<retrieval::FactId>(i + 1);
            dense.upsert(kUser, id, unit_vector(rng));
            bm25.upsert(kUser, id, text.fact());
        }
        std::vector<std::vector<float>> queries;
        std::vector<std::string> questions;
        for (int i = 0; i < kQueries; ++i) {
            queries.push_back(unit_vector(rng));
            questions.push_back(text.question());
        }
        const double bytes = static_cast<double>(n * kDim * sizeof(float));
        std::vector<Row> rows;
        const auto add = [&](const std::string& method, const std::string& device, Latency l,
                             double read, double bw) {
            Row r{n, method, device, l, read, read > 0 ? read / bw * 1e6 : 0.0};
            print_row(r);
            rows.push_back(r);
        };
        std::size_t sink = 0;
        add("dense", "cpu",
            time_calls(
                opt.iters,
                [&](int i) { sink += dense.search(kUser, queries[i % kQueries], opt.k).size(); }),
            bytes, host_bw);
        add("bm25", "cpu",
            time_calls(
                opt.iters,
                [&](int i) { sink += bm25.search(kUser, questions[i % kQueries], opt.k).size(); }),
            0.0, 0.0);
        add("hybrid", "cpu",
            time_calls(opt.iters,
                       [&](int i) {
                           const std::vector<std::vector<retrieval::Hit>> lists = {
                               bm25.search(kUser, questions[i % kQueries], kFuse),
                               dense.search(kUser, queries[i % kQueries], kFuse)};
                           sink += retrieval::reciprocal_rank_fusion(lists, opt.k, kFuseC).size();
                       }),
            bytes, host_bw);
        if (cpu_encoder != nullptr) {
            const retrieval::QueryEmbedder embed = embedder_of(*cpu_encoder);
            const retrieval::FactRetriever retriever(bm25, {&dense, nullptr, embed});
            add("embed", "cpu",
                time_calls(opt.iters,
                           [&](int i) { sink += embed(questions[i % kQueries])->size(); }),
                0.0, 0.0);
            for (const auto method :
                 {retrieval::RetrievalMethod::Dense, retrieval::RetrievalMethod::Hybrid}) {
                add(std::string(retrieval::retrieval_method_name(method)) + "+embed", "cpu",
                    time_calls(
                        opt.iters,
                        [&](int i) {
                            sink += retriever.search(kUser, questions[i % kQueries], opt.k, method)
                                        ->size();
                        }),
                    bytes, host_bw);
            }
        }

#if INFERSCALE_SEARCH_BENCH_CUDA
        if (gpu != nullptr) {
            auto created = memory::DeviceVectorIndex::create(*gpu, kDim, n);
            IS_CHECK(created.ok()) << created.error().message;
            memory::DeviceVectorIndex& mirror = **created;
            std::mt19937_64 again(kSeed);  // the same vectors as the host index
            for (std::size_t i = 0; i < n; ++i) {
                IS_CHECK(
                    mirror.upsert(static_cast<retrieval::FactId>(i + 1), unit_vector(again)).ok());
            }
            // The mirror must rank as the host index does (ties aside: random vectors have none).
            const auto want = dense.search(kUser, queries[0], opt.k);
            const auto got = mirror.search(queries[0], opt.k);
            IS_CHECK(want.size() == got.size());
            for (std::size_t j = 0; j < want.size(); ++j) {
                IS_CHECK(want[j].fact_id == got[j].fact_id) << "GPU place " << j << " differs";
            }
            add("dense", "gpu",
                time_calls(
                    opt.iters,
                    [&](int i) { sink += mirror.search(queries[i % kQueries], opt.k).size(); }),
                bytes, device_bw);
            add("hybrid", "gpu",
                time_calls(opt.iters,
                           [&](int i) {
                               const std::vector<std::vector<retrieval::Hit>> lists = {
                                   bm25.search(kUser, questions[i % kQueries], kFuse),
                                   mirror.search(queries[i % kQueries], kFuse)};
                               sink += retrieval::reciprocal_rank_fusion(lists, opt.k, kFuseC).size();
                           }),
                bytes, device_bw);
            if (gpu_encoder != nullptr) {
                // The served path: the question embedded on the GPU, then FactRetriever with the
                // per-user device mirror as its fast index (the same vectors as the host index).
                memory::DeviceUserVectors users(*gpu, kDim);
                std::mt19937_64 same(kSeed);
                for (std::size_t i = 0; i < n; ++i)
                    IS_CHECK(
                        users.put(kUser, static_cast<retrieval::FactId>(i + 1), unit_vector(same))
                            .ok());
                const retrieval::QueryEmbedder embed = embedder_of(*gpu_encoder);
                const retrieval::FactRetriever retriever(bm25, {&dense, &users, embed});
                add("embed", "gpu",
                    time_calls(opt.iters,
                               [&](int i) { sink += embed(questions[i % kQueries])->size(); }),
                    0.0, 0.0);
                for (const auto method :
                     {retrieval::RetrievalMethod::Dense, retrieval::RetrievalMethod::Hybrid}) {
                    add(std::string(retrieval::retrieval_method_name(method)) + "+embed", "gpu",
                        time_calls(opt.iters,
                                   [&](int i) {
                                       sink += retriever
                                                   .search(kUser, questions[i % kQueries], opt.k,
                                                           method)
                                                   ->size();
                                   }),
                        bytes, device_bw);
                }
            }
            // The op alone, back to back (mean per op): f32 rows as the mirror keeps them, and f16
            // rows for what halving the bytes would buy.
            for (const tensor::DType dtype : {tensor::DType::F32, tensor::DType::F16}) {
                const std::size_t elem = tensor::dtype_size(dtype);
                auto m = gpu->allocate(std::max<std::size_t>(n * kDim * elem, 16));
                auto q = gpu->allocate(kDim * sizeof(float));
                auto r = gpu->allocate(opt.k * 4);
                auto s = gpu->allocate(opt.k * 4);
                IS_CHECK(m.ok() && q.ok() && r.ok() && s.ok()) << "out of device memory";
                const auto nn = static_cast<std::int64_t>(n), kk = static_cast<std::int64_t>(opt.k);
                const tensor::Tensor mt = m->view(dtype, {nn, static_cast<std::int64_t>(kDim)});
                const tensor::Tensor qt =
                    q->view(tensor::DType::F32, {static_cast<std::int64_t>(kDim)});
                gpu->fill_random(mt, kSeed, 0.05f, 0.0f);
                gpu->fill_random(qt, kSeed + 1, 0.05f, 0.0f);
                const auto op = [&] {
                    gpu->dot_top_k(mt, qt, r->view(tensor::DType::I32, {kk}),
                                   s->view(tensor::DType::F32, {kk}));
                };
                op();
                gpu->synchronize();
                const int reps = std::max(opt.iters, 100);
                Timer t;
                for (int i = 0; i < reps; ++i) op();
                gpu->synchronize();
                const double us = t.seconds() * 1e6 / reps;
                const double read = static_cast<double>(n * kDim * elem);
                add(dtype == tensor::DType::F32 ? "op-f32 (mean)" : "op-f16 (mean)", "gpu",
                    Latency{us, us}, read, device_bw);
            }
        }
#endif
        for (const Row& r : rows) {
            out["rows"].push_back({{"facts", r.facts},
                                   {"method", r.method},
                                   {"device", r.device},
                                   {"p50_us", r.latency.p50_us},
                                   {"p99_us", r.latency.p99_us},
                                   {"bytes_read", r.bytes_read},
                                   {"limit_us", r.limit_us}});
        }
        IS_CHECK(sink > 0);
    }
    if (!opt.json_path.empty()) {
        std::ofstream(opt.json_path) << out.dump(1) << "\n";
    }
    return 0;
}

}  // namespace
}  // namespace inferscale::bench

int main(int argc, char** argv) {
    inferscale::bench::Options opt;
    CLI::App app{"Dense, BM25 and hybrid retrieval latency against the memory read limit"};
    app.add_option("--facts", opt.facts, "fact counts of the user, one row set each")
        ->delimiter(',');
    app.add_option("--k", opt.k, "hits per search")->check(CLI::Range(1, 1000));
    app.add_option("--iters", opt.iters, "timed searches per row")->check(CLI::PositiveNumber);
    app.add_option("--threads", opt.threads, "OpenMP threads on the host (0: all cores)");
    app.add_option("--gpu", opt.gpu, "GPU rows: auto (when a device is present), on, off")
        ->check(CLI::IsMember({"auto", "on", "off"}));
    app.add_option("--embedding-model", opt.embedding_model,
                   "sentence-transformers folder: adds the rows with the query's embedding");
    app.add_option("--json", opt.json_path, "also write the rows as JSON here");
    CLI11_PARSE(app, argc, argv);
    return inferscale::bench::run(opt);
}
