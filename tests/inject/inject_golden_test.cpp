// Injection equivalence on the golden tiny checkpoints (CPU, f32): a chunk captured by the
// ChunkEncoder at positions 0.. and injected at p.. leaves the same K and V in the pages as a
// prefill of that chunk alone at p.. (so RoPE really is re-applied), and the encoder's batching
// and context slicing do not change what it captures. Injected a layer range at a time from
// inside the forward (ForwardBatch::before_layer, as host-tier chunks arriving layer group by
// layer group are), the pages and the question's logits are bit for bit those of injecting
// every layer first.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "engine/chunk_encoder.h"
#include "inject/inject_plan.h"
#include "inject/injector.h"
#include "model/golden_util.h"

namespace inferscale::inject {
namespace {

using model::golden::Harness;

class InjectGolden : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        h_.init(GetParam(), /*block_size=*/4, /*num_blocks=*/96);
        if (HasFatalFailure()) return;
        pool_ = std::make_unique<kv::BlockPool>(96);
        auto enc = engine::ChunkEncoder::create(*h_.backend, *h_.model, *h_.kv, *pool_, *h_.ws);
        ASSERT_TRUE(enc.ok()) << enc.error().message;
        encoder_ = std::make_unique<engine::ChunkEncoder>(std::move(enc).value());
    }

    std::vector<std::int32_t> tokens(std::int64_t n, std::int32_t seed) const {
        std::vector<std::int32_t> t(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i)
            t[i] = static_cast<std::int32_t>((seed * 131 + i * 17 + 3) % h_.config.vocab_size);
        return t;
    }

    engine::ChunkRequest request(const std::string& id, std::vector<std::int32_t> fact,
                         std::vector<std::int32_t> context = {}) const {
        engine::ChunkRequest r;
        r.identity = memory::ChunkIdentity{id, memory::text_hash(id), GetParam(), 0,
                                           memory::EncodingMode::Standalone};
        r.fact_tokens = std::move(fact);
        r.context_tokens = std::move(context);
        return r;
    }

    // Row `kv_index` of layer `l`'s K or V pages of a sequence with `blocks`.
    const float* page_row(bool v, std::int64_t l, const std::vector<kv::BlockId>& blocks,
                          std::int64_t kv_index) const {
        const tensor::KvPages p = h_.kv->pages(l);
        const std::int64_t bs = h_.kv->layout().block_size;
        const std::int64_t row = h_.config.num_kv_heads * h_.config.head_dim;
        const std::int64_t slot = blocks[kv_index / bs] * bs + kv_index % bs;
        return (v ? p.v : p.k).as<const float>() + slot * row;
    }

    // Largest |a - b| / (1 + |b|) over every layer's K and V rows of two sequences.
    float max_rel_diff(const std::vector<kv::BlockId>& a, std::int64_t a_start,
                       const std::vector<kv::BlockId>& b, std::int64_t b_start, std::int64_t n) {
        const std::int64_t row = h_.config.num_kv_heads * h_.config.head_dim;
        float worst = 0.0f;
        for (std::int64_t l = 0; l < h_.config.num_layers; ++l)
            for (bool v : {false, true})
                for (std::int64_t t = 0; t < n; ++t) {
                    const float* x = page_row(v, l, a, a_start + t);
                    const float* y = page_row(v, l, b, b_start + t);
                    for (std::int64_t i = 0; i < row; ++i)
                        worst = std::max(worst, std::abs(x[i] - y[i]) / (1.0f + std::abs(y[i])));
                }
        return worst;
    }

    Harness h_;
    std::unique_ptr<kv::BlockPool> pool_;
    std::unique_ptr<engine::ChunkEncoder> encoder_;
};

