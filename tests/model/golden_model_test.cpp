// LlamaModel on the CPU backend against transformers (tools/make_golden_models.py): prompt
// logits at fp32 tolerance, greedy decode through the paged cache token for token, ragged
// batches equal to sequences run alone, and the pre-RoPE KV capture hook.
//
// Tolerance: max |logit - reference| <= 2e-5 * max(1, max |reference logit|). Weights are
// identical (bf16/f16 widen exactly); the remaining difference is f32 summation order.

#include <cstdio>

#include "model/golden_util.h"
#include "model/rope_tables.h"
#include "tensor/views.h"

namespace inferscale::model::golden {
namespace {

constexpr float kRelativeTolerance = 2e-5f;

class GoldenModelTest : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        golden_ = load_golden(GetParam());
        ASSERT_NO_FATAL_FAILURE(h_.init(GetParam()));
        ASSERT_EQ(h_.config.vocab_size, golden_.vocab);
    }
    float tolerance() const { return kRelativeTolerance * std::max(1.0f, golden_.logits_abs_max); }

    Golden golden_;
    Harness h_;
};

TEST_P(GoldenModelTest, RopeFrequenciesMatchTransformers) {
    const std::vector<float> inv = rope_inv_freq(rope_params(h_.config));
    ASSERT_EQ(inv.size(), golden_.rope_inv_freq.size());
    for (std::size_t i = 0; i < inv.size(); ++i) {
        EXPECT_NEAR(inv[i], golden_.rope_inv_freq[i], 1e-6f * golden_.rope_inv_freq[i]) << i;
    }
}

TEST_P(GoldenModelTest, PromptLogitsMatchTransformers) {
    kv::BlockPool pool = scrambled_pool(96);
    const auto pages = take_blocks(pool, 12);  // 48 tokens / block size 4
    const std::vector<float> logits =
        h_.run_one(golden_.prompt, 0, pages, LogitsSelection::AllTokens);
    ASSERT_EQ(logits.size(), golden_.logits.size());
    const float diff = max_abs_diff(logits.data(), golden_.logits.data(), logits.size());
    EXPECT_LE(diff, tolerance()) << "max |logit| " << golden_.logits_abs_max;
    std::printf("%s: max |logit diff| %.3g (tolerance %.3g)\n", GetParam().c_str(), diff,
                tolerance());
}

TEST_P(GoldenModelTest, GreedyDecodeThroughPagedCacheMatchesTransformers) {
    // Block size 16 here: the prompt fills exactly three pages and decode opens the fourth.
    ASSERT_NO_FATAL_FAILURE(h_.init(GetParam(), 16, 8));
    const std::vector<std::int32_t> pages{5, 2, 7, 0, 3};
    std::vector<float> logits =
        h_.run_one(golden_.prompt, 0, pages, LogitsSelection::LastPerSequence);
    std::vector<std::int32_t> generated{argmax(logits.data(), h_.config.vocab_size)};
    auto len = static_cast<std::int32_t>(golden_.prompt.size());
    while (generated.size() < golden_.greedy.size()) {
        logits = h_.run_one({generated.back()}, len++, pages, LogitsSelection::LastPerSequence);
        generated.push_back(argmax(logits.data(), h_.config.vocab_size));
    }
    EXPECT_EQ(generated, golden_.greedy);
}

