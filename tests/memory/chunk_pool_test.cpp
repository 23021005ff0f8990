// ChunkPool on the CPU backend with synthetic chunks (no model): the inclusive tiers, LRU drops
// and promotion (bit-exact), leases, the disk format (restart, corruption), invalidation
// through a MemoryStore listener, no backend allocation or wait once open (a counting
// backend), the accounting, and a randomized run against invariant checks.

#include "memory/chunk_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "backends/cpu/cpu_backend.h"
#include "engine/chunk_invalidator.h"
#include "memory/chunk_file.h"
#include "memory/memory_store.h"
#include "memory/temp_dir.h"

namespace inferscale::memory {
namespace {

using memory::testing::TempDir;
namespace fs = std::filesystem;

constexpr std::int64_t kLayers = 2, kHeads = 2, kDim = 4;

ChunkIdentity ident(const std::string& fact, std::int32_t window = 0) {
    return ChunkIdentity{fact, text_hash("text of " + fact), "tiny-model", window,
                         EncodingMode::Standalone};
}

// Payload bytes of a chunk of `tokens`: kLayers * 2 * tokens * kHeads * kDim f32.
std::size_t bytes_of(std::int64_t tokens) {
    return static_cast<std::size_t>(kLayers * 2 * tokens * kHeads * kDim) * sizeof(float);
}

// Deterministic contents from (id key, seed), so a test can recompute what a chunk must hold.
std::vector<float> contents(const ChunkIdentity& id, std::int64_t tokens, std::uint32_t seed) {
    std::seed_seq seq{static_cast<std::uint32_t>(std::hash<std::string>{}(id.key())), seed};
    std::mt19937 rng(seq);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(bytes_of(tokens) / sizeof(float));
    for (float& x : v) x = u(rng);
    return v;
}

// A chunk in memory from the pool (as the encoder's output is), filled on the host (the CPU
// backend's memory is host memory).
Result<KvChunk> make_chunk(ChunkPool& pool, const ChunkIdentity& id, std::int64_t tokens,
                           std::uint32_t seed = 1) {
    const std::vector<float> v = contents(id, tokens, seed);
    tensor::Buffer buf = IS_TRY(pool.allocate_device(v.size() * sizeof(float)));
    std::memcpy(buf.data(), v.data(), v.size() * sizeof(float));
    std::vector<std::int32_t> toks(static_cast<std::size_t>(tokens));
    for (std::int64_t t = 0; t < tokens; ++t) toks[static_cast<std::size_t>(t)] = 7 * t + 3;
    return KvChunk(id, std::move(toks), kLayers, kHeads, kDim, tensor::DType::F32,
                   std::move(buf));
}

Result<ChunkLease> put_chunk(ChunkPool& pool, const ChunkIdentity& id, std::int64_t tokens,
                             std::uint32_t seed = 1) {
    KvChunk chunk = IS_TRY(make_chunk(pool, id, tokens, seed));
    return pool.put(std::move(chunk));
}

bool holds(const ChunkLease& l, const ChunkIdentity& id, std::int64_t tokens,
           std::uint32_t seed = 1) {
    if (!l || !(l->identity() == id) || l->num_tokens() != tokens) return false;
    const std::vector<float> v = contents(id, tokens, seed);
    return std::memcmp(l->data(), v.data(), v.size() * sizeof(float)) == 0;
}

class ChunkPoolTest : public ::testing::Test {
  protected:
    std::unique_ptr<ChunkPool> open(std::size_t device, std::size_t host, bool disk = true,
                                    bool serve_from_host = false) {
        ChunkPoolOptions o;
        o.device_capacity_bytes = device;
        o.host_capacity_bytes = host;
        o.serve_from_host = serve_from_host;
        if (disk) o.disk_dir = dir_.file("chunks");
        auto pool = ChunkPool::open(be_, o);
        EXPECT_TRUE(pool.ok()) << pool.error().message;
        return std::move(pool).value();
    }
    // Puts and releases the lease at once.
    void put(ChunkPool& pool, const ChunkIdentity& id, std::int64_t tokens,
             std::uint32_t seed = 1) {
        auto l = put_chunk(pool, id, tokens, seed);
        ASSERT_TRUE(l.ok()) << l.error().message;
    }
    std::string path_of(const ChunkIdentity& id) {
        return chunk_file_path(dir_.file("chunks"), id);
    }

