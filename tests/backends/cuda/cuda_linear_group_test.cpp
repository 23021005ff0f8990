// CudaBackend::linear's groups on the small-batch kernels (linear_small.cu; linear_gemv.cu for one
// token, linear_cluster.cu from 17 tokens) against the CPU backend's linear per target: 1..128
// tokens, odd output sizes and k not a multiple of the kernels' steps, bf16 and f32 biases,
// groups of up to three weights, shapes that split k across CTAs and across the CTAs of a
// cluster, the same launches replayed from a CUDA graph, and the one-token gated MLP
// (the SwiGLU epilogue) in one GEMV launch. Targets stacked in memory (as the model stores q/k/v,
// model::upload_stacked) on the stacked path: one cuBLASLt GEMM over all their rows, its output
// columns split into the targets. Separate GEMMs per target, forked onto two streams.

#include <cmath>
#include <string>

#include "cuda_test_util.h"
#include "model/stacked_weight.h"

namespace inferscale::cuda_test {
namespace {

struct GroupCase {
    std::int64_t n, in;
    std::vector<std::int64_t> outs;
    bool bias;
    DType y_dtype;
};

std::string case_name(const ::testing::TestParamInfo<GroupCase>& info) {
    const GroupCase& c = info.param;
    std::string name = "n" + std::to_string(c.n) + "_in" + std::to_string(c.in);
    for (std::int64_t o : c.outs) name += "_" + std::to_string(o);
    return name + (c.bias ? "_bias" : "") + (c.y_dtype == DType::F32 ? "_f32" : "");
}

// Device weights, biases and outputs of one group, with the CPU reference.
struct Group {
    std::vector<tensor::DeviceWeight> weights;
    std::vector<DeviceTensor> biases, ys;
    std::vector<tensor::LinearTarget> targets;
    std::vector<std::vector<float>> refs;
};

class CudaLinearGroupTest : public CudaTest, public ::testing::WithParamInterface<GroupCase> {
  protected:
    // The kernel on every group, not whichever path the timing would pick.
    CudaBackendOptions options() const override {
        CudaBackendOptions o;
        o.linear_paths.autotune = false;
        return o;
    }

    Group make_group(const GroupCase& c, std::vector<float>& x) {
        Group g;
        for (std::int64_t out : c.outs) {
            std::vector<float> w = random_bf16(out * c.in, rng_, 0.05f), b = random_bf16(out, rng_);
            auto dw = gpu_->upload_weight(host_view(w, {out, c.in}));
            IS_CHECK(dw.ok()) << dw.error().message;
            Tensor bias;
            if (c.bias) {
                // bf16 as upload_weight stores it, f32 where the output is f32 (logits).
                g.biases.push_back(device_from(*gpu_, b, c.y_dtype, {out}));
                bias = g.biases.back().tensor;
            }
            g.ys.push_back(device_empty(*gpu_, c.y_dtype, {c.n, out}));
            poison(*gpu_, g.ys.back().tensor);
            g.targets.push_back({dw->tensor, bias, g.ys.back().tensor});
            g.weights.push_back(std::move(*dw));
            std::vector<float> ref(c.n * out);
            cpu_.linear(host_view(x, {c.n, c.in}), host_view(w, {out, c.in}),
                        c.bias ? host_view(b, {out}) : Tensor(), host_view(ref, {c.n, out}));
            g.refs.push_back(std::move(ref));
        }
        return g;
    }

    // Every target's output, each checked against its CPU reference.
    std::vector<std::vector<float>> outputs_near_cpu(const GroupCase& c, const Group& g) const {
        std::vector<std::vector<float>> ys;
        for (std::size_t i = 0; i < g.ys.size(); ++i) {
            ys.push_back(download(*gpu_, g.ys[i].tensor));
            EXPECT_LT(rel_error(ys.back(), g.refs[i]),
                      c.y_dtype == DType::F32 ? 1e-3 : kBf16Tolerance)
                << "target " << i;
        }
        return ys;
    }

