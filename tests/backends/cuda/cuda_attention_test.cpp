// CUDA paged attention against the CPU backend: ragged batches mixing prefill chunks (some
// starting mid-sequence) and decode rows, page tables that are shuffled and non-contiguous,
// stale random data past each sequence's end, head dims with and without a tensor-core
// prefill kernel, narrow and wide prefill tiles, long contexts for the split-KV decode path,
// graph capture, a rope with attention against the ops it fuses, and a linear's RopeAttention
// epilogue (q/k/v read from the stacked projection's output) against a plain linear and a rope.

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cuda_test_util.h"
#include "model/stacked_weight.h"
#include "tensor/views.h"

namespace inferscale::cuda_test {
namespace {

struct Seq {
    int q_len;
    int kv_len;
};

struct AttnCase {
    const char* name;
    int heads, kv_heads, head_dim, block_size;
    std::vector<Seq> seqs;
    int window = 0;  // sliding-window attention (PagedAttentionArgs::window)
};

// Host and device copies of one attention problem.
struct Problem {
    std::int64_t n = 0, blocks = 0;
    std::vector<float> q, k_pages, v_pages;
    std::vector<std::int32_t> qo_indptr{0}, indptr{0}, indices, last_page_len;
    DeviceTensor dq, dk, dv, dqo, dind, dindices, dlast, dout;
};

Problem make_problem(CudaBackend& gpu, const AttnCase& c, std::mt19937& rng) {
    Problem p;
    std::int64_t pages_needed = 0;
    for (const Seq& s : c.seqs) {
        p.n += s.q_len;
        pages_needed += (s.kv_len + c.block_size - 1) / c.block_size;
    }
    p.blocks = pages_needed + 7;  // spare blocks no sequence owns
    std::vector<std::int32_t> order(p.blocks);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);  // pages out of order, not contiguous
    std::size_t next = 0;
    for (const Seq& s : c.seqs) {
        const int pages = (s.kv_len + c.block_size - 1) / c.block_size;
        for (int i = 0; i < pages; ++i) p.indices.push_back(order[next++]);
        p.qo_indptr.push_back(p.qo_indptr.back() + s.q_len);
        p.indptr.push_back(static_cast<std::int32_t>(p.indices.size()));
        p.last_page_len.push_back(s.kv_len - (pages - 1) * c.block_size);
    }
    const std::int64_t page_elems = p.blocks * c.block_size * c.kv_heads * c.head_dim;
    // Every slot holds random data, so reading past a sequence's end would show.
    p.k_pages = random_bf16(page_elems, rng);
    p.v_pages = random_bf16(page_elems, rng);
    p.q = random_bf16(p.n * c.heads * c.head_dim, rng);
    const std::int64_t bs = c.block_size, kvh = c.kv_heads, d = c.head_dim;
    p.dq = device_from(gpu, p.q, DType::BF16, {p.n, c.heads, d});
    p.dk = device_from(gpu, p.k_pages, DType::BF16, {p.blocks, bs, kvh, d});
    p.dv = device_from(gpu, p.v_pages, DType::BF16, {p.blocks, bs, kvh, d});
    p.dqo = device_ints(gpu, p.qo_indptr);
    p.dind = device_ints(gpu, p.indptr);
    p.dindices = device_ints(gpu, p.indices);
    p.dlast = device_ints(gpu, p.last_page_len);
    p.dout = device_empty(gpu, DType::BF16, {p.n, c.heads, d});
    return p;
}

tensor::PagedAttentionArgs device_args(const Problem& p, int num_seqs, float scale,
                                       int window = 0) {
    tensor::PagedAttentionArgs a;
    a.window = window;
    a.qo_indptr = p.dqo.tensor;
    a.indptr = p.dind.tensor;
    a.indices = p.dindices.tensor;
    a.last_page_len = p.dlast.tensor;
    a.host_qo_indptr = p.qo_indptr.data();
    a.host_indptr = p.indptr.data();
    a.num_seqs = num_seqs;
    a.scale = scale;
    return a;
}

std::vector<float> cpu_reference(CpuBackend& cpu, Problem& p, const AttnCase& c, float scale) {
    const std::int64_t bs = c.block_size, kvh = c.kv_heads, d = c.head_dim;
    const auto s = static_cast<std::int64_t>(c.seqs.size());
    std::vector<float> out(p.n * c.heads * d);
    tensor::PagedAttentionArgs a;
    a.qo_indptr = host_view(p.qo_indptr, {s + 1});
    a.indptr = host_view(p.indptr, {s + 1});
    a.indices = host_view(p.indices, {static_cast<std::int64_t>(p.indices.size())});
    a.last_page_len = host_view(p.last_page_len, {s});
    a.host_qo_indptr = p.qo_indptr.data();
    a.host_indptr = p.indptr.data();
    a.num_seqs = static_cast<int>(s);
    a.scale = scale;
    a.window = c.window;
    cpu.paged_attention(host_view(p.q, {p.n, c.heads, d}),
                        {host_view(p.k_pages, {p.blocks, bs, kvh, d}),
                         host_view(p.v_pages, {p.blocks, bs, kvh, d})},
                        a, host_view(out, {p.n, c.heads, d}));
    return out;
}

// Worst relative error over the batch rows, so one wrong sequence cannot hide in the total.
double worst_row_error(const std::vector<float>& out, const std::vector<float>& ref,
                       std::int64_t n, std::int64_t row) {
    double worst = 0.0;
    for (std::int64_t t = 0; t < n; ++t) {
        std::vector<float> a(out.begin() + t * row, out.begin() + (t + 1) * row);
        std::vector<float> b(ref.begin() + t * row, ref.begin() + (t + 1) * row);
        worst = std::max(worst, rel_error(a, b));
    }
    return worst;
}

void run_case(CudaBackend& gpu, CpuBackend& cpu, const AttnCase& c, std::mt19937& rng) {
    Problem p = make_problem(gpu, c, rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    poison(gpu, p.dout.tensor);
    gpu.paged_attention(p.dq.tensor, {p.dk.tensor, p.dv.tensor},
                        device_args(p, static_cast<int>(c.seqs.size()), scale, c.window),
                        p.dout.tensor);
    const std::vector<float> got = download(gpu, p.dout.tensor);
    const std::vector<float> ref = cpu_reference(cpu, p, c, scale);
    EXPECT_LT(rel_error(got, ref), kBf16Tolerance) << c.name;
    EXPECT_LT(worst_row_error(got, ref, p.n, std::int64_t{c.heads} * c.head_dim),
              2 * kBf16Tolerance)
        << c.name;
}

// paged_attention captured into a CUDA graph and replayed writes `eager` (its eager output).
void expect_graph_replay_matches(CudaBackend& gpu, Problem& p,
                                 const tensor::PagedAttentionArgs& args,
                                 const std::vector<float>& eager) {
    poison(gpu, p.dout.tensor);
    ASSERT_TRUE(gpu.begin_capture().ok());
    gpu.paged_attention(p.dq.tensor, {p.dk.tensor, p.dv.tensor}, args, p.dout.tensor);
    auto graph = gpu.end_capture();
    ASSERT_TRUE(graph.ok()) << graph.error().message;
    gpu.replay(**graph);
    EXPECT_EQ(download(gpu, p.dout.tensor), eager);
}

// A mix of every row kind: a whole prompt, a chunk starting mid-sequence, decode rows with
// full and partial last pages, a two-row sequence, and a chunk longer than one query tile.
std::vector<Seq> ragged_mix() {
    return {{37, 37}, {1, 300}, {64, 200}, {1, 17}, {130, 1000}, {1, 16}, {2, 50}, {1, 1}};
}

// Decode rows take the tensor-core kernel whatever the batch (as by default; the CUDA-core
// kernels: CudaAttentionCudaCoreDecodeTest), on warp items (the other schedule:
// CudaAttentionCtaItemsTest).
CudaBackendOptions tensor_core_decode() {
    CudaBackendOptions o;
    o.decode.tensor_core_min_pairs = 1;
    o.decode.schedule = backends::cuda::DecodeSchedule::WarpItems;
    return o;
}

class CudaAttentionTest : public CudaTest, public ::testing::WithParamInterface<AttnCase> {
  protected:
    CudaBackendOptions options() const override { return tensor_core_decode(); }
};

TEST_P(CudaAttentionTest, MatchesCpu) { run_case(*gpu_, cpu_, GetParam(), rng_); }

INSTANTIATE_TEST_SUITE_P(
    Cases, CudaAttentionTest,
    ::testing::Values(
        AttnCase{"prefill_only_d128", 8, 2, 128, 16, {{100, 100}}},
        AttnCase{"ragged_d128_gqa4", 8, 2, 128, 16, ragged_mix()},
        AttnCase{"ragged_d64_mha", 4, 4, 64, 16, ragged_mix()},
        AttnCase{"ragged_d256_gqa2", 4, 2, 256, 16, ragged_mix()},
        AttnCase{"ragged_d128_gqa8_bs8", 16, 2, 128, 8, ragged_mix()},
        AttnCase{"ragged_d64_gqa7_bs32", 14, 2, 64, 32, ragged_mix()},
        // Prompts without history whose KV fits one 32-token tile (the narrow prefill tile).
        AttnCase{"short_prompts_d128_gqa4", 8, 2, 128, 16, {{32, 32}, {1, 300}, {17, 17}, {2, 2}}},
        AttnCase{"short_prompts_d64_gqa7_bs32", 14, 2, 64, 32, {{20, 20}, {1, 40}, {32, 32}}},
        AttnCase{"decode_only_many", 8, 8, 128, 16,
                 {{1, 5}, {1, 33}, {1, 64}, {1, 65}, {1, 129}, {1, 700}, {1, 2}, {1, 31}}},
        AttnCase{"long_decode_4k_split", 32, 8, 128, 16,
                 {{1, 4096}, {1, 4000}, {1, 1234}, {1, 3}, {50, 4096}}},
        AttnCase{"fallback_d16", 4, 2, 16, 16, ragged_mix()},
        AttnCase{"fallback_d96", 6, 3, 96, 16, ragged_mix()},
        AttnCase{"fallback_d80_long", 4, 1, 80, 16, {{1, 2100}, {40, 600}}},
        // Decode kernel edge cases: a group rounded up (3 -> 4), a non-power-of-two block size,
        // head_dim 256 with group 8, and group 16 (the generic kernel), all with long splits.
        AttnCase{"decode_gqa3_d64_bs32", 6, 2, 64, 32, {{1, 3000}, {1, 1}, {1, 64}, {1, 65}}},
        AttnCase{"decode_d256_gqa8_bs24", 16, 2, 256, 24, {{1, 1000}, {1, 7}, {1, 2500}, {1, 129}}},
        AttnCase{"decode_gqa16_generic", 32, 2, 128, 16, {{1, 2000}, {1, 33}, {5, 40}}},
        // Short chunks mid-sequence over a long KV: the prefill kernel splits the KV and merges
        // (few query tiles x heads). Chunks end mid-page, span tiles, and share the workspace
        // with split decode rows.
        AttnCase{"split_prefill_gqa4_bs16", 32, 8, 128, 16, {{40, 1325}}},
        AttnCase{"split_prefill_gqa8_bs32", 32, 4, 128, 32, {{40, 4096}, {17, 1000}}},
        AttnCase{"split_prefill_gqa4_ragged", 32, 8, 128, 16,
                 {{40, 1200}, {1, 3000}, {70, 2049}, {1, 50}, {2, 1031}, {3, 3}}},
        AttnCase{"split_prefill_d64_gqa8_bs32", 16, 2, 64, 32, {{100, 3000}, {5, 4000}}},
        AttnCase{"split_prefill_d256_gqa4_bs16", 16, 4, 256, 16, {{33, 2500}, {129, 1100}}},
        // Sliding windows (Gemma 3: d 256, 4 heads on 1 kv head): the prefill kernel's lower
        // mask, splits and tiles wholly before a window, decode splits left empty by it.
        AttnCase{"window_ragged_d256_gqa4", 4, 1, 256, 16, ragged_mix(), 64},
        AttnCase{"window_ragged_d128_gqa4", 8, 2, 128, 16, ragged_mix(), 100},
        AttnCase{"window_split_prefill_d256", 16, 4, 256, 16, {{33, 2500}, {129, 1100}}, 512},
        AttnCase{"window_split_prefill_d128", 32, 8, 128, 16, {{40, 1325}, {1, 3000}}, 200},
        AttnCase{"window_decode_gqa16_generic", 32, 2, 128, 16, {{1, 2000}, {1, 33}, {5, 40}}, 48},
        AttnCase{"window_fallback_d96", 6, 3, 96, 16, ragged_mix(), 50}),
    [](const ::testing::TestParamInfo<AttnCase>& info) { return std::string(info.param.name); });

// The CUDA-core decode kernels, which head_dim 64/128 leave to the tensor-core kernel by
// default, on the same problems.
class CudaAttentionCudaCoreDecodeTest : public CudaTest {
  protected:
    CudaBackendOptions options() const override {
        CudaBackendOptions o;
        o.decode.tensor_cores = false;
        return o;
    }
};

TEST_F(CudaAttentionCudaCoreDecodeTest, MatchesCpu) {
    for (const AttnCase& c :
         {AttnCase{"cc_ragged_d128_gqa4", 8, 2, 128, 16, ragged_mix()},
          AttnCase{"cc_ragged_d64_gqa7_bs32", 14, 2, 64, 32, ragged_mix()},
          AttnCase{"cc_long_decode_4k_split", 32, 8, 128, 16,
                   {{1, 4096}, {1, 4000}, {1, 1234}, {1, 3}, {50, 4096}}},
          AttnCase{"cc_window_long_decode", 32, 8, 128, 16,
                   {{1, 4096}, {1, 4000}, {1, 1234}, {1, 3}, {50, 4096}}, 512}}) {
        run_case(*gpu_, cpu_, c, rng_);
    }
}

// Many decode rows of mixed lengths at the Llama-3.1-8B head shape: the tensor-core kernel's
// persistent CTAs walk several (split, sequence, kv head) items each, some past a shorter
// sequence's end.
TEST_F(CudaAttentionCudaCoreDecodeTest, ManyRowsBothKernelsAgree) {
    std::vector<Seq> seqs;
    std::uniform_int_distribution<int> len(1, 800);
    for (int i = 0; i < 160; ++i) seqs.push_back({1, len(rng_)});
    run_case(*gpu_, cpu_, AttnCase{"many_rows_cuda_cores", 32, 8, 128, 16, seqs}, rng_);
}

class CudaAttentionManyRowsTest : public CudaTest {};

TEST_F(CudaAttentionManyRowsTest, TensorCoreKernel) {
    std::vector<Seq> seqs;
    std::uniform_int_distribution<int> len(1, 800);
    for (int i = 0; i < 160; ++i) seqs.push_back({1, len(rng_)});
    run_case(*gpu_, cpu_, AttnCase{"many_rows_tc", 32, 8, 128, 16, seqs}, rng_);
}

// The schedule picked per step shape (DecodeSchedule::Auto): on an H200 64 decode rows of 8 kv
// heads at ~1K tokens run CTA items unsplit, 128 rows warp items.
class CudaAttentionAutoScheduleTest : public CudaTest {
  protected:
    CudaBackendOptions options() const override {
        CudaBackendOptions o;
        o.decode.tensor_core_min_pairs = 1;
        return o;
    }
};

TEST_F(CudaAttentionAutoScheduleTest, MatchesCpu) {
    std::uniform_int_distribution<int> len(900, 1100);
    for (const int rows : {64, 128}) {
        std::vector<Seq> seqs;
        for (int i = 0; i < rows; ++i) seqs.push_back({1, len(rng_)});
        run_case(*gpu_, cpu_, AttnCase{rows == 64 ? "auto_64" : "auto_128", 32, 8, 128, 16, seqs},
                 rng_);
    }
}

// The tensor-core kernel's other schedule (a CTA's warps share each item) on the ragged,
// grouped, long and many-row problems.
class CudaAttentionCtaItemsTest : public CudaTest {
  protected:
    CudaBackendOptions options() const override {
        CudaBackendOptions o = tensor_core_decode();
        o.decode.schedule = backends::cuda::DecodeSchedule::CtaItems;
        return o;
    }
};

TEST_F(CudaAttentionCtaItemsTest, MatchesCpu) {
    std::vector<Seq> many;
    std::uniform_int_distribution<int> len(1, 800);
    for (int i = 0; i < 160; ++i) many.push_back({1, len(rng_)});
    for (const AttnCase& c :
         {AttnCase{"cta_ragged_d128_gqa4", 8, 2, 128, 16, ragged_mix()},
          AttnCase{"cta_ragged_d128_gqa8_bs8", 16, 2, 128, 8, ragged_mix()},
          AttnCase{"cta_decode_gqa16", 32, 2, 128, 16, {{1, 2000}, {1, 33}, {5, 40}}},
          AttnCase{"cta_long_decode_4k_split", 32, 8, 128, 16,
                   {{1, 4096}, {1, 4000}, {1, 1234}, {1, 3}, {50, 4096}}},
          AttnCase{"cta_many_rows", 32, 8, 128, 16, many}}) {
        run_case(*gpu_, cpu_, c, rng_);
    }
}

// A small workspace forces fewer splits than the heuristic wants; results must not change.
class CudaAttentionSmallWorkspaceTest : public CudaTest {
  protected:
    CudaBackendOptions options() const override {
        CudaBackendOptions o = tensor_core_decode();
        o.attention_workspace_bytes = 3 * 4 * 32 * (128 + 2) * 4;  // 3 splits of 4 seqs
        return o;
    }
};

TEST_F(CudaAttentionSmallWorkspaceTest, LongDecodeWithFewSplits) {
    run_case(*gpu_, cpu_,
             AttnCase{"few_splits", 32, 8, 128, 16, {{1, 4096}, {1, 777}, {1, 4095}, {7, 3000}}},
             rng_);
}

// The attention launches (prefill + split decode + merge) captured into a CUDA graph and
// replayed give the eager result: no host sync or allocation hides inside the ops.
TEST_F(CudaAttentionSmallWorkspaceTest, CapturesInCudaGraph) {
    const AttnCase c{"graph", 8, 2, 128, 16, {{1, 3000}, {33, 80}, {1, 10}}};
    Problem p = make_problem(*gpu_, c, rng_);
    const float scale = 1.0f / std::sqrt(128.0f);
    const auto args = device_args(p, 3, scale);
    gpu_->paged_attention(p.dq.tensor, {p.dk.tensor, p.dv.tensor}, args, p.dout.tensor);
    const std::vector<float> eager = download(*gpu_, p.dout.tensor);
    expect_graph_replay_matches(*gpu_, p, args, eager);
}

// Replayable decode: the launch is sized from fixed_max_kv_len alone (no host metadata), so
// splits past a shorter sequence's end must merge as empty.
TEST_F(CudaAttentionSmallWorkspaceTest, FixedMaxKvLenBound) {
    for (const int bound : {4096, 300}) {
        const AttnCase c{"fixed", 32, 8, 128, 16, {{1, 257}, {1, 3}, {1, 300}, {1, 64}}};
        Problem p = make_problem(*gpu_, c, rng_);
        const float scale = 1.0f / std::sqrt(128.0f);
        auto args = device_args(p, 4, scale);
        args.host_qo_indptr = nullptr;
        args.host_indptr = nullptr;
        args.fixed_max_kv_len = bound;
        poison(*gpu_, p.dout.tensor);
        gpu_->paged_attention(p.dq.tensor, {p.dk.tensor, p.dv.tensor}, args, p.dout.tensor);
        const std::vector<float> got = download(*gpu_, p.dout.tensor);
        const std::vector<float> ref = cpu_reference(cpu_, p, c, scale);
        EXPECT_LT(worst_row_error(got, ref, p.n, 32 * 128), 2 * kBf16Tolerance) << bound;
    }
}

// Every prefill chunk on wide tiles (two 16-row fragments a warp), whatever the block count:
// ragged mixes, chunks mid-sequence, GQA groups up to 8, and the split-KV path.
class CudaAttentionWidePrefillTest : public CudaTest {
  protected:
    CudaBackendOptions options() const override {
        CudaBackendOptions o = tensor_core_decode();
        o.prefill.wide_min_blocks_per_sm = 0;
        return o;
    }
};

TEST_F(CudaAttentionWidePrefillTest, MatchesCpu) {
    for (const AttnCase& c :
         {AttnCase{"wide_prefill_only_d128", 8, 2, 128, 16, {{300, 300}}},
          AttnCase{"wide_ragged_d128_gqa4", 8, 2, 128, 16, ragged_mix()},
          AttnCase{"wide_ragged_d64_mha", 4, 4, 64, 16, ragged_mix()},
          AttnCase{"wide_ragged_d128_gqa8_bs8", 16, 2, 128, 8, ragged_mix()},
          AttnCase{"wide_ragged_d64_gqa7_bs32", 14, 2, 64, 32, ragged_mix()},
          AttnCase{"wide_d256_stays_narrow", 4, 2, 256, 16, ragged_mix()},
          AttnCase{"wide_split_gqa4_ragged", 32, 8, 128, 16,
                   {{40, 1200}, {1, 3000}, {70, 2049}, {1, 50}, {2, 1031}, {3, 3}}},
          AttnCase{"wide_long_chunk", 32, 8, 128, 16, {{1000, 1500}, {257, 257}}}}) {
        run_case(*gpu_, cpu_, c, rng_);
    }
}

// Split prefill (with its merge) and split decode captured together replay the eager result.
class CudaAttentionSplitPrefillTest : public CudaTest {
  protected:
    CudaBackendOptions options() const override { return tensor_core_decode(); }
};

TEST_F(CudaAttentionSplitPrefillTest, CapturesInCudaGraph) {
    const AttnCase c{"graph_split", 32, 8, 128, 16, {{40, 2000}, {1, 3000}, {9, 700}}};
    Problem p = make_problem(*gpu_, c, rng_);
    const float scale = 1.0f / std::sqrt(128.0f);
    const auto args = device_args(p, 3, scale);
    gpu_->paged_attention(p.dq.tensor, {p.dk.tensor, p.dv.tensor}, args, p.dout.tensor);
    const std::vector<float> eager = download(*gpu_, p.dout.tensor);
    const std::vector<float> ref = cpu_reference(cpu_, p, c, scale);
    EXPECT_LT(worst_row_error(eager, ref, p.n, 32 * 128), 2 * kBf16Tolerance);
    expect_graph_replay_matches(*gpu_, p, args, eager);
}

class CudaAttentionFixedBoundTest : public CudaTest {
  protected:
    CudaBackendOptions options() const override { return tensor_core_decode(); }
};

TEST_F(CudaAttentionFixedBoundTest, ManySplitsFromBound) {
    const AttnCase c{"fixed_many", 8, 2, 128, 16, {{1, 5}, {1, 1500}, {1, 16}}};
    Problem p = make_problem(*gpu_, c, rng_);
    const float scale = 1.0f / std::sqrt(128.0f);
    auto args = device_args(p, 3, scale);
    args.host_qo_indptr = nullptr;
    args.host_indptr = nullptr;
    args.fixed_max_kv_len = 8192;
    poison(*gpu_, p.dout.tensor);
    gpu_->paged_attention(p.dq.tensor, {p.dk.tensor, p.dv.tensor}, args, p.dout.tensor);
    const std::vector<float> got = download(*gpu_, p.dout.tensor);
    const std::vector<float> ref = cpu_reference(cpu_, p, c, scale);
    EXPECT_LT(worst_row_error(got, ref, p.n, 8 * 128), 2 * kBf16Tolerance);
}

// A rope with attention against its definition, the rope with the KV write then
// paged_attention, from the same
// unrotated projections: decode batches that the fast kernel takes in one launch (one long
// split sequence, mixed lengths with a padding row, head_dim 64 and 256, a group rounded up),
// and batches that compose (a prefill row; the tensor-core decode kernel). Output and pages
// must be bit-identical, a second fused launch must repeat the first (the split arrival counts
// start from zero again), and the fused launch must leave q unrotated where the composed ops
// rotate it in place.
struct RopeCase {
    AttnCase attn;
    bool fused;
    int padding = -1;  // a sequence whose row writes nothing (slot -1), or none
};

// The rope operands of problem p: unrotated q and new K/V rows, positions (KV index
// plus 3), slots of each row's KV token, and HF rotary tables.
struct RopeOperands {
    std::vector<float> k, v, cos, sin;
    std::vector<std::int32_t> positions, slots;
    std::int64_t max_positions = 0;
};

RopeOperands rope_operands(const Problem& p, const RopeCase& rc, std::mt19937& rng) {
    const AttnCase& c = rc.attn;
    RopeOperands r;
    r.k = random_bf16(p.n * c.kv_heads * c.head_dim, rng);
    r.v = random_bf16(p.n * c.kv_heads * c.head_dim, rng);
    int max_kv = 0;
    for (std::size_t s = 0; s < c.seqs.size(); ++s) {
        const Seq& seq = c.seqs[s];
        max_kv = std::max(max_kv, seq.kv_len);
        const bool pad = static_cast<int>(s) == rc.padding;
        for (int j = seq.kv_len - seq.q_len; j < seq.kv_len; ++j) {
            const std::int32_t page = p.indices[p.indptr[s] + j / c.block_size];
            r.slots.push_back(pad ? -1 : page * c.block_size + j % c.block_size);
            r.positions.push_back(j + 3);
        }
    }
    const int half = c.head_dim / 2;
    r.max_positions = max_kv + 3;
    for (std::int64_t pos = 0; pos < r.max_positions; ++pos) {
        for (int i = 0; i < half; ++i) {
            const double angle = pos * std::pow(10000.0, -2.0 * i / c.head_dim);
            r.cos.push_back(static_cast<float>(std::cos(angle)));
            r.sin.push_back(static_cast<float>(std::sin(angle)));
        }
    }
    return r;
}

struct RopeResult {
    std::vector<float> out, k_pages, v_pages, q;
};

RopeResult run_rope_attention(CudaBackend& gpu, const Problem& p, const RopeCase& rc,
                              const RopeOperands& r, bool composed) {
    const AttnCase& c = rc.attn;
    const std::int64_t n = p.n, kvh = c.kv_heads, d = c.head_dim, bs = c.block_size;
    DeviceTensor q = device_from(gpu, p.q, DType::BF16, {n, c.heads, d});
    DeviceTensor k = device_from(gpu, r.k, DType::BF16, {n, kvh, d});
    DeviceTensor v = device_from(gpu, r.v, DType::BF16, {n, kvh, d});
    DeviceTensor kp = device_from(gpu, p.k_pages, DType::BF16, {p.blocks, bs, kvh, d});
    DeviceTensor vp = device_from(gpu, p.v_pages, DType::BF16, {p.blocks, bs, kvh, d});
    DeviceTensor cos = device_from(gpu, r.cos, DType::F32, {r.max_positions, d / 2});
    DeviceTensor sin = device_from(gpu, r.sin, DType::F32, {r.max_positions, d / 2});
    DeviceTensor positions = device_ints(gpu, r.positions);
    DeviceTensor slots = device_ints(gpu, r.slots);
    const tensor::RopeTables tables{cos.tensor, sin.tensor};
    const tensor::KvPages pages{kp.tensor, vp.tensor};
    const auto args = device_args(p, static_cast<int>(c.seqs.size()),
                                  1.0f / std::sqrt(static_cast<float>(d)));
    poison(gpu, p.dout.tensor);
    const tensor::RopeArgs rope{q.tensor, k.tensor, positions.tensor,
                                tables,   v.tensor, slots.tensor,
                                pages,    &args,    p.dout.tensor};
    if (composed) {
        gpu.rope({q.tensor, k.tensor, positions.tensor, tables, v.tensor, slots.tensor, pages});
        gpu.paged_attention(q.tensor, pages, args, p.dout.tensor);
    } else {
        gpu.rope(rope);
    }
    return {download(gpu, p.dout.tensor), download(gpu, kp.tensor), download(gpu, vp.tensor),
            download(gpu, q.tensor)};
}

void check_rope_attention(CudaBackend& gpu, CpuBackend& cpu, const RopeCase& rc,
                          std::mt19937& rng) {
    const AttnCase& c = rc.attn;
    Problem p = make_problem(gpu, c, rng);
    const RopeOperands r = rope_operands(p, rc, rng);
    const RopeResult want = run_rope_attention(gpu, p, rc, r, true);
    for (int launch = 0; launch < 2; ++launch) {
        const RopeResult got = run_rope_attention(gpu, p, rc, r, false);
        EXPECT_EQ(got.out, want.out) << c.name << " launch " << launch;
        EXPECT_EQ(got.k_pages, want.k_pages) << c.name << " launch " << launch;
        EXPECT_EQ(got.v_pages, want.v_pages) << c.name << " launch " << launch;
        EXPECT_EQ(got.q == p.q, rc.fused) << c.name << ": q rotated in place iff composed";
    }
    EXPECT_NE(want.k_pages, p.k_pages) << c.name << ": the new tokens were written";
    // The composed result itself against the CPU on what it attended to.
    p.q = want.q;
    p.k_pages = want.k_pages;
    p.v_pages = want.v_pages;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    EXPECT_LT(worst_row_error(want.out, cpu_reference(cpu, p, c, scale), p.n,
                              std::int64_t{c.heads} * c.head_dim),
              2 * kBf16Tolerance)
        << c.name;
}

class CudaRopeAttentionTest : public CudaTest {
  protected:
    CudaBackendOptions options() const override {
        CudaBackendOptions o;
        o.decode.tensor_core_min_pairs = 0;  // the SM count: these batches on the fast kernel
        return o;
    }
};

TEST_F(CudaRopeAttentionTest, FusedDecodeMatchesComposedOps) {
    const RopeCase cases[] = {
        {{"b1_long_split", 32, 8, 128, 16, {{1, 1100}}}, true},
        {{"mixed_with_padding", 32, 8, 128, 16, {{1, 700}, {1, 1}, {1, 65}, {1, 64}, {1, 3000}}},
         true,
         1},
        {{"d64_gqa8_bs32", 16, 2, 64, 32, {{1, 2000}, {1, 33}}}, true},
        {{"d256_gqa2", 4, 2, 256, 16, {{1, 1500}, {1, 9}}}, true},
        {{"gqa3_rounded_up", 6, 2, 64, 16, {{1, 500}, {1, 17}}}, true},
        {{"prefill_row_composes", 32, 8, 128, 16, {{1, 900}, {20, 300}}}, false},
        {{"generic_kernel_composes", 32, 2, 128, 16, {{1, 900}}}, false}};
    for (const RopeCase& rc : cases) check_rope_attention(*gpu_, cpu_, rc, rng_);
}

TEST_F(CudaRopeAttentionTest, TensorCoreDecodeComposes) {
    backends::cuda::DecodeAttentionOptions o;
    o.tensor_core_min_pairs = 1;
    gpu_->set_decode_options(o);
    check_rope_attention(
        *gpu_, cpu_, RopeCase{{"tensor_cores", 32, 8, 128, 16, {{1, 900}, {1, 50}}}, false},
        rng_);
}

// The RopeAttention epilogue on q/k/v weights stacked in memory (as the model uploads them):
// the stacked GEMM's output read straight by the rotation and KV write, against a plain linear
// (the same GEMM, then its columns split) and a rope with attention, bit for bit in out and
// the pages. The
// fused path leaves the k and v targets unwritten, which shows it ran.
struct LinearRopeCase {
    AttnCase attn;
    bool bias;
};

class CudaLinearRopeAttentionTest : public CudaTest {
  protected:
    CudaBackendOptions options() const override {
        CudaBackendOptions o;
        o.linear_paths.small_max_rows = 0;  // the stack wherever q/k/v adjoin
        o.linear_paths.autotune = false;
        o.decode.tensor_core_min_pairs = 1;  // decode rows off the fast kernel, which composes
        return o;
    }

    struct Outcome {
        std::vector<float> out, k_pages, v_pages, k_target;
    };

    Outcome run(const LinearRopeCase& lc, const Problem& p, const RopeOperands& r,
                const std::vector<float>& x, const model::StackedWeight& w,
                const model::StackedWeight& b, bool fused) {
        const AttnCase& c = lc.attn;
        const std::int64_t n = p.n, d = c.head_dim, kvh = c.kv_heads, bs = c.block_size;
        const std::int64_t widths[] = {c.heads * d, kvh * d, kvh * d};
        const std::int64_t heads[] = {c.heads, kvh, kvh};
        DeviceTensor dx = device_from(*gpu_, x, DType::BF16, {n, kHidden});
        std::vector<DeviceTensor> ys;
        std::vector<tensor::LinearTarget> qkv;
        for (int i = 0; i < 3; ++i) {
            ys.push_back(device_empty(*gpu_, DType::BF16, {n, widths[i]}));
            poison(*gpu_, ys.back().tensor);
            qkv.push_back({w.parts[i], lc.bias ? b.parts[i] : Tensor(), ys.back().tensor});
        }
        DeviceTensor kp = device_from(*gpu_, p.k_pages, DType::BF16, {p.blocks, bs, kvh, d});
        DeviceTensor vp = device_from(*gpu_, p.v_pages, DType::BF16, {p.blocks, bs, kvh, d});
        DeviceTensor cos = device_from(*gpu_, r.cos, DType::F32, {r.max_positions, d / 2});
        DeviceTensor sin = device_from(*gpu_, r.sin, DType::F32, {r.max_positions, d / 2});
        DeviceTensor positions = device_ints(*gpu_, r.positions);
        DeviceTensor slots = device_ints(*gpu_, r.slots);
        const tensor::RopeTables tables{cos.tensor, sin.tensor};
        const tensor::KvPages pages{kp.tensor, vp.tensor};
        const auto args = device_args(p, static_cast<int>(c.seqs.size()),
                                      1.0f / std::sqrt(static_cast<float>(d)));
        const auto view = [&](int i) { return reshaped(ys[i].tensor, {n, heads[i], d}); };
        const tensor::RopeArgs rope{view(0), view(1), positions.tensor,
                                    tables,  view(2), slots.tensor,
                                    pages,   &args,   p.dout.tensor};
        poison(*gpu_, p.dout.tensor);
        if (fused) {
            gpu_->linear({dx.tensor, qkv, tensor::LinearEpilogue::RopeAttention, &rope});
        } else {
            gpu_->linear({dx.tensor, qkv});
            gpu_->rope(rope);
        }
        return {download(*gpu_, p.dout.tensor), download(*gpu_, kp.tensor),
                download(*gpu_, vp.tensor), download(*gpu_, ys[1].tensor)};
    }

    static constexpr std::int64_t kHidden = 256;
};

TEST_F(CudaLinearRopeAttentionTest, StackedOutputFeedsTheRotation) {
    const LinearRopeCase cases[] = {
        {{"decode_tc", 32, 8, 128, 16, {{1, 300}, {1, 65}, {1, 1000}}}, false},
        {{"prefill_and_decode", 32, 8, 128, 16, {{37, 37}, {1, 200}, {20, 300}}}, false},
        {{"qwen_like_bias", 28, 4, 128, 16, {{1, 100}, {9, 50}}}, true},
        {{"d64", 16, 2, 64, 32, {{1, 500}, {30, 30}}}, false}};
    for (const LinearRopeCase& lc : cases) {
        const AttnCase& c = lc.attn;
        Problem p = make_problem(*gpu_, c, rng_);
        const RopeOperands r = rope_operands(p, RopeCase{c, false}, rng_);
        const std::vector<float> x = random_bf16(p.n * kHidden, rng_);
        const std::int64_t d = c.head_dim;
        const std::int64_t rows[] = {c.heads * d, c.kv_heads * d, c.kv_heads * d};
        std::vector<std::vector<float>> w_host, b_host;
        std::vector<Tensor> w_views, b_views;
        for (std::int64_t out : rows) {
            w_host.push_back(random_bf16(out * kHidden, rng_, 0.05f));
            b_host.push_back(random_bf16(out, rng_));
        }
        for (int i = 0; i < 3; ++i) {
            w_views.push_back(host_view(w_host[i], {rows[i], kHidden}));
            b_views.push_back(host_view(b_host[i], {rows[i]}));
        }
        auto w = model::upload_stacked(*gpu_, w_views);
        ASSERT_TRUE(w.ok()) << w.error().message;
        auto b = model::upload_stacked(*gpu_, b_views);
        ASSERT_TRUE(b.ok()) << b.error().message;
        const Outcome want = run(lc, p, r, x, *w, *b, false);
        const Outcome got = run(lc, p, r, x, *w, *b, true);
        EXPECT_EQ(got.out, want.out) << c.name;
        EXPECT_EQ(got.k_pages, want.k_pages) << c.name;
        EXPECT_EQ(got.v_pages, want.v_pages) << c.name;
        EXPECT_NE(want.k_pages, p.k_pages) << c.name << ": the new tokens were written";
        std::size_t k_written = 0;
        for (float e : got.k_target) k_written += std::isnan(e) ? 0 : 1;
        EXPECT_EQ(k_written, 0u) << c.name << ": the fused path leaves the k target unwritten";
    }
}

}  // namespace
}  // namespace inferscale::cuda_test
