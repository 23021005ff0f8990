// CudaBackend::rope, write_kv and paged_attention, and the RopeAttention epilogue of
// CudaBackend::linear: checks, and the launch plan built from the host copies of the batch
// metadata (no device round trip).
//
// Plan: sequences with more than one query row (prefill chunks, which may start
// mid-sequence) go to the tensor-core prefill kernel, sequences with one row (decode) to the
// split-KV decode kernel; both kernels read the same device metadata and skip the other's
// sequences, so a ragged batch is two launches (up to four with the split merges). When the
// prefill kernel has no instantiation for head_dim, the decode kernel runs every row instead.
// Prefill and decode splits share the workspace: the prefill merge is ordered on the stream
// before the decode kernel writes its partials. Decode rows at head_dim 64/128 run the
// tensor-core kernel at every batch size (DecodeAttentionOptions::tensor_core_min_pairs); the
// others, and small batches when that option asks, run the fast kernel, which merges its own
// splits and, through a rope with attention, rotates and writes the new token itself: one
// launch a layer instead of three. Since the tensor-core kernel picks its schedule per step,
// its three launches beat that one at batch 1 on the H200. FP8 pages: prefill rows as bf16's,
// decode rows on the tensor-core kernel at every batch size (the fast kernel reads bf16 only),
// the generic one where that has no instantiation or a window applies.

#include <algorithm>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/decode_schedule.h"
#include "tensor/ops_checks.h"