TEST_P(InjectGolden, InjectedAtShiftedPositionsEqualsPrefillThere) {
    const std::vector<std::int32_t> fact = tokens(11, 1);
    const engine::ChunkRequest reqs[] = {request("f", fact)};
    auto chunks = encoder_->encode(reqs);
    ASSERT_TRUE(chunks.ok()) << chunks.error().message;
    EXPECT_EQ(pool_->num_free(), 96) << "scratch blocks must be returned";
    const memory::KvChunk& chunk = (*chunks)[0];
    ASSERT_EQ(chunk.num_tokens(), 11);
    EXPECT_EQ(chunk.token_ids(), fact);

    // Reference: the chunk alone, prefilled with RoPE positions p..p+10 (KV indices 0..10).
    const std::int32_t p = 37;
    const auto ref_blocks = model::golden::take_blocks(*pool_, 3);
    {
        std::vector<std::int32_t> pos(fact.size());
        std::iota(pos.begin(), pos.end(), p);
        const model::BatchSequence seq{11, 11, ref_blocks};
        h_.run(model::ForwardBatch{fact, pos, std::span(&seq, 1), model::LogitsSelection::None});
    }
    // Injection into another sequence at KV indices (= positions) p..p+10.
    const auto inj_blocks = model::golden::take_blocks(*pool_, 13);
    Injector injector(*h_.backend, h_.model->rope_tables());
    const InjectSpan span{&chunk, 0, 11, p};
    ASSERT_TRUE(injector.inject({&span, 1}, inj_blocks, *h_.kv).ok());

    // Equal up to f32 rounding: RoPE is relative, so shifting every position changes
    // attention only by rounding; a missing or wrong rotation would differ at O(1).
    EXPECT_LT(max_rel_diff(inj_blocks, p, ref_blocks, 0, 11), 2e-5f);

    // And a chunk left unrotated (injected at its capture position 0) is far from it.
    const auto zero_blocks = model::golden::take_blocks(*pool_, 3);
    const InjectSpan at_zero{&chunk, 0, 11, 0};
    ASSERT_TRUE(injector.inject({&at_zero, 1}, zero_blocks, *h_.kv).ok());
    EXPECT_GT(max_rel_diff(zero_blocks, 0, ref_blocks, 0, 11), 1e-2f);
}

TEST_P(InjectGolden, ContextIsSlicedOffAndBatchingChangesNothing) {
    const std::vector<std::int32_t> ctx = tokens(6, 7), f1 = tokens(9, 2), f2 = tokens(5, 3),
                                    f3 = tokens(13, 4);
    const engine::ChunkRequest batch[] = {request("a", f1), request("b", f2, ctx),
                                          request("c", f3)};
    auto together = encoder_->encode(batch);
    ASSERT_TRUE(together.ok()) << together.error().message;
    ASSERT_EQ(together->size(), 3u);
    EXPECT_EQ((*together)[1].num_tokens(), 5);
    for (std::size_t i = 0; i < 3; ++i) {
        auto alone = encoder_->encode({&batch[i], 1});
        ASSERT_TRUE(alone.ok());
        const memory::KvChunk& x = (*together)[i];
        const memory::KvChunk& y = (*alone)[0];
        ASSERT_EQ(x.bytes(), y.bytes());
        const auto* a = static_cast<const float*>(x.data());
        const auto* b = static_cast<const float*>(y.data());
        float worst = 0.0f;
        for (std::size_t j = 0; j < x.bytes() / 4; ++j)
            worst = std::max(worst, std::abs(a[j] - b[j]) / (1.0f + std::abs(b[j])));
        EXPECT_LT(worst, 3e-5f) << "fact " << i;
    }

    // The context-encoded chunk injected at its own positions equals a prefill of ctx ‖ fact.
    std::vector<std::int32_t> full = ctx;
    full.insert(full.end(), f2.begin(), f2.end());
    const auto ref_blocks = model::golden::take_blocks(*pool_, 3);
    h_.run_one(full, 0, ref_blocks, model::LogitsSelection::None);
    const auto inj_blocks = model::golden::take_blocks(*pool_, 3);
    Injector injector(*h_.backend, h_.model->rope_tables());
    const InjectSpan span{&(*together)[1], 0, 5, 6};
    ASSERT_TRUE(injector.inject({&span, 1}, inj_blocks, *h_.kv).ok());
    EXPECT_LT(max_rel_diff(inj_blocks, 6, ref_blocks, 6, 5), 3e-5f);
}

