// InjectPlan arithmetic (block alignment, the protected-tail invariant) and the inject op's
// exactness against rope() + write_kv() on the CPU backend, with synthetic chunks (no model).

#include "inject/inject_plan.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>

#include "backends/cpu/cpu_backend.h"
#include "inject/injector.h"
#include "kv/kv_storage.h"
#include "tensor/views.h"

namespace inferscale::inject {
namespace {

using tensor::DType;
using tensor::Tensor;

constexpr std::int64_t kLayers = 3, kHeads = 2, kDim = 8;

memory::KvChunk random_chunk(tensor::Backend& be, const std::string& id, std::int64_t tokens,
                     std::uint32_t seed) {
    const std::size_t count = static_cast<std::size_t>(kLayers * 2 * tokens * kHeads * kDim);
    tensor::Buffer buf = be.allocate(count * sizeof(float)).value();
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto* p = static_cast<float*>(buf.data());
    for (std::size_t i = 0; i < count; ++i) p[i] = u(rng);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens));
    std::iota(ids.begin(), ids.end(), static_cast<std::int32_t>(seed * 100));
    const memory::ChunkIdentity identity{id, memory::text_hash(id), "m", 0,
                                         memory::EncodingMode::Standalone};
    return memory::KvChunk(identity, ids, kLayers, kHeads, kDim, DType::F32, std::move(buf));
}

TEST(InjectPlan, AlignsToWholeBlocksAndKeepsFactsInjected) {
    backends::cpu::CpuBackend be;
    memory::KvChunk header = random_chunk(be, "h", 7, 1), f1 = random_chunk(be, "f1", 5, 2),
            f2 = random_chunk(be, "f2", 6, 3), footer = random_chunk(be, "ft", 15, 4);
    const memory::KvChunk* facts[] = {&f1, &f2};
    auto plan = make_memory_plan(header, facts, footer, 16);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    EXPECT_EQ(plan->memory_tokens, 33);
    EXPECT_EQ(plan->protected_tokens, 18);
    EXPECT_EQ(plan->loaded_tokens, 32);
    EXPECT_EQ(plan->num_blocks(), 2);
    EXPECT_EQ(plan->tail_tokens(), 1);
    ASSERT_EQ(plan->spans.size(), 4u);
    EXPECT_EQ(plan->spans[3].first_position, 18);
    EXPECT_EQ(plan->spans[3].num_rows, 14);  // the footer's last token is recomputed
    EXPECT_EQ(plan->token_ids.front(), header.token_ids().front());
    EXPECT_EQ(plan->token_ids[7], f1.token_ids().front());

    // A footer shorter than B - 1 would leave fact tokens in the recomputed tail.
    memory::KvChunk short_footer = random_chunk(be, "sf", 3, 5);
    EXPECT_FALSE(make_memory_plan(header, facts, short_footer, 16).ok());
    // Shorter than one block: nothing to inject.
    const memory::KvChunk* one[] = {&f1};
    EXPECT_FALSE(make_inject_plan(one, 0, 16).ok());
}

TEST(ChunkIdentity, KeyCoversEveryField) {
    memory::ChunkIdentity a{"f1", "abc", "model", 0, memory::EncodingMode::Standalone};
    memory::ChunkIdentity b = a;
    EXPECT_EQ(a.key(), b.key());
    b.window = 5;
    EXPECT_NE(a.key(), b.key());
    b = a;
    b.mode = memory::EncodingMode::AfterHeader;
    EXPECT_NE(a.key(), b.key());
    b = a;
    b.model = "other";
    EXPECT_NE(a.key(), b.key());
    EXPECT_NE(memory::text_hash("a"), memory::text_hash("b"));
    EXPECT_EQ(memory::text_hash("x").size(), 16u);
}