// Step 1: A prefills 30 prompt tokens, B prefills 13 other tokens.
// Step 2: A continues with the other 18 prompt tokens (chunked prefill), B decodes one token,
// C prefills 7 tokens. Pages come from a scrambled pool, interleaved between the sequences.
// Every row must equal the same sequence run alone, and A must equal transformers.
TEST_P(GoldenModelTest, RaggedBatchMatchesSequencesAlone) {
    const std::vector<std::int32_t>& p = golden_.prompt;
    const std::vector<std::int32_t> a1(p.begin(), p.begin() + 30), a2(p.begin() + 30, p.end());
    std::vector<std::int32_t> b1(p.rbegin(), p.rbegin() + 13);
    const std::vector<std::int32_t> b2{17};
    const std::vector<std::int32_t> c1{9, 40, 41, 200, 3, 77, 150};

    kv::BlockPool pool = scrambled_pool(96);
    std::vector<std::int32_t> pa, pb, pc;
    for (int i = 0; i < 12; ++i) {  // interleaved: no sequence owns a contiguous run
        pa.push_back(take_blocks(pool, 1)[0]);
        if (i < 4) pb.push_back(take_blocks(pool, 1)[0]);
        if (i < 2) pc.push_back(take_blocks(pool, 1)[0]);
    }

    // Step 1.
    std::vector<std::int32_t> ids(a1), pos;
    ids.insert(ids.end(), b1.begin(), b1.end());
    for (int i = 0; i < 30; ++i) pos.push_back(i);
    for (int i = 0; i < 13; ++i) pos.push_back(i);
    const BatchSequence step1[] = {{30, 30, pa}, {13, 13, pb}};
    const std::vector<float> l1 =
        h_.run(ForwardBatch{ids, pos, step1, LogitsSelection::LastPerSequence});

    // Step 2.
    ids = a2;
    ids.insert(ids.end(), b2.begin(), b2.end());
    ids.insert(ids.end(), c1.begin(), c1.end());
    pos.clear();
    for (int i = 30; i < 48; ++i) pos.push_back(i);
    pos.push_back(13);
    for (int i = 0; i < 7; ++i) pos.push_back(i);
    const BatchSequence step2[] = {{18, 48, pa}, {1, 14, pb}, {7, 7, pc}};
    const std::vector<float> l2 = h_.run(ForwardBatch{ids, pos, step2, LogitsSelection::AllTokens});

    // Reference: each full sequence alone, in fresh pages 80.. (contiguous, in order).
    const std::int64_t v = h_.config.vocab_size;
    const std::vector<std::int32_t> fresh{80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91};
    const float tight = 2e-5f * std::max(1.0f, golden_.logits_abs_max);
    std::vector<std::int32_t> b_full(b1);
    b_full.push_back(b2[0]);
    const auto ra = h_.run_one(p, 0, fresh, LogitsSelection::AllTokens);
    const auto rb = h_.run_one(b_full, 0, fresh, LogitsSelection::AllTokens);
    const auto rc = h_.run_one(c1, 0, fresh, LogitsSelection::AllTokens);

    EXPECT_LE(max_abs_diff(l1.data(), ra.data() + 29 * v, v), tight) << "A step 1";
    EXPECT_LE(max_abs_diff(l1.data() + v, rb.data() + 12 * v, v), tight) << "B step 1";
    EXPECT_LE(max_abs_diff(l2.data(), ra.data() + 30 * v, 18 * v), tight) << "A step 2";
    EXPECT_LE(max_abs_diff(l2.data() + 18 * v, rb.data() + 13 * v, v), tight) << "B decode";
    EXPECT_LE(max_abs_diff(l2.data() + 19 * v, rc.data(), 7 * v), tight) << "C prefill";
    EXPECT_LE(max_abs_diff(l2.data(), golden_.logits.data() + 30 * v, 18 * v), tolerance())
        << "A vs transformers";
}