// Longer than one forward step (the harness takes 96 tokens): encoded in pieces.
TEST_P(InjectGolden, LongFactIsEncodedInPieces) {
    const std::vector<std::int32_t> ctx = tokens(70, 5), fact = tokens(50, 6);
    const engine::ChunkRequest reqs[] = {request("long", fact, ctx),
                                         request("short", tokens(4, 8))};
    auto chunks = encoder_->encode(reqs);
    ASSERT_TRUE(chunks.ok()) << chunks.error().message;
    std::vector<std::int32_t> full = ctx;
    full.insert(full.end(), fact.begin(), fact.end());
    const auto ref_blocks = model::golden::take_blocks(*pool_, 30);
    h_.run_one(std::vector<std::int32_t>(full.begin(), full.begin() + 64), 0, ref_blocks,
               model::LogitsSelection::None);
    h_.run_one(std::vector<std::int32_t>(full.begin() + 64, full.end()), 64, ref_blocks,
               model::LogitsSelection::None);
    const auto inj_blocks = model::golden::take_blocks(*pool_, 30);
    Injector injector(*h_.backend, h_.model->rope_tables());
    const InjectSpan span{&(*chunks)[0], 0, 50, 70};
    ASSERT_TRUE(injector.inject({&span, 1}, inj_blocks, *h_.kv).ok());
    EXPECT_LT(max_rel_diff(inj_blocks, 70, ref_blocks, 70, 50), 3e-5f);
}

TEST_P(InjectGolden, InjectedLayerByLayerInsideTheForwardEqualsInjectedFirst) {
    const engine::ChunkRequest reqs[] = {request("a", tokens(7, 11)), request("b", tokens(9, 12))};
    auto chunks = encoder_->encode(reqs);
    ASSERT_TRUE(chunks.ok()) << chunks.error().message;
    const InjectSpan spans[] = {{&(*chunks)[0], 0, 7, 0}, {&(*chunks)[1], 0, 9, 7}};
    const std::vector<std::int32_t> question = tokens(5, 13);
    const std::int64_t layers = h_.config.num_layers;
    Injector injector(*h_.backend, h_.model->rope_tables());

    const auto first_blocks = model::golden::take_blocks(*pool_, 6);
    ASSERT_TRUE(injector.inject(spans, first_blocks, *h_.kv).ok());
    const std::size_t all_bytes = injector.last_bytes_moved();
    const std::vector<float> expected =
        h_.run_one(question, 16, first_blocks, model::LogitsSelection::LastPerSequence);

    const auto layered_blocks = model::golden::take_blocks(*pool_, 6);
    ASSERT_TRUE(injector.prepare(spans, layered_blocks, *h_.kv).ok());
    EXPECT_EQ(injector.prepared_layers(), layers);
    std::vector<std::int64_t> seen;
    const model::LayerHook hook = [&](std::int64_t layer) {
        seen.push_back(layer);
        injector.inject_layers(layer, 1);
    };
    std::vector<std::int32_t> pos(question.size());
    std::iota(pos.begin(), pos.end(), 16);
    const model::BatchSequence seq{static_cast<std::int32_t>(question.size()), 21,
                                   layered_blocks};
    model::ForwardBatch batch{question, pos, std::span(&seq, 1),
                              model::LogitsSelection::LastPerSequence};
    batch.before_layer = &hook;
    const std::vector<float> layered = h_.run(batch);

    std::vector<std::int64_t> every(static_cast<std::size_t>(layers));
    std::iota(every.begin(), every.end(), 0);
    EXPECT_EQ(seen, every) << "the hook runs once per layer, in order";
    EXPECT_EQ(injector.last_bytes_moved(), all_bytes);
    EXPECT_EQ(layered, expected);
    EXPECT_EQ(max_rel_diff(layered_blocks, 0, first_blocks, 0, 21), 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Golden, InjectGolden,
                         ::testing::Values("llama_gqa", "llama3_scaled_tied", "mistral", "qwen2"));

}  // namespace
}  // namespace inferscale::inject
