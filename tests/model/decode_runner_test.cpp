// DecodeGraphRunner on the CPU backend (no graphs: the padded eager fallback) against plain
// forward, plus forward_greedy and CpuBackend::argmax. The padded rows must change nothing:
// their KV writes are skipped (slot -1) and their logits are dropped.

#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "decode_compare.h"

namespace inferscale::model {
namespace {

ModelConfig tiny_config() {
    ModelConfig c;
    c.vocab_size = 97;
    c.hidden_size = 64;
    c.intermediate_size = 96;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 16;
    c.max_position_embeddings = 256;
    return c;
}

TEST(DecodeRunner, PaddedEagerStepsMatchForward) {
    backends::cpu::CpuBackend cpu;
    auto m = LlamaModel::create_random(cpu, tiny_config(), 7);
    ASSERT_TRUE(m.ok()) << m.error().message;
    const decode_test::DecodeComparison r = decode_test::compare_decode(*m, {5, 9, 3}, 4, 4);
    EXPECT_EQ(r.graphs, 0);
    EXPECT_LT(r.max_rel_error, 1e-4);
    EXPECT_EQ(r.clear_agree, r.clear_rows);
    EXPECT_EQ(r.tokens, 3 * 4 + 4);
}

TEST(DecodeRunner, ForwardGreedyIsArgmaxOfForward) {
    backends::cpu::CpuBackend cpu;
    const ModelConfig c = tiny_config();
    auto m = LlamaModel::create_random(cpu, c, 11);
    ASSERT_TRUE(m.ok()) << m.error().message;
    auto kv = kv::KvStorage::create(cpu, m->kv_layout(8, 4));
    ASSERT_TRUE(kv.ok());
    auto ws = m->create_workspace({.max_tokens = 32, .max_seqs = 2, .max_pages = 8,
                                   .max_logit_rows = 8});
    ASSERT_TRUE(ws.ok());
    const std::vector<std::int32_t> tokens{3, 1, 4, 1, 5, 9}, pos{0, 1, 2, 3, 4, 5};
    const std::vector<std::int32_t> pages{2, 5};
    const BatchSequence seq{6, 6, pages};
    const ForwardBatch b{tokens, pos, std::span(&seq, 1), LogitsSelection::AllTokens};
    std::vector<float> logits(6 * c.vocab_size);
    ASSERT_TRUE(m->forward(b, *kv, *ws, logits).ok());
    std::vector<std::int32_t> ids(6, -1);
    ASSERT_TRUE(m->forward_greedy(b, *kv, *ws, ids).ok());
    for (int r = 0; r < 6; ++r) {
        EXPECT_EQ(ids[r], decode_test::argmax_row(&logits[r * c.vocab_size], c.vocab_size));
    }
    std::vector<std::int32_t> few(2);
    EXPECT_FALSE(m->forward_greedy(b, *kv, *ws, few).ok());
}

TEST(DecodeRunner, CpuArgmaxTiesAndNans) {
    backends::cpu::CpuBackend cpu;
    std::vector<float> logits{1.0f, 3.0f, 3.0f, -1.0f,  // tie: first wins
                              NAN, NAN, NAN, NAN,       // all NaN: 0
                              NAN, -5.0f, -2.0f, -2.5f};
    std::vector<std::int32_t> ids(3, -1);
    cpu.argmax(tensor::Tensor(logits.data(), tensor::DType::F32, {3, 4}), tensor::Tensor(),
               tensor::Tensor(ids.data(), tensor::DType::I32, {3}));
    EXPECT_EQ(ids, (std::vector<std::int32_t>{1, 0, 2}));
}

// Constrained decoding's argmax: only tokens whose bit is set compete; none allowed gives -1.
TEST(DecodeRunner, CpuArgmaxOverAllowedTokens) {
    backends::cpu::CpuBackend cpu;
    const std::int64_t vocab = 70, rows = 3, words = 3;
    std::vector<float> logits(rows * vocab);
    for (std::int64_t i = 0; i < rows * vocab; ++i) logits[i] = static_cast<float>((i * 37) % 101);
    std::vector<std::uint32_t> allowed(rows * words, 0);
    allowed[0 * words + 0] = 0x5u;         // row 0: tokens 0 and 2
    allowed[1 * words + 2] = 0x3fu;        // row 1: tokens 64..69, the last word's tail
    allowed[1 * words + 1] = 1u << 31;     // and 63
    std::vector<std::int32_t> ids(rows, 7);
    cpu.argmax(tensor::Tensor(logits.data(), tensor::DType::F32, {rows, vocab}),
               tensor::Tensor(allowed.data(), tensor::DType::I32, {rows, words}),
               tensor::Tensor(ids.data(), tensor::DType::I32, {rows}));
    const auto best_of = [&](std::int64_t r, std::initializer_list<std::int64_t> tokens) {
        std::int64_t best = -1;
        for (std::int64_t t : tokens)
            if (best < 0 || logits[r * vocab + t] > logits[r * vocab + best]) best = t;
        return static_cast<std::int32_t>(best);
    };
    EXPECT_EQ(ids[0], best_of(0, {0, 2}));
    EXPECT_EQ(ids[1], best_of(1, {63, 64, 65, 66, 67, 68, 69}));
    EXPECT_EQ(ids[2], -1);
}

TEST(DecodeRunner, RejectsOversizedBatches) {
    backends::cpu::CpuBackend cpu;
    auto m = LlamaModel::create_random(cpu, tiny_config(), 3);
    ASSERT_TRUE(m.ok());
    auto kv = kv::KvStorage::create(cpu, m->kv_layout(16, 4));
    ASSERT_TRUE(kv.ok());
    auto ws = m->create_workspace({.max_tokens = 4, .max_seqs = 4, .max_pages = 16,
                                   .max_logit_rows = 4});
    ASSERT_TRUE(ws.ok());
    EXPECT_FALSE(DecodeGraphRunner::create(*m, *kv, *ws, {.max_kv_len = 0}).ok());
    auto r = DecodeGraphRunner::create(*m, *kv, *ws, {.buckets = {1, 2, 4, 8}, .max_kv_len = 8});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->bucket_for(3), 4);
    EXPECT_EQ(r->bucket_for(5), 0);  // 8 exceeds the workspace and was dropped
    const std::vector<std::int32_t> pages{0, 1, 2};
    const BatchSequence seq{1, 9, pages};  // kv_len over max_kv_len
    const std::vector<std::int32_t> tok{1}, pos{8};
    std::vector<std::int32_t> ids(1);
    EXPECT_FALSE(r->decode(ForwardBatch{tok, pos, std::span(&seq, 1)}, ids).ok());
}

}  // namespace
}  // namespace inferscale::model