namespace inferscale::backends::cuda {
namespace {

using tensor::DType;
using tensor::Tensor;

// Decode blocks wanted per SM before splitting stops paying. Measured on the H200 (batch 64,
// 1K context, 512 blocks): no split 100 us, 2 splits 106 us, 3 splits 109 us per call, so a
// batch that already fills the GPU is not split; batch 1 is split by length (16 x 64 tokens).
constexpr std::int64_t kBlocksPerSm = 2;
// Prefill: the tensor-core kernel fits two blocks per SM at head_dim 128 (80 KB of shared
// memory each, 96 KB on wide tiles), so (query tiles x kv heads) below 2 x SMs leaves SMs idle
// and the KV is split, at least one 64-token tile per split. A 43-token question over 1312
// injected tokens with 8 kv heads of 4 query heads (16 queries per narrow tile): 24 blocks
// unsplit, 11 splits of 128 tokens (264 blocks) split.
constexpr std::int64_t kPrefillBlocksPerSm = 2;
constexpr std::int64_t kMinPrefillSplitTokens = 64;

PagedKvView kv_view(const tensor::KvPages& pages) {
    const DType kv = pages.k.dtype == DType::F8_E4M3 ? DType::F8_E4M3 : DType::BF16;
    check_device(pages.k, kv, 4, "k pages");
    check_device(pages.v, kv, 4, "v pages");
    IS_CHECK(pages.k.shape == pages.v.shape) << "k and v pages differ in shape";
    PagedKvView view;
    if (kv == DType::F8_E4M3) {
        check_device(pages.k_scale, DType::F32, 1, "k scales");
        check_device(pages.v_scale, DType::F32, 1, "v scales");
        view.fp8 = true;
        view.k_scale = pages.k_scale.as<const float>();
        view.v_scale = pages.v_scale.as<const float>();
    }
    view.k = pages.k.data;
    view.v = pages.v.data;
    view.num_blocks = pages.k.shape[0];
    view.block_size = static_cast<int>(pages.k.shape[1]);
    view.kv_heads = static_cast<int>(pages.k.shape[2]);
    view.head_dim = static_cast<int>(pages.k.shape[3]);
    return view;
}

// write_kv's operands checked; the pages' view.
PagedKvView checked_write_kv(const Tensor& k, const Tensor& v, const Tensor& slots,
                             const tensor::KvPages& pages) {
    const PagedKvView view = kv_view(pages);
    check_activation(k, "write_kv k");
    tensor::check_write_kv_args(k, v, slots, pages, k.dtype, pages.k.dtype);
    check_on_device(k, "write_kv k");
    check_on_device(v, "write_kv v");
    check_on_device(slots, "write_kv slots");
    return view;
}

// Cuts a launch's KV into `splits` splits of whole tiles (rounding a split up to a tile may
// leave fewer) and points its partials, for `rows` batch or sequence rows, into `workspace`.
template <class Launch>
void cut_kv_splits(Launch& launch, std::int64_t splits, std::int64_t kv_tokens, std::int64_t tile,
                   std::int64_t rows, std::int64_t heads, std::int64_t d, void* workspace) {
    if (splits > 1) {
        const std::int64_t per_split = (kv_tokens + splits - 1) / splits;
        launch.split_tokens = static_cast<int>((per_split + tile - 1) / tile * tile);
        splits = (kv_tokens + launch.split_tokens - 1) / launch.split_tokens;
    }
    launch.num_splits = static_cast<int>(std::max<std::int64_t>(splits, 1));
    if (launch.num_splits > 1) {
        auto* ws = static_cast<float*>(workspace);
        launch.partial_o = ws;
        launch.partial_ml = ws + rows * heads * launch.num_splits * d;
    }
}

}  // namespace

void CudaBackend::write_kv(const Tensor& k, const Tensor& v, const Tensor& slots,
                           const tensor::KvPages& pages) {
    const PagedKvView view = checked_write_kv(k, v, slots, pages);
    activate();
    launch_write_kv(k.data, v.data, k.dtype, k.shape[0], slots.as<std::int32_t>(), view, stream_);
}

void CudaBackend::rope(const tensor::RopeArgs& args) {
    const Tensor &q = args.q, &k = args.k;
    check_rope(q, k, args.positions, args.tables.cos, args.tables.sin);
    if (args.pages.k.empty() && args.attention == nullptr) {
        activate();
        launch_rope(q.data, q.shape[1], k.data, k.empty() ? 0 : k.shape[1], q.dtype, q.shape[0],
                    q.shape[2], args.positions.as<std::int32_t>(), args.tables.cos.as<float>(),
                    args.tables.sin.as<float>(), args.tables.cos.shape[0], stream_);
        return;
    }
    const PagedKvView view = checked_write_kv(k, args.v, args.slots, args.pages);
    if (args.attention == nullptr) {
        activate();
        enqueue_rope_write_kv(args, view);
        return;
    }
    const AttentionPlan plan = plan_attention(q, args.pages, *args.attention, args.out);
    activate();
    enqueue_rope_attention(args, view, plan);
}

void CudaBackend::enqueue_rope_write_kv(const tensor::RopeArgs& args, const PagedKvView& view) {
    const Tensor &q = args.q, &k = args.k, &v = args.v;
    const auto* pos = args.positions.as<std::int32_t>();
    const auto* cos = args.tables.cos.as<float>();
    const auto* sin = args.tables.sin.as<float>();
    const std::int64_t n = q.shape[0], max_positions = args.tables.cos.shape[0];
    const auto* slot_ids = args.slots.as<std::int32_t>();
    const std::int64_t q_width = q.shape[1] * q.shape[2], kv_width = k.shape[1] * k.shape[2];
    const QkvRows in_place{q.data, k.data, v.data, q_width, kv_width, kv_width,
                           q.data, q_width, k.data, kv_width};
    if (q.dtype == DType::BF16 && launch_rope_write_kv(in_place, q.shape[1], n, pos, cos, sin,
                                                       max_positions, slot_ids, view, stream_)) {
        return;
    }
    launch_rope(q.data, q.shape[1], k.data, k.shape[1], q.dtype, n, q.shape[2], pos, cos, sin,
                max_positions, stream_);
    launch_write_kv(k.data, v.data, k.dtype, n, slot_ids, view, stream_);
}

void CudaBackend::enqueue_rope_attention(const tensor::RopeArgs& args, const PagedKvView& view,
                                         AttentionPlan plan) {
    const tensor::RopeTables& tables = args.tables;
    // Decode rows alone on the fast kernel take the rotation and the KV write in; anything
    // else runs them first.
    const bool fused = plan.fast_decode && !plan.prefill && args.q.dtype == DType::BF16 &&
                       aligned16(args.k.data) && aligned16(args.v.data) &&
                       aligned16(tables.cos.data) && aligned16(tables.sin.data);
    if (fused) {
        DecodeLaunch::Rope& rope = plan.decode->rope;
        rope.positions = args.positions.as<std::int32_t>();
        rope.cos = tables.cos.as<float>();
        rope.sin = tables.sin.as<float>();
        rope.max_positions = tables.cos.shape[0];
        rope.slots = args.slots.as<std::int32_t>();
        rope.k = args.k.data;
        rope.v = args.v.data;
    } else {
        enqueue_rope_write_kv(args, view);
    }
    launch_attention(args.q, plan, args.out);
}

void CudaBackend::linear_rope_attention(const tensor::LinearArgs& args) {
    const Tensor& x = args.x;
    const std::span<const tensor::LinearTarget> qkv = args.targets;
    const tensor::RopeArgs& r = *args.rope;
    check_linear_group(x, qkv);
    check_rope(r.q, r.k, r.positions, r.tables.cos, r.tables.sin);
    const PagedKvView view = checked_write_kv(r.k, r.v, r.slots, r.pages);
    const AttentionPlan plan = plan_attention(r.q, r.pages, *r.attention, r.out);
    activate();
    const std::int64_t n = x.shape[0];
    if (n == 0 || plan.fast_decode || r.q.dtype != DType::BF16 ||
        choose_linear_path(x, qkv) != LinearPath::Stacked) {
        linear_group(x, qkv);
        enqueue_rope_attention(r, view, plan);
        return;
    }
    // A token's stacked row is q | k | v.
    const Tensor stacked = stacked_gemm(x, qkv);
    const std::int64_t row = stacked.shape[1], q_width = r.q.shape[1] * r.q.shape[2],
                       kv_width = r.k.shape[1] * r.k.shape[2];
    const auto* base = static_cast<const char*>(stacked.data);
    const std::int64_t elem = static_cast<std::int64_t>(tensor::dtype_size(DType::BF16));
    const QkvRows from_stack{base, base + q_width * elem, base + (q_width + kv_width) * elem,
                             row, row, row, r.q.data, q_width, nullptr, 0};
    if (!launch_rope_write_kv(from_stack, r.q.shape[1], n, r.positions.as<std::int32_t>(),
                              r.tables.cos.as<float>(), r.tables.sin.as<float>(),
                              r.tables.cos.shape[0], r.slots.as<std::int32_t>(), view, stream_)) {
        // Rows the fused launch does not take: the targets' own buffers after all.
        split_stacked(stacked, qkv);
        enqueue_rope_write_kv(r, view);
    }
    launch_attention(r.q, plan, r.out);
}

void CudaBackend::paged_attention(const Tensor& q, const tensor::KvPages& pages,
                                  const tensor::PagedAttentionArgs& args, Tensor out) {
    const AttentionPlan plan = plan_attention(q, pages, args, out);
    activate();
    launch_attention(q, plan, out);
}

// What the prefill and decode plans need of the batch beyond AttentionPlan's view and batch.
struct AttentionShape {
    // Prefill query tiles on narrow (one 16-row fragment a warp) and wide (two) tiles.
    struct Tiling {
        int max_q_tiles = 0;     // the most of any one sequence
        std::int64_t tiles = 0;  // of the batch
    } tiling[2];
    std::int64_t max_prefill_kv = 0;
    int decode_seqs = 0;
    std::int64_t max_decode_kv = 0;
};

AttentionPlan CudaBackend::plan_attention(const Tensor& q, const tensor::KvPages& pages,
                                          const tensor::PagedAttentionArgs& args,
                                          const Tensor& out) const {
    AttentionPlan plan;
    const PagedKvView view = kv_view(pages);
    plan.view = view;
    tensor::check_paged_attention_args(q, pages, args, out, DType::BF16, pages.k.dtype);
    check_on_device(q, "attention q");
    check_on_device(out, "attention out");
    check_on_device(args.qo_indptr, "qo_indptr");
    check_on_device(args.indptr, "indptr");
    check_on_device(args.indices, "indices");
    check_on_device(args.last_page_len, "last_page_len");
    const int num_seqs = args.num_seqs;
    const bool fixed = args.fixed_max_kv_len > 0;
    IS_CHECK(fixed || (args.host_qo_indptr != nullptr && args.host_indptr != nullptr))
        << "the CUDA backend sizes its launches from the host metadata";
    const std::int64_t n = q.shape[0], heads = q.shape[1], d = view.head_dim;
    IS_CHECK(heads % view.kv_heads == 0) << heads << " heads, " << view.kv_heads << " kv heads";
    IS_CHECK(heads / view.kv_heads <= kMaxDecodeGroup && d <= kMaxDecodeHeadDim && d % 2 == 0)
        << "attention supports GQA groups up to " << kMaxDecodeGroup << " and head_dim up to "
        << kMaxDecodeHeadDim << " (got group " << heads / view.kv_heads << ", head_dim " << d
        << ")";
    IS_CHECK_EQ(fixed ? num_seqs : args.host_qo_indptr[num_seqs], n);
    IS_CHECK(n <= 0x7fffffff && heads <= 65535) << "attention batch too large";
    if (n == 0 || num_seqs == 0) return plan;

    // Launch sizes from the host copies of the metadata, or (replayable decode) from the bound
    // alone: the same grid then serves every step, and splits past a shorter sequence's end
    // merge as empty.
    AttentionShape shape;
    shape.decode_seqs = fixed ? num_seqs : 0;
    shape.max_decode_kv = fixed ? args.fixed_max_kv_len : 0;
    const int group = static_cast<int>(heads / view.kv_heads);
    for (int s = 0; s < (fixed ? 0 : num_seqs); ++s) {
        const int q_len = args.host_qo_indptr[s + 1] - args.host_qo_indptr[s];
        const std::int64_t num_pages = args.host_indptr[s + 1] - args.host_indptr[s];
        IS_CHECK(q_len >= 0 && (q_len == 0 || num_pages > 0)) << "sequence " << s << " has "
                                                              << q_len << " rows, " << num_pages
                                                              << " pages";
        if (q_len > 1) {
            for (int frags = 1; frags <= 2; ++frags) {
                const int tile_queries = prefill_tile_queries(group, frags);
                const int tiles = (q_len + tile_queries - 1) / tile_queries;
                AttentionShape::Tiling& t = shape.tiling[frags - 1];
                t.max_q_tiles = std::max(t.max_q_tiles, tiles);
                t.tiles += tiles;
            }
            shape.max_prefill_kv = std::max(shape.max_prefill_kv, num_pages * view.block_size);
        }
        if (q_len == 1) {
            ++shape.decode_seqs;
            shape.max_decode_kv = std::max(shape.max_decode_kv, num_pages * view.block_size);
        }
    }

    AttentionBatch& batch = plan.batch;
    batch.qo_indptr = args.qo_indptr.as<std::int32_t>();
    batch.indptr = args.indptr.as<std::int32_t>();
    batch.indices = args.indices.as<std::int32_t>();
    batch.last_page_len = args.last_page_len.as<std::int32_t>();
    batch.num_seqs = num_seqs;
    batch.num_tokens = static_cast<int>(n);
    batch.num_heads = static_cast<int>(heads);
    batch.scale = args.scale;
    batch.window = args.window;
    IS_CHECK(aligned16(q.data) && aligned16(out.data) && aligned16(view.k) && aligned16(view.v))
        << "attention tensors must be 16-byte aligned";

    if (!prefill_attention_supports(static_cast<int>(d))) {
        DecodeLaunch& all_rows = plan.decode.emplace();
        all_rows.per_sequence = false;
        all_rows.grid_rows = static_cast<int>(n);
        return plan;
    }
    if (shape.tiling[0].max_q_tiles > 0) plan_prefill(shape, plan);
    if (shape.decode_seqs > 0) plan_decode(shape, plan);
    return plan;
}

void CudaBackend::plan_prefill(const AttentionShape& shape, AttentionPlan& plan) const {
    const std::int64_t n = plan.batch.num_tokens, heads = plan.batch.num_heads;
    const std::int64_t d = plan.view.head_dim, kv_heads = plan.view.kv_heads;
    const std::int64_t max_prefill_kv = shape.max_prefill_kv;
    PrefillLaunch& prefill = plan.prefill.emplace();
    // Wide tiles halve the blocks: only while the GPU stays full with them.
    const int wide_min = options_.prefill.wide_min_blocks_per_sm;
    prefill.row_frags =
        prefill_max_row_frags(static_cast<int>(d)) >= 2 && wide_min >= 0 &&
                shape.tiling[1].tiles * kv_heads >= std::int64_t{wide_min} * num_sms_
            ? 2
            : 1;
    const AttentionShape::Tiling& chosen = shape.tiling[prefill.row_frags - 1];
    prefill.max_q_tiles = chosen.max_q_tiles;
    prefill.max_kv_tokens = max_prefill_kv;
    // Partials are kept per batch row, decode rows included (they are few when this pays).
    const std::int64_t row_split_bytes =
        n * heads * (d + 2) * static_cast<std::int64_t>(sizeof(float));
    const std::int64_t blocks = chosen.tiles * kv_heads;
    const std::int64_t wanted = (kPrefillBlocksPerSm * num_sms_ + blocks - 1) / blocks;
    const std::int64_t by_length =
        (max_prefill_kv + kMinPrefillSplitTokens - 1) / kMinPrefillSplitTokens;
    const std::int64_t splits =
        std::min({wanted, by_length,
                  static_cast<std::int64_t>(options_.attention_workspace_bytes) / row_split_bytes,
                  static_cast<std::int64_t>(options_.max_kv_splits),
                  std::int64_t{0x7fffffff} / prefill.max_q_tiles});
    cut_kv_splits(prefill, splits, max_prefill_kv, prefill_tile_tokens(), n, heads, d,
                  attention_workspace_);
}

void CudaBackend::plan_decode(const AttentionShape& shape, AttentionPlan& plan) const {
    const int num_seqs = plan.batch.num_seqs;
    const std::int64_t heads = plan.batch.num_heads, d = plan.view.head_dim;
    const std::int64_t kv_heads = plan.view.kv_heads, max_decode_kv = shape.max_decode_kv;
    const int group = static_cast<int>(heads / kv_heads);
    // Split long contexts until the GPU has enough blocks, within the workspace.
    DecodeLaunch& decode = plan.decode.emplace();
    decode.per_sequence = true;
    decode.grid_rows = num_seqs;
    const std::int64_t blocks = static_cast<std::int64_t>(shape.decode_seqs) * kv_heads;
    const DecodeAttentionOptions& dopt = options_.decode;
    const std::int64_t by_length =
        (max_decode_kv + dopt.min_split_tokens - 1) / dopt.min_split_tokens;
    const std::int64_t per_split_bytes = static_cast<std::int64_t>(num_seqs) * heads * (d + 2) *
                                         static_cast<std::int64_t>(sizeof(float));
    const std::int64_t by_workspace =
        static_cast<std::int64_t>(options_.attention_workspace_bytes) / per_split_bytes;
    std::int64_t wanted = (kBlocksPerSm * num_sms_ + blocks - 1) / blocks;
    const std::int64_t tc_min_pairs =
        dopt.tensor_core_min_pairs > 0 ? dopt.tensor_core_min_pairs : num_sms_;
    // The tensor-core kernel has no window: windowed layers take the CUDA-core kernels.
    // FP8 pages have no fast kernel: the tensor-core one takes their small batches too.
    if (dopt.tensor_cores && plan.batch.window == 0 && (blocks >= tc_min_pairs || plan.view.fp8) &&
        decode_tc_supports(static_cast<int>(d), group)) {
        // Persistent grid over (split, sequence, kv head) items of up to dopt.split_tokens KV
        // tokens: the items of a replay past the real lengths cost a skip, not a launch. The
        // schedule and split count balance the items over warps or CTAs (decode_schedule.h).
        const int fit = decode_tc_ctas_per_sm(decode_tc_limits_, static_cast<int>(d), group);
        decode.max_ctas =
            num_sms_ * (dopt.ctas_per_sm > 0 ? std::min(dopt.ctas_per_sm, fit) : fit);
        decode.item_counter = decode_item_counter_;
        // Items of about split_tokens at most: a bound just past a multiple of it (1K context
        // plus the tokens decoded so far) does not force a split of a few tokens and its merge
        // (batch 128 at 1K on the H200: 13.75K against 13.2K tok/s).
        const std::int64_t by_item = max_decode_kv / dopt.split_tokens;
        const std::int64_t cap = std::min({by_length, by_workspace,
                                           static_cast<std::int64_t>(options_.max_kv_splits)});
        const std::int64_t tiles = (max_decode_kv + decode_tile_tokens() - 1) /
                                   decode_tile_tokens();
        const TcSchedule chosen = choose_tc_schedule(dopt.schedule, blocks, decode.max_ctas,
                                                     decode_tc_warps_per_cta(), tiles, by_item,
                                                     cap);
        decode.warp_items = chosen.warp_items;
        wanted = chosen.splits;
    }
    const std::int64_t splits = std::min(
        {wanted, by_length, by_workspace, static_cast<std::int64_t>(options_.max_kv_splits)});
    cut_kv_splits(decode, splits, max_decode_kv, decode_tile_tokens(), num_seqs, heads, d,
                  attention_workspace_);
    plan.fast_decode =
        !plan.view.fp8 && decode.max_ctas == 0 && decode_fast_supports(static_cast<int>(d), group);
    if (plan.fast_decode && std::int64_t{num_seqs} * kv_heads <= kSplitArrivals) {
        decode.split_arrivals = split_arrivals_;
    }
}

void CudaBackend::launch_attention(const Tensor& q, const AttentionPlan& plan, Tensor out) {
    if (plan.prefill) {
        launch_prefill_attention(q.data, plan.view, plan.batch, *plan.prefill, out.data, stream_);
        launch_merge_prefill_splits(plan.view, plan.batch, *plan.prefill, out.data, stream_);
    }
    if (plan.decode) {
        launch_decode_attention(q.data, plan.view, plan.batch, *plan.decode, out.data, stream_);
        launch_merge_splits(plan.view, plan.batch, *plan.decode, out.data, stream_);
    }
}

}  // namespace inferscale::backends::cuda