    backends::cpu::CpuBackend be_;
    TempDir dir_;
};

TEST_F(ChunkPoolTest, MissingChunkIsAnEmptyLease) {
    auto pool = open(bytes_of(8), bytes_of(8));
    auto l = pool->get(ident("nope"));
    ASSERT_TRUE(l.ok());
    EXPECT_FALSE(*l);
    EXPECT_EQ(pool->stats().misses, 1u);
}

TEST_F(ChunkPoolTest, FullDeviceDropsLruAndGetPromotesBitExact) {
    // Room for two 4-token chunks on the device, three on the host, the rest on disk.
    auto pool = open(2 * bytes_of(4), 3 * bytes_of(4));
    const ChunkIdentity a = ident("a"), b = ident("b"), c = ident("c"), d = ident("d");
    put(*pool, a, 4);
    put(*pool, b, 4);
    ASSERT_TRUE(pool->get(a).ok());  // a is now the most recent: b is the LRU
    put(*pool, c, 4);                // b's device copy is dropped: its host copy remains
    EXPECT_EQ(pool->tier_of(b), ChunkTier::Host);
    EXPECT_EQ(pool->tier_of(a), ChunkTier::Device);
    EXPECT_EQ(pool->tier_of(c), ChunkTier::Device);
    EXPECT_EQ(pool->stats().host.chunks, 3u);              // inclusive: a and c are there too
    EXPECT_EQ(pool->stats().bytes_down, 3 * bytes_of(4));  // each new encoding, once
    put(*pool, d, 4);  // a leaves the device; the full host tier writes b to disk
    EXPECT_EQ(pool->tier_of(a), ChunkTier::Host);
    EXPECT_EQ(pool->tier_of(b), ChunkTier::Disk);
    EXPECT_TRUE(fs::exists(path_of(b)));
    EXPECT_EQ(pool->stats().bytes_down, 4 * bytes_of(4));  // dropping copied nothing back
    pool->check_invariants();

    // From disk, through the host tier (which writes a out), onto the device (where c, the
    // LRU chunk, makes room).
    auto lb = pool->get(b);
    ASSERT_TRUE(lb.ok()) << lb.error().message;
    EXPECT_TRUE(holds(*lb, b, 4));
    EXPECT_EQ(pool->tier_of(b), ChunkTier::Device);
    EXPECT_TRUE(fs::exists(path_of(b)));  // a file, once written, stays
    EXPECT_EQ(pool->tier_of(a), ChunkTier::Disk);
    EXPECT_EQ(pool->tier_of(c), ChunkTier::Host);
    lb->reset();
    auto lc = pool->get(c);  // up again from its host copy
    ASSERT_TRUE(lc.ok());
    EXPECT_TRUE(holds(*lc, c, 4));
    lc->reset();
    auto la = pool->get(a);
    ASSERT_TRUE(la.ok());
    EXPECT_TRUE(holds(*la, a, 4));
    la->reset();
    pool->check_invariants();

    const ChunkPoolStats s = pool->stats();
    EXPECT_EQ(pool->size(), 4u);
    EXPECT_LE(s.device.bytes, 2 * bytes_of(4));
    EXPECT_LE(s.host.bytes, 3 * bytes_of(4));
    EXPECT_EQ(s.disk_hits, 2u);
    EXPECT_EQ(s.host_hits, 1u);
    EXPECT_EQ(s.device_hits, 1u);
    EXPECT_EQ(s.promotions, 3u);
    EXPECT_EQ(s.bytes_up, 3 * bytes_of(4));
    EXPECT_EQ(s.bytes_read, 2 * bytes_of(4));
    EXPECT_EQ(s.corruptions, 0u);
}

TEST_F(ChunkPoolTest, LeasedChunksAreNeverDropped) {
    auto pool = open(2 * bytes_of(4), 8 * bytes_of(4));
    const ChunkIdentity a = ident("a"), b = ident("b"), c = ident("c");
    auto la = put_chunk(*pool, a, 4);
    ASSERT_TRUE(la.ok());
    put(*pool, b, 4);
    put(*pool, c, 4);  // a is the LRU but leased: b goes instead
    EXPECT_EQ(pool->tier_of(a), ChunkTier::Device);
    EXPECT_EQ(pool->tier_of(b), ChunkTier::Host);
    EXPECT_EQ(pool->stats().pinned_chunks, 1u);
    // Both device places leased: a third chunk cannot come up, and that is an Error, not a
    // silent drop of a chunk in use.
    auto lc = pool->get(c);
    ASSERT_TRUE(lc.ok());
    auto lb = pool->get(b);
    EXPECT_FALSE(lb.ok());
    EXPECT_EQ(lb.error().kind, ErrorKind::Unavailable);
    EXPECT_FALSE(pool->allocate_device(bytes_of(4)).ok());
    EXPECT_TRUE(holds(*la, a, 4));
    la->reset();
    lb = pool->get(b);
    ASSERT_TRUE(lb.ok()) << lb.error().message;
    EXPECT_TRUE(holds(*lb, b, 4));
    EXPECT_TRUE(holds(*lc, c, 4));
    EXPECT_EQ(pool->tier_of(a), ChunkTier::Host);
    pool->check_invariants();
}

// serve_from_host: with the device tier full of leased chunks (or too small), chunks are leased
// where they lie in host memory, bit-exact, read from disk into the host tier first when they
// sit there; a new encoding goes to host memory; a chunk leased in host memory never moves.
TEST_F(ChunkPoolTest, WithoutDeviceRoomChunksAreServedFromHost) {
    auto pool = open(2 * bytes_of(4), 5 * bytes_of(4), /*disk=*/true, /*serve_from_host=*/true);
    const ChunkIdentity a = ident("a"), b = ident("b"), c = ident("c"), big = ident("big");
    auto la = put_chunk(*pool, a, 4);
    auto lb = put_chunk(*pool, b, 4);
    ASSERT_TRUE(la.ok() && lb.ok());
    {
        auto lc = put_chunk(*pool, c, 4);  // no device room: encoded into the host tier
        ASSERT_TRUE(lc.ok()) << lc.error().message;
        EXPECT_TRUE(holds(*lc, c, 4));
        EXPECT_TRUE(lc->ready());
        EXPECT_EQ(pool->tier_of(c), ChunkTier::Host);
        pool->check_invariants();
    }
    auto lc = pool->get(c);
    ASSERT_TRUE(lc.ok()) << lc.error().message;
    auto again = pool->get(c);  // a second lease of the same host memory
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(holds(*lc, c, 4) && holds(*again, c, 4));
    EXPECT_EQ(lc->get()->data(), again->get()->data());
    EXPECT_EQ(pool->tier_of(c), ChunkTier::Host);
    EXPECT_EQ(pool->stats().served_from_host, 2u);
    pool->check_invariants();
    ASSERT_TRUE(pool->flush().ok());  // a leased chunk is not written out
    EXPECT_FALSE(fs::exists(path_of(c)));
    EXPECT_TRUE(holds(*lc, c, 4));
    lc->reset();
    again->reset();
    ASSERT_TRUE(pool->flush().ok());
    EXPECT_TRUE(fs::exists(path_of(c)));
    EXPECT_EQ(pool->tier_of(c), ChunkTier::Host);  // the flush wrote it and kept it
    pool->check_invariants();

    // Larger than the whole device tier: encoded into, and served from, host memory; the
    // chunks on the device stay.
    la->reset();
    lb->reset();
    const std::uint64_t demotions = pool->stats().demotions;
    auto lbig = put_chunk(*pool, big, 12);
    ASSERT_TRUE(lbig.ok()) << lbig.error().message;
    EXPECT_TRUE(holds(*lbig, big, 12));
    EXPECT_EQ(pool->tier_of(big), ChunkTier::Host);
    lbig->reset();
    auto in_place = pool->get(big);
    ASSERT_TRUE(in_place.ok());
    EXPECT_TRUE(holds(*in_place, big, 12));
    EXPECT_EQ(pool->tier_of(a), ChunkTier::Device);
    EXPECT_EQ(pool->tier_of(b), ChunkTier::Device);
    EXPECT_EQ(pool->stats().demotions - demotions, 1u);  // c's host copy, for big's room
    EXPECT_EQ(pool->tier_of(c), ChunkTier::Disk);
    pool->check_invariants();

    // From disk with the device full of leased chunks: read into the host tier, leased there.
    in_place->reset();
    la = pool->get(a);
    lb = pool->get(b);
    ASSERT_TRUE(la.ok() && lb.ok());
    lc = pool->get(c);
    ASSERT_TRUE(lc.ok()) << lc.error().message;
    EXPECT_TRUE(holds(*lc, c, 4));
    EXPECT_EQ(pool->tier_of(c), ChunkTier::Host);
    EXPECT_EQ(pool->tier_of(big), ChunkTier::Disk);
    // Erased under its lease: gone from the pool, its memory kept until the lease ends.
    EXPECT_EQ(pool->erase("c"), 1u);
    EXPECT_FALSE(pool->tier_of(c).has_value());
    EXPECT_FALSE(fs::exists(path_of(c)));
    EXPECT_TRUE(holds(*lc, c, 4));
    lc->reset();
    pool->collect();
    pool->check_invariants();

    // Once a device chunk is unleased, a host chunk goes up in its place.
    la->reset();
    auto up = pool->get(big);
    ASSERT_TRUE(up.ok());
    EXPECT_EQ(pool->tier_of(big), ChunkTier::Host);  // 12 tokens never fit the device
    up->reset();
    const ChunkIdentity d = ident("d");
    put(*pool, d, 4);
    EXPECT_EQ(pool->tier_of(d), ChunkTier::Device);
    EXPECT_NE(pool->tier_of(a), ChunkTier::Device);  // d's copy down pushed it on to disk
    lb->reset();
    // The device is full of unleased chunks: a promotion would drop one of them, so a is read
    // in place instead.
    const std::uint64_t promotions = pool->stats().promotions;
    auto in_host = pool->get(a);
    ASSERT_TRUE(in_host.ok());
    EXPECT_TRUE(holds(*in_host, a, 4));
    EXPECT_EQ(pool->tier_of(a), ChunkTier::Host);
    EXPECT_EQ(pool->tier_of(b), ChunkTier::Device);
    EXPECT_EQ(pool->tier_of(d), ChunkTier::Device);
    EXPECT_EQ(pool->stats().promotions, promotions);
    in_host->reset();
    pool->check_invariants();
}

TEST_F(ChunkPoolTest, TooBigForTheDeviceIsAnError) {
    auto pool = open(bytes_of(2), bytes_of(8));
    auto l = put_chunk(*pool, ident("big"), 8);
    ASSERT_FALSE(l.ok());
    EXPECT_EQ(l.error().kind, ErrorKind::Unavailable);
    EXPECT_EQ(pool->size(), 0u);
    // Memory that is not the pool's is refused.
    tensor::Buffer foreign = be_.allocate(bytes_of(1)).value();
    EXPECT_FALSE(pool->put(KvChunk(ident("x"), {1}, kLayers, kHeads, kDim, tensor::DType::F32,
                                   std::move(foreign)))
                     .ok());
}

TEST_F(ChunkPoolTest, DiskTierSurvivesARestartBitExact) {
    const ChunkIdentity a = ident("a", 2), b = ident("b");
    {
        auto pool = open(bytes_of(16), bytes_of(16));
        put(*pool, a, 5, 9);
        put(*pool, b, 3, 4);
    }  // closing flushes both to disk
    auto pool = open(bytes_of(16), bytes_of(16));
    EXPECT_EQ(pool->tier_of(a), ChunkTier::Disk);
    EXPECT_EQ(pool->stats().disk.chunks, 2u);
    EXPECT_EQ(pool->stats().disk.bytes, bytes_of(5) + bytes_of(3));
    auto la = pool->get(a);
    ASSERT_TRUE(la.ok());
    EXPECT_TRUE(holds(*la, a, 5, 9));
    EXPECT_EQ((*la)->token_ids()[1], 10);
    // Another window is another chunk.
    EXPECT_FALSE(*pool->get(ident("a", 3)));
    la->reset();
    pool->check_invariants();
}

TEST_F(ChunkPoolTest, CorruptDiskChunksAreNeverReturned) {
    const ChunkIdentity flipped = ident("flipped"), cut = ident("cut"), head = ident("head");
    {
        auto pool = open(bytes_of(16), bytes_of(16));
        for (const auto& id : {flipped, cut, head}) put(*pool, id, 4);
    }
    {  // one payload byte flipped, a truncated file, a damaged header (found at open)
        std::fstream f(path_of(flipped), std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-7, std::ios::end);
        f.put('\x5a');
        fs::resize_file(path_of(cut), fs::file_size(path_of(cut)) - 3);
        std::fstream h(path_of(head), std::ios::in | std::ios::out | std::ios::binary);
        h.seekp(20);
        h.put('\x7f');
    }
    auto pool = open(bytes_of(16), bytes_of(16));
    EXPECT_FALSE(pool->tier_of(head).has_value());
    EXPECT_FALSE(fs::exists(path_of(head)));
    for (const auto& id : {flipped, cut}) {
        auto l = pool->get(id);
        ASSERT_TRUE(l.ok());
        EXPECT_FALSE(*l) << id.fact_id;
        EXPECT_FALSE(fs::exists(path_of(id)));
        EXPECT_FALSE(pool->tier_of(id).has_value());
    }
    EXPECT_EQ(pool->stats().corruptions, 3u);
    // The caller re-encodes (as MemoryRuntime does on a miss) and the fresh chunk is served.
    put(*pool, flipped, 4, 2);
    auto l = pool->get(flipped);
    EXPECT_TRUE(holds(*l, flipped, 4, 2));
    l->reset();
    pool->check_invariants();
}

TEST_F(ChunkPoolTest, EraseRemovesAFactFromEveryTier) {
    auto pool = open(bytes_of(4), 2 * bytes_of(4));
    // One fact in three encodings: one lands in each tier.
    const ChunkIdentity d0 = ident("f", 0), d1 = ident("f", 1), d2 = ident("f", 2);
    put(*pool, d0, 4);
    put(*pool, d1, 4);
    put(*pool, d2, 4);  // d1 leaves the device; the host tier writes d0 to disk
    ASSERT_EQ(pool->tier_of(d0), ChunkTier::Disk);
    ASSERT_EQ(pool->tier_of(d1), ChunkTier::Host);
    ASSERT_EQ(pool->tier_of(d2), ChunkTier::Device);
    put(*pool, ident("other"), 2);
    const std::string fact_dir = chunk_fact_dir(dir_.file("chunks"), "f");
    ASSERT_TRUE(fs::exists(fact_dir));
    EXPECT_EQ(pool->erase("f"), 3u);
    for (const auto& id : {d0, d1, d2}) {
        EXPECT_FALSE(pool->tier_of(id).has_value());
        EXPECT_FALSE(*pool->get(id));
    }
    EXPECT_FALSE(fs::exists(fact_dir));
    EXPECT_TRUE(pool->tier_of(ident("other")).has_value());
    EXPECT_EQ(pool->stats().erased, 3u);
    pool->check_invariants();
}

TEST_F(ChunkPoolTest, ErasingALeasedChunkKeepsItsMemoryUntilTheLeaseEnds) {
    auto pool = open(bytes_of(8), bytes_of(8));
    const ChunkIdentity a = ident("a");
    auto l = put_chunk(*pool, a, 4);
    ASSERT_TRUE(l.ok());
    EXPECT_EQ(pool->erase("a"), 1u);
    EXPECT_FALSE(pool->tier_of(a).has_value());
    EXPECT_TRUE(holds(*l, a, 4));  // still readable by the request that holds it
    EXPECT_EQ(pool->stats().retired_bytes, bytes_of(4));
    pool->check_invariants();
    l->reset();
    pool->collect();
    EXPECT_EQ(pool->stats().retired_bytes, 0u);
    EXPECT_FALSE(*pool->get(a));
}

TEST_F(ChunkPoolTest, StoreDeletesDropChunksEverywhere) {
    auto store = memory::MemoryStore::open(dir_.file("memory.db")).value();
    auto pool = open(bytes_of(4), 2 * bytes_of(4));
    engine::ChunkInvalidator inval(*pool);
    ASSERT_TRUE(store->add_listener(&inval, false).ok());
    const memory::Fact f1 = store->add_fact("ann", {"Ann has a cat.", {}, ""}).value();
    const memory::Fact f2 = store->add_fact("ann", {"Ann lives in Oslo.", {}, ""}).value();
    const memory::Fact f3 = store->add_fact("bob", {"Bob plays chess.", {}, ""}).value();
    std::vector<ChunkIdentity> ids;
    for (const auto* f : {&f1, &f2, &f3}) ids.push_back(ident(engine::chunk_fact_id(f->id)));
    for (const auto& id : ids) put(*pool, id, 4);  // one per tier
    ASSERT_EQ(pool->stats().disk.chunks, 1u);

    ASSERT_TRUE(store->delete_fact(f3.id).ok());
    EXPECT_FALSE(pool->tier_of(ids[2]).has_value());
    ASSERT_TRUE(store->delete_user("ann").ok());
    EXPECT_EQ(pool->size(), 0u);
    EXPECT_EQ(inval.chunks_dropped(), 3u);
    EXPECT_TRUE(fs::is_empty(dir_.file("chunks")));
    store->remove_listener(&inval);
    pool->check_invariants();
}

// An encoding that ends after its fact changed was put after the listener's erase ran: the
// check after the put drops chunks of deleted and changed facts, and only those.
TEST_F(ChunkPoolTest, StaleEncodingsAreErasedAfterThePut) {
    auto store = memory::MemoryStore::open(dir_.file("memory.db")).value();
    auto pool = open(8 * bytes_of(4), 8 * bytes_of(4));
    const memory::Fact f1 = store->add_fact("ann", {"Ann has a cat.", {}, ""}).value();
    const memory::Fact f2 = store->add_fact("ann", {"Ann lives in Oslo.", {}, ""}).value();
    const memory::Fact f3 = store->add_fact("bob", {"Bob plays chess.", {}, ""}).value();
    std::vector<engine::MemoryFact> encoded(4);
    for (std::size_t i = 0; const auto* f : {&f1, &f2, &f3}) {
        encoded[i].id = engine::chunk_fact_id(f->id);
        encoded[i++].text = f->text;
    }
    encoded[3].id = "scaffold-7";
    encoded[3].text = "not a store fact";
    for (const auto& f : encoded) put(*pool, ident(f.id), 4);
    ASSERT_TRUE(store->update_fact(f2.id, "Ann lives in Bergen.").ok());
    ASSERT_TRUE(store->delete_fact(f3.id).ok());

    auto erased = engine::erase_stale_chunks(*store, *pool, encoded);
    ASSERT_TRUE(erased.ok()) << erased.error().message;
    EXPECT_EQ(*erased, 2u);
    EXPECT_TRUE(pool->tier_of(ident(encoded[0].id)).has_value());
    EXPECT_FALSE(pool->tier_of(ident(encoded[1].id)).has_value());
    EXPECT_FALSE(pool->tier_of(ident(encoded[2].id)).has_value());
    EXPECT_TRUE(pool->tier_of(ident(encoded[3].id)).has_value());
    EXPECT_EQ(*engine::erase_stale_chunks(*store, *pool, encoded), 0u);
    pool->check_invariants();
}

TEST_F(ChunkPoolTest, GetManyPromotesABatchAndKeepsOrder) {
    auto pool = open(3 * bytes_of(4), 5 * bytes_of(4));
    std::vector<ChunkIdentity> ids;
    for (int i = 0; i < 5; ++i) ids.push_back(ident("f" + std::to_string(i)));
    for (const auto& id : ids) put(*pool, id, 4);  // f0 and f1 on the host, f2..f4 device
    const std::vector<ChunkIdentity> want = {ids[0], ident("missing"), ids[1], ids[4]};
    auto leases = pool->get_many(want);
    ASSERT_TRUE(leases.ok()) << leases.error().message;
    EXPECT_TRUE(holds((*leases)[0], ids[0], 4));
    EXPECT_FALSE((*leases)[1]);
    EXPECT_TRUE(holds((*leases)[2], ids[1], 4));
    EXPECT_TRUE(holds((*leases)[3], ids[4], 4));
    EXPECT_EQ(pool->stats().promotions, 2u);
    leases->clear();
    pool->check_invariants();
}

// Once open, the pool never asks the backend for memory or waits for it: drops are free, and
// promotions and copies down are issued beside compute.
TEST_F(ChunkPoolTest, OpenPoolNeitherAllocatesNorWaits) {
    struct CountingBackend : backends::cpu::CpuBackend {
        Result<tensor::Buffer> allocate(std::size_t bytes) override {
            ++allocations;
            return CpuBackend::allocate(bytes);
        }
        void* allocate_host(std::size_t bytes) override {
            ++allocations;
            return CpuBackend::allocate_host(bytes);
        }
        void synchronize() override { ++waits; }
        void wait_for(std::uint64_t fence, std::uint64_t ticket) override { ++waits; }
        int allocations = 0, waits = 0;
    } be;
    ChunkPoolOptions o;
    o.device_capacity_bytes = 4 * bytes_of(4);
    o.host_capacity_bytes = 16 * bytes_of(4);
    auto pool = ChunkPool::open(be, o).value();
    EXPECT_EQ(be.allocations, 2);  // the two slabs
    be.allocations = 0;
    std::vector<ChunkIdentity> ids;
    for (int i = 0; i < 12; ++i) {
        ids.push_back(ident("f" + std::to_string(i)));
        ASSERT_TRUE(put_chunk(*pool, ids.back(), 4, 5).ok());
    }
    std::mt19937 rng(7);
    for (int round = 0; round < 200; ++round) {
        std::vector<ChunkIdentity> want;
        for (int j = 0; j < 3; ++j) want.push_back(ids[rng() % ids.size()]);
        auto leases = pool->get_many(want);
        ASSERT_TRUE(leases.ok()) << leases.error().message;
        for (std::size_t j = 0; j < want.size(); ++j)
            ASSERT_TRUE(holds((*leases)[j], want[j], 4, 5)) << want[j].fact_id;
    }
    EXPECT_EQ(be.allocations, 0);
    EXPECT_EQ(be.waits, 0);
    EXPECT_GT(pool->stats().promotions, 100u);
    EXPECT_EQ(pool->stats().bytes_down, 12 * bytes_of(4));
    pool->check_invariants();
}

// Many users and facts, random puts, gets, erases and restarts under pressure from small tiers;
// after every step the pool's accounting must match its entries, no erased fact may return, a
// replaced encoding is never served stale, and every held lease still reads its own bytes.
TEST_F(ChunkPoolTest, RandomizedOperationsKeepTheInvariants) {
    std::mt19937 rng(1234);
    const std::size_t device = 6 * bytes_of(4), host = 9 * bytes_of(4);
    auto pool = open(device, host);
    std::map<std::string, std::pair<std::int64_t, std::uint32_t>> live;  // key -> tokens, seed
    std::map<std::string, ChunkIdentity> idents;
    std::set<std::string> erased_facts;
    int next_fact = 0;
    auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
    struct Held {
        ChunkLease lease;
        ChunkIdentity id;
        std::int64_t tokens;
        std::uint32_t seed;
    };
    std::vector<Held> held;
    for (int step = 0; step < 1500; ++step) {
        const int op = pick(100);
        if (op < 35 || live.empty()) {
            // A new fact (new ids are never reused, like the store's) or a new encoding.
            std::string fact = "u" + std::to_string(pick(7)) + "/f" + std::to_string(next_fact++);
            if (!live.empty() && pick(3) == 0) fact = idents[live.begin()->first].fact_id;
            const ChunkIdentity id = ident(fact, pick(3));
            const std::int64_t tokens = 1 + pick(5);
            const auto seed = static_cast<std::uint32_t>(step);
            auto l = put_chunk(*pool, id, tokens, seed);
            if (l.ok()) {  // else too much is leased right now, and nothing changed
                live[id.key()] = {tokens, seed};
                idents[id.key()] = id;
                if (pick(4) == 0) held.push_back({std::move(*l), id, tokens, seed});
            }
        } else if (op < 75) {
            auto it = idents.begin();
            std::advance(it, pick(static_cast<int>(idents.size())));
            const ChunkIdentity id = it->second;
            auto l = pool->get(id);
            if (!l.ok()) continue;  // too much is leased right now
            const bool erased = erased_facts.count(id.fact_id) > 0;
            if (erased || !live.count(id.key())) {
                EXPECT_FALSE(*l) << id.key();
            } else {
                ASSERT_TRUE(*l) << id.key();
                const auto [tokens, seed] = live[id.key()];
                EXPECT_TRUE(holds(*l, id, tokens, seed)) << id.key();
                if (pick(3) == 0) held.push_back({std::move(*l), id, tokens, seed});
            }
        } else if (op < 85) {
            auto it = idents.begin();
            std::advance(it, pick(static_cast<int>(idents.size())));
            const std::string fact = it->second.fact_id;
            pool->erase(fact);
            erased_facts.insert(fact);
            for (auto k = live.begin(); k != live.end();)
                k = idents[k->first].fact_id == fact ? live.erase(k) : std::next(k);
        } else if (op < 95) {
            if (!held.empty()) held.erase(held.begin() + pick(static_cast<int>(held.size())));
        } else if (op < 97) {
            held.clear();
            pool.reset();  // flushes to disk
            pool = open(device, host);
            EXPECT_EQ(pool->size(), live.size());
        } else {
            held.clear();
        }
        for (const Held& h : held) ASSERT_TRUE(holds(h.lease, h.id, h.tokens, h.seed)) << step;
        pool->check_invariants();
        const ChunkPoolStats s = pool->stats();
        ASSERT_EQ(pool->size(), live.size());
        ASSERT_LE(s.device.bytes + s.retired_bytes, device);
        ASSERT_LE(s.host.bytes, host);
    }
    for (const auto& fact : erased_facts)
        for (int w = 0; w < 3; ++w) EXPECT_FALSE(*pool->get(ident(fact, w)));
    held.clear();
    EXPECT_EQ(pool->stats().corruptions, 0u);
}

}  // namespace
}  // namespace inferscale::memory