// The capture hook returns K before RoPE: rotating it to its position gives the page contents.
TEST_P(GoldenModelTest, CaptureGivesPreRopeKeysAndValues) {
    const ModelConfig& c = h_.config;
    const std::vector<std::int32_t> rows{3, 10, 21};
    const std::int64_t m = 3, kvd = c.num_kv_heads * c.head_dim;
    std::vector<float> ck(c.num_layers * m * kvd), cv(ck.size());
    KvCapture cap{rows,
                  tensor::Tensor(ck.data(), tensor::DType::F32,
                                 {c.num_layers, m, c.num_kv_heads, c.head_dim}),
                  tensor::Tensor(cv.data(), tensor::DType::F32,
                                 {c.num_layers, m, c.num_kv_heads, c.head_dim})};
    const std::vector<std::int32_t> pages{40, 3, 17, 60, 8, 9};  // 24 tokens / block 4
    const std::vector<std::int32_t> ids(golden_.prompt.begin(), golden_.prompt.begin() + 24);
    std::vector<std::int32_t> pos(24);
    std::iota(pos.begin(), pos.end(), 0);
    const BatchSequence seq{24, 24, pages};
    ForwardBatch batch{ids, pos, std::span(&seq, 1), LogitsSelection::None, &cap};
    h_.run(batch);

    const HostRopeTables t = make_rope_tables(rope_params(c), 128);
    std::vector<float> cos = t.cos, sin = t.sin;
    const tensor::RopeTables tables{
        tensor::Tensor(cos.data(), tensor::DType::F32, {128, c.head_dim / 2}),
        tensor::Tensor(sin.data(), tensor::DType::F32, {128, c.head_dim / 2})};
    for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
        const tensor::KvPages kvp = h_.kv->pages(layer);
        for (std::int64_t r = 0; r < m; ++r) {
            const std::int32_t tok = rows[r];
            std::vector<float> k(ck.begin() + (layer * m + r) * kvd,
                                 ck.begin() + (layer * m + r + 1) * kvd);
            std::vector<std::int32_t> p{tok};
            h_.backend->rope(
                {.q = tensor::Tensor(k.data(), tensor::DType::F32, {1, c.num_kv_heads, c.head_dim}),
                 .positions = tensor::Tensor(p.data(), tensor::DType::I32, {1}),
                 .tables = tables});
            const std::int64_t slot = pages[tok / 4] * 4 + tok % 4;
            EXPECT_LE(max_abs_diff(k.data(), kvp.k.as<float>() + slot * kvd, kvd), 1e-6f);
            EXPECT_EQ(max_abs_diff(cv.data() + (layer * m + r) * kvd,
                                   kvp.v.as<float>() + slot * kvd, kvd),
                      0.0f);
        }
    }
}

TEST_P(GoldenModelTest, MalformedBatchesAreErrors) {
    std::vector<float> logits(8 * h_.config.vocab_size);
    const std::vector<std::int32_t> ids{5, 6}, pos{0, 1}, far{0, 500}, bad_id{5, 100000};
    const std::vector<std::int32_t> pages{1};
    const BatchSequence ok{2, 2, pages}, too_long{2, 9, pages},
        bad_page{2, 2, std::span(&bad_id[1], 1)};
    const auto fails = [&](const ForwardBatch& b) {
        return !h_.model->forward(b, *h_.kv, *h_.ws, logits).ok();
    };
    EXPECT_FALSE(fails(ForwardBatch{ids, pos, std::span(&ok, 1)}));
    EXPECT_TRUE(fails(ForwardBatch{ids, far, std::span(&ok, 1)}));        // beyond RoPE table
    EXPECT_TRUE(fails(ForwardBatch{bad_id, pos, std::span(&ok, 1)}));     // outside vocab
    EXPECT_TRUE(fails(ForwardBatch{ids, pos, std::span(&too_long, 1)}));  // missing pages
    EXPECT_TRUE(fails(ForwardBatch{ids, pos, std::span(&bad_page, 1)}));  // page out of range
    EXPECT_TRUE(fails(ForwardBatch{ids, pos, {}}));                       // no sequences
    std::vector<std::int32_t> many(200, 5), many_pos(200, 0);
    const BatchSequence big{200, 200, pages};
    EXPECT_TRUE(fails(ForwardBatch{many, many_pos, std::span(&big, 1)}));  // over max_tokens
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, GoldenModelTest,
                         ::testing::Values("llama_gqa", "llama3_scaled_tied", "mistral", "qwen2"));

}  // namespace
}  // namespace inferscale::model::golden