    // Every target's output poisoned, `run` (which enqueues the group again), then each output
    // against want[i] bit for bit.
    template <class Run>
    void expect_rerun_equal(const Group& g, Run run, const std::vector<std::vector<float>>& want,
                            const std::string& what) {
        for (const DeviceTensor& y : g.ys) poison(*gpu_, y.tensor);
        run();
        for (std::size_t i = 0; i < g.ys.size(); ++i) {
            EXPECT_EQ(download(*gpu_, g.ys[i].tensor), want[i]) << what << "target " << i;
        }
    }
};

TEST_P(CudaLinearGroupTest, MatchesCpu) {
    const GroupCase c = GetParam();
    std::vector<float> x = random_bf16(c.n * c.in, rng_);
    Group g = make_group(c, x);
    DeviceTensor dx = device_from(*gpu_, x, DType::BF16, {c.n, c.in});
    gpu_->linear({dx.tensor, g.targets});
    const std::vector<std::vector<float>> first = outputs_near_cpu(c, g);
    // Split-k partials are summed in a fixed order: a second run gives the same bits.
    expect_rerun_equal(g, [&] { gpu_->linear({dx.tensor, g.targets}); }, first, "");
    // One-token groups, which the GEMV took above, run once more on the mma kernel.
    if (c.n == 1) {
        backends::cuda::LinearPathOptions paths = gpu_->linear_path_options();
        paths.gemv = false;
        gpu_->set_linear_path_options(paths);
        for (const DeviceTensor& y : g.ys) poison(*gpu_, y.tensor);
        gpu_->linear({dx.tensor, g.targets});
        for (std::size_t i = 0; i < g.targets.size(); ++i) {
            EXPECT_LT(rel_error(download(*gpu_, g.ys[i].tensor), g.refs[i]),
                      c.y_dtype == DType::F32 ? 1e-3 : kBf16Tolerance)
                << "mma kernel, target " << i;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaLinearGroupTest,
    ::testing::Values(GroupCase{1, 4096, {100}, true, DType::BF16},
                      GroupCase{5, 4096, {100}, true, DType::BF16},  // split k
                      GroupCase{1, 4096, {4096, 1024, 1024}, false, DType::BF16},
                      GroupCase{2, 256, {384}, false, DType::BF16},
                      GroupCase{3, 896, {128, 32, 32}, true, DType::BF16},  // Qwen-like q/k/v
                      GroupCase{7, 200, {301, 77, 5}, true, DType::BF16},
                      GroupCase{8, 1024, {1000, 24}, false, DType::BF16},
                      GroupCase{16, 512, {777}, true, DType::BF16},
                      GroupCase{33, 72, {300, 17, 45}, true, DType::BF16},
                      GroupCase{64, 2048, {513, 1024}, false, DType::BF16},
                      GroupCase{64, 4096, {64}, true, DType::BF16},  // 64 tokens, cluster splits
                      GroupCase{17, 4096, {1024, 100}, true, DType::BF16},  // cluster splits
                      GroupCase{40, 1000, {300, 17, 45}, true, DType::BF16},
                      GroupCase{96, 2048, {513}, false, DType::BF16},
                      GroupCase{128, 4096, {4096}, true, DType::BF16},
                      GroupCase{64, 14336, {1024}, false, DType::BF16},  // down-like k
                      GroupCase{100, 896, {128, 32, 32}, true, DType::F32},
                      GroupCase{5, 128, {777}, true, DType::F32},    // logits
                      GroupCase{1, 4096, {1001}, false, DType::F32},
                      // One token, GEMV ring: several pieces a row, a short last piece, rows
                      // shorter than one warp-wide read, many rows a warp.
                      GroupCase{1, 14336, {4096}, false, DType::BF16},
                      GroupCase{1, 3000, {5000, 3}, true, DType::BF16},
                      GroupCase{1, 200, {301, 77, 5}, true, DType::BF16},
                      GroupCase{1, 1024, {20000, 9000}, false, DType::BF16}),
    case_name);

// One token of the gated MLP (the SwiGLU epilogue): the GEMV's gated launch against the same
// op as separate launches (the linear, then swiglu) bit for bit, and
// against the CPU. The gated launch leaves up unwritten, which shows it ran.
class CudaGatedLinearTest : public CudaLinearGroupTest {};

TEST_P(CudaGatedLinearTest, EqualsLinearsThenSwiglu) {
    const GroupCase c = GetParam();
    ASSERT_EQ(c.outs.size(), 2u);
    std::vector<float> x = random_bf16(c.in, rng_);
    Group g = make_group(c, x);
    DeviceTensor dx = device_from(*gpu_, x, DType::BF16, {1, c.in});
    gpu_->linear({dx.tensor, g.targets, tensor::LinearEpilogue::SwiGLU});
    const std::vector<float> fused = download(*gpu_, g.ys[0].tensor);
    std::size_t up_written = 0;
    for (float v : download(*gpu_, g.ys[1].tensor)) up_written += std::isnan(v) ? 0 : 1;
    EXPECT_EQ(up_written, 0u);
    gpu_->linear({dx.tensor, g.targets});
    gpu_->swiglu(g.ys[0].tensor, g.ys[1].tensor, g.ys[0].tensor);
    EXPECT_EQ(fused, download(*gpu_, g.ys[0].tensor));
    std::vector<float> ref(c.outs[0]);
    cpu_.swiglu(host_view(g.refs[0], {1, c.outs[0]}), host_view(g.refs[1], {1, c.outs[0]}),
                host_view(ref, {1, c.outs[0]}));
    EXPECT_LT(rel_error(fused, ref), kBf16Tolerance);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaGatedLinearTest,
                         ::testing::Values(GroupCase{1, 4096, {3000, 3000}, false, DType::BF16},
                                           GroupCase{1, 576, {1536, 1536}, true, DType::BF16},
                                           GroupCase{1, 14336, {100, 100}, false, DType::BF16},
                                           GroupCase{1, 200, {77, 77}, true, DType::BF16}),
                         case_name);

// Captured and replayed (twice, new inputs each time) a split-k launch gives the eager result:
// the register-fed kernel's arrival counters are back at zero after every launch, and the
// cluster kernel's launch replays as recorded.
class CudaLinearGraphTest : public CudaLinearGroupTest {};

TEST_P(CudaLinearGraphTest, ReplaysFromGraph) {
    const GroupCase c = GetParam();
    std::vector<float> x = random_bf16(c.n * c.in, rng_);
    Group g = make_group(c, x);
    DeviceTensor dx = device_from(*gpu_, x, DType::BF16, {c.n, c.in});
    ASSERT_TRUE(gpu_->begin_capture().ok());
    gpu_->linear({dx.tensor, g.targets});
    auto graph = gpu_->end_capture();
    ASSERT_TRUE(graph.ok()) << graph.error().message;
    for (int round = 0; round < 2; ++round) {
        const std::vector<float> x2 = random_bf16(c.n * c.in, rng_);
        DeviceTensor fresh = device_from(*gpu_, x2, DType::BF16, {c.n, c.in});
        gpu_->linear({fresh.tensor, g.targets});
        std::vector<std::vector<float>> eager;
        for (const DeviceTensor& y : g.ys) eager.push_back(download(*gpu_, y.tensor));
        ASSERT_EQ(cudaMemcpyAsync(dx.tensor.data, fresh.tensor.data, dx.tensor.nbytes(),
                                  cudaMemcpyDeviceToDevice, gpu_->stream()),
                  cudaSuccess);
        expect_rerun_equal(g, [&] { gpu_->replay(**graph); }, eager,
                           "round " + std::to_string(round) + " ");
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaLinearGraphTest,
                         ::testing::Values(GroupCase{1, 4096, {1024, 100}, true, DType::BF16},
                                           GroupCase{5, 4096, {1024, 100}, true, DType::BF16},
                                           GroupCase{40, 4096, {1024, 100}, true, DType::BF16}),
                         case_name);

// Targets as separate cuBLASLt GEMMs, every second one on the side stream (concurrent_max_rows):
// the same bits as one after another on one stream (both lanes take the heuristic's first
// algorithm here), close to the CPU, and the fork and join replayed from a CUDA graph.
class CudaConcurrentTargetsTest : public CudaLinearGroupTest {
  protected:
    CudaBackendOptions options() const override {
        CudaBackendOptions o;
        o.autotune_matmul = false;
        o.linear_paths.autotune = false;
        o.linear_paths.small_max_rows = 0;
        o.linear_paths.stacked = false;
        return o;
    }
};

TEST_P(CudaConcurrentTargetsTest, EqualsSerialAndReplays) {
    const GroupCase c = GetParam();
    std::vector<float> x = random_bf16(c.n * c.in, rng_);
    Group g = make_group(c, x);
    DeviceTensor dx = device_from(*gpu_, x, DType::BF16, {c.n, c.in});
    backends::cuda::LinearPathOptions paths = gpu_->linear_path_options();
    const int concurrent_max_rows = paths.concurrent_max_rows;
    ASSERT_GE(concurrent_max_rows, c.n);
    gpu_->linear({dx.tensor, g.targets});
    const std::vector<std::vector<float>> concurrent = outputs_near_cpu(c, g);

    paths.concurrent_max_rows = 0;
    gpu_->set_linear_path_options(paths);
    expect_rerun_equal(g, [&] { gpu_->linear({dx.tensor, g.targets}); }, concurrent,
                       "serial, ");

    paths.concurrent_max_rows = concurrent_max_rows;
    gpu_->set_linear_path_options(paths);
    ASSERT_TRUE(gpu_->begin_capture().ok());
    gpu_->linear({dx.tensor, g.targets});
    auto graph = gpu_->end_capture();
    ASSERT_TRUE(graph.ok()) << graph.error().message;
    expect_rerun_equal(g, [&] { gpu_->replay(**graph); }, concurrent, "replayed, ");
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaConcurrentTargetsTest,
                         ::testing::Values(GroupCase{64, 4096, {14336, 14336}, false, DType::BF16},
                                           GroupCase{32, 896, {128, 32, 32}, true, DType::BF16},
                                           GroupCase{3, 200, {301, 77, 5}, true, DType::F32},
                                           GroupCase{128, 512, {1000, 24}, false, DType::BF16}),
                         case_name);

class CudaStackedLinearTest : public CudaTest, public ::testing::WithParamInterface<GroupCase> {
  protected:
    // No kernel and no timing: the stack wherever it fits a 1 MiB scratch, else per target.
    CudaBackendOptions options() const override {
        CudaBackendOptions o;
        o.linear_paths.small_max_rows = 0;
        o.linear_paths.autotune = false;
        o.stacked_linear_scratch_bytes = std::size_t{1} << 20;
        return o;
    }
};

TEST_P(CudaStackedLinearTest, MatchesCpu) {
    const GroupCase c = GetParam();
    std::vector<float> x = random_bf16(c.n * c.in, rng_);
    std::vector<std::vector<float>> w, b;
    std::vector<Tensor> w_host, b_host;
    for (std::int64_t out : c.outs) {
        w.push_back(random_bf16(out * c.in, rng_, 0.05f));
        b.push_back(random_bf16(out, rng_));
    }
    for (std::size_t i = 0; i < c.outs.size(); ++i) {
        w_host.push_back(host_view(w[i], {c.outs[i], c.in}));
        b_host.push_back(host_view(b[i], {c.outs[i]}));
    }
    auto weights = model::upload_stacked(*gpu_, w_host);
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    ASSERT_EQ(weights->storage.size(), 1u);
    model::StackedWeight biases;
    if (c.bias) {
        auto uploaded = model::upload_stacked(*gpu_, b_host);
        ASSERT_TRUE(uploaded.ok()) << uploaded.error().message;
        biases = std::move(*uploaded);
    }
    std::vector<DeviceTensor> ys;
    std::vector<tensor::LinearTarget> targets;
    for (std::size_t i = 0; i < c.outs.size(); ++i) {
        ys.push_back(device_empty(*gpu_, c.y_dtype, {c.n, c.outs[i]}));
        poison(*gpu_, ys.back().tensor);
        targets.push_back({weights->parts[i], c.bias ? biases.parts[i] : Tensor(),
                           ys.back().tensor});
    }
    DeviceTensor dx = device_from(*gpu_, x, DType::BF16, {c.n, c.in});
    gpu_->linear({dx.tensor, targets});
    for (std::size_t i = 0; i < c.outs.size(); ++i) {
        std::vector<float> ref(c.n * c.outs[i]);
        cpu_.linear(host_view(x, {c.n, c.in}), w_host[i], c.bias ? b_host[i] : Tensor(),
                    host_view(ref, {c.n, c.outs[i]}));
        EXPECT_LT(rel_error(download(*gpu_, ys[i].tensor), ref),
                  c.y_dtype == DType::F32 ? 1e-3 : kBf16Tolerance)
            << "target " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaStackedLinearTest,
    ::testing::Values(GroupCase{1, 4096, {512, 128, 128}, false, DType::BF16},
                      GroupCase{64, 1024, {1024, 256, 256}, false, DType::BF16},
                      GroupCase{100, 896, {128, 32, 32}, true, DType::BF16},  // Qwen-like
                      GroupCase{37, 512, {512, 128, 128}, true, DType::F32},
                      // 256 x 6144 x 2 bytes is over the scratch: one GEMM per target
                      GroupCase{256, 256, {4096, 1024, 1024}, true, DType::BF16},
                      // 200-byte rows cannot be split in 16-byte words: one GEMM per target
                      GroupCase{5, 256, {100, 28}, true, DType::BF16}),
    case_name);

}  // namespace
}  // namespace inferscale::cuda_test