// The fused op equals rope() on a copy of the chunk's K followed by write_kv(), bit for bit.
TEST(InjectOp, MatchesRopeThenWriteKv) {
    backends::cpu::CpuBackend be;
    const std::int64_t bs = 4, blocks = 12, max_pos = 64;
    kv::KvLayout layout{kLayers, blocks, bs, kHeads, kDim};
    auto injected = kv::KvStorage::create(be, layout).value();
    auto expected = kv::KvStorage::create(be, layout).value();

    // Tables with arbitrary angles: the op must read them, not recompute them.
    std::vector<float> cos(max_pos * kDim / 2), sin(cos.size());
    for (std::size_t i = 0; i < cos.size(); ++i) {
        cos[i] = std::cos(0.37f * static_cast<float>(i));
        sin[i] = std::sin(0.37f * static_cast<float>(i));
    }
    tensor::RopeTables tables{Tensor(cos.data(), DType::F32, {max_pos, kDim / 2}),
                              Tensor(sin.data(), DType::F32, {max_pos, kDim / 2})};

    memory::KvChunk a = random_chunk(be, "a", 5, 11), b = random_chunk(be, "b", 9, 12);
    // b's rows 2..8 at positions 3..9, then a's rows 0..4 at 21..25, in scattered blocks.
    const std::vector<InjectSpan> spans = {{&b, 2, 7, 3}, {&a, 0, 5, 21}};
    const std::vector<kv::BlockId> seq_blocks = {7, 2, 9, 0, 5, 11, 3};
    Injector injector(be, tables);
    ASSERT_TRUE(injector.inject(spans, seq_blocks, injected).ok());
    EXPECT_EQ(injector.last_bytes_moved(),
              static_cast<std::size_t>(2 * 2 * 12 * kLayers * kHeads * kDim * 4));

    for (const InjectSpan& s : spans) {
        for (std::int64_t l = 0; l < kLayers; ++l) {
            std::vector<float> k(static_cast<std::size_t>(s.num_rows * kHeads * kDim));
            const Tensor ck = s.chunk->k(l), cv = s.chunk->v(l);
            std::memcpy(k.data(), static_cast<float*>(ck.data) + s.first_row * kHeads * kDim,
                        k.size() * sizeof(float));
            std::vector<std::int32_t> pos(static_cast<std::size_t>(s.num_rows)), slots(pos.size());
            for (std::int64_t j = 0; j < s.num_rows; ++j) {
                const std::int64_t p = s.first_position + j;
                pos[j] = static_cast<std::int32_t>(p);
                slots[j] = static_cast<std::int32_t>(seq_blocks[p / bs] * bs + p % bs);
            }
            const Tensor k3(k.data(), DType::F32, {s.num_rows, kHeads, kDim});
            const Tensor v3(static_cast<float*>(cv.data) + s.first_row * kHeads * kDim, DType::F32,
                            {s.num_rows, kHeads, kDim});
            be.rope({.q = k3,
                     .positions = Tensor(pos.data(), DType::I32, {s.num_rows}),
                     .tables = tables});
            be.write_kv(k3, v3, Tensor(slots.data(), DType::I32, {s.num_rows}), expected.pages(l));
        }
    }
    const std::size_t bytes = layout.bytes_per_layer(DType::F32);
    for (std::int64_t l = 0; l < kLayers; ++l) {
        EXPECT_EQ(std::memcmp(injected.pages(l).k.data, expected.pages(l).k.data, bytes), 0) << l;
        EXPECT_EQ(std::memcmp(injected.pages(l).v.data, expected.pages(l).v.data, bytes), 0) << l;
    }
}

TEST(InjectOp, RejectsMismatchedLayoutsAndShortBlocks) {
    backends::cpu::CpuBackend be;
    std::vector<float> cos(64 * kDim / 2, 1.0f), sin(cos.size(), 0.0f);
    tensor::RopeTables tables{Tensor(cos.data(), DType::F32, {64, kDim / 2}),
                              Tensor(sin.data(), DType::F32, {64, kDim / 2})};
    Injector injector(be, tables);
    memory::KvChunk a = random_chunk(be, "a", 5, 1);
    auto other = kv::KvStorage::create(be, {kLayers + 1, 8, 4, kHeads, kDim}).value();
    const InjectSpan span{&a, 0, 5, 0};
    const std::vector<kv::BlockId> two = {0, 1};
    EXPECT_FALSE(injector.inject({&span, 1}, two, other).ok());
    auto good = kv::KvStorage::create(be, {kLayers, 8, 4, kHeads, kDim}).value();
    const std::vector<kv::BlockId> one = {0};
    EXPECT_FALSE(injector.inject({&span, 1}, one, good).ok());
    const InjectSpan far{&a, 0, 5, 62};
    const std::vector<kv::BlockId> many = {0, 1, 2, 3, 4, 5, 6, 7};
    EXPECT_FALSE(injector.inject({&far, 1}, many, good).ok());
    EXPECT_TRUE(injector.inject({&span, 1}, two, good).ok());
}

}  // namespace
}  // namespace inferscale::inject
