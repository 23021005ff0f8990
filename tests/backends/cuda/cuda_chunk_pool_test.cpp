// ChunkPool on the GPU: promotions from the host tier copy on the backend's transfer stream.
// With ordered = false get_many returns before the bytes arrive and ChunkLease::ready() turns
// true once they have; with ordered = true the compute stream waits for them on the device, so
// a read issued right after sees the promoted bytes. Either way the chunk is bit-exact. The
// copies go layer group by layer group: a read of one layer ordered after that layer's ticket
// sees its bytes, and the tickets of several chunks' first layers all come before any chunk's
// last layers'. The pinned host buffers under the host tier are reused by size
// (PinnedHostCache). The host copies the promotions read were themselves copied down
// asynchronously when the chunks were put.

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "backends/cuda/pinned_host_cache.h"
#include "cuda_test_util.h"
#include "memory/chunk_pool.h"

namespace inferscale::cuda_test {
namespace {

constexpr std::int64_t kLayers = 4, kHeads = 8, kDim = 128, kTokens = 256;
constexpr std::size_t kBytes = kLayers * 2 * kTokens * kHeads * kDim * sizeof(float);  // 8 MiB

memory::ChunkIdentity ident(int i) {
    return {"fact" + std::to_string(i), memory::text_hash(std::to_string(i)), "test", 0,
            memory::EncodingMode::Standalone};
}

std::vector<float> contents(int i) {
    std::vector<float> v(kBytes / sizeof(float));
    for (std::size_t j = 0; j < v.size(); ++j)
        v[j] = static_cast<float>((j * 2654435761u + i) % 100003);
    return v;
}

class CudaChunkPoolTest : public CudaTest {
  protected:
    // Chunks 0..n-1 in the host tier; the device tier holds `device_chunks` chunks (the last
    // ones put).
    std::unique_ptr<memory::ChunkPool> pool_with_all_on_host(int n, int device_chunks = 1) {
        memory::ChunkPoolOptions o;
        o.device_capacity_bytes = kBytes * static_cast<std::size_t>(device_chunks);
        o.host_capacity_bytes = kBytes * static_cast<std::size_t>(n + device_chunks);
        auto pool = memory::ChunkPool::open(*gpu_, o);
        EXPECT_TRUE(pool.ok()) << pool.error().message;
        for (int i = 0; i < n + device_chunks; ++i) {
            const std::vector<float> v = contents(i);
            tensor::Buffer buf = (*pool)->allocate_device(kBytes).value();
            gpu_->copy_from_host(buf.view(DType::F32, {static_cast<std::int64_t>(v.size())}),
                                 v.data(), kBytes);
            gpu_->synchronize();
            auto lease =
                (*pool)->put(memory::KvChunk(ident(i), std::vector<std::int32_t>(kTokens, 1),
                                             kLayers, kHeads, kDim, DType::F32, std::move(buf)));
            EXPECT_TRUE(lease.ok()) << lease.error().message;
        }
        // The last puts hold the device tier; 0..n-1 sit in host memory now, copied down on the
        // transfer stream as they were put.
        for (int i = 0; i < n; ++i)
            EXPECT_EQ((*pool)->tier_of(ident(i)), memory::ChunkTier::Host) << i;
        return std::move(pool).value();
    }

    std::vector<float> read(const memory::KvChunk& c) {
        std::vector<float> out(kBytes / sizeof(float));
        const Tensor all(const_cast<void*>(c.data()), DType::F32,
                         {static_cast<std::int64_t>(out.size())}, tensor::Device::Cuda);
        gpu_->copy_to_host(out.data(), all, kBytes);
        gpu_->synchronize();
        return out;
    }
};

TEST_F(CudaChunkPoolTest, UnorderedPromotionsBecomeReadyAndAreBitExact) {
    auto pool = pool_with_all_on_host(1);
    const memory::ChunkIdentity id = ident(0);
    auto leases = pool->get_many(std::span(&id, 1), /*ordered=*/false);
    ASSERT_TRUE(leases.ok()) << leases.error().message;
    ASSERT_TRUE((*leases)[0]);
    while (!(*leases)[0].ready()) {
    }
    EXPECT_EQ(read(*(*leases)[0]), contents(0));
    EXPECT_EQ(pool->stats().promotions, 1u);
}

// The transfer stream's totals count the promotion's bytes (and the copies down of the puts)
// with device time that puts their rate near, and not above, the pinned upload rate the pool
// measured when it opened.
TEST_F(CudaChunkPoolTest, TransferTotalsTimeThePromotions) {
    const tensor::TransferTotals before = gpu_->transfer_totals();
    auto pool = pool_with_all_on_host(1);
    const double limit = pool->stats().upload_limit_bytes_per_s;
    EXPECT_GT(limit, 1e9);
    const memory::ChunkIdentity id = ident(0);
    auto leases = pool->get_many(std::span(&id, 1), /*ordered=*/false);
    ASSERT_TRUE(leases.ok()) << leases.error().message;
    while (!(*leases)[0].ready()) {
    }
    const tensor::TransferTotals after = gpu_->transfer_totals();
    EXPECT_EQ(after.up_bytes - before.up_bytes, kBytes);
    EXPECT_GE(after.down_bytes - before.down_bytes, kBytes);
    const double seconds = after.up_seconds - before.up_seconds;
    ASSERT_GT(seconds, 0.0);
    const double rate = static_cast<double>(kBytes) / seconds;
    std::printf("promotion of %zu bytes: %.1f GB/s, pinned upload limit %.1f GB/s\n", kBytes,
                rate / 1e9, limit / 1e9);
    EXPECT_LT(rate, 1.2 * limit);
    EXPECT_GT(rate, 0.1 * limit);
}

TEST_F(CudaChunkPoolTest, OrderedPromotionsAreSeenByTheNextComputeOp) {
    auto pool = pool_with_all_on_host(1);
    const memory::ChunkIdentity id = ident(0);
    auto leases = pool->get_many(std::span(&id, 1));
    ASSERT_TRUE(leases.ok()) << leases.error().message;
    // A read on the compute stream, issued at once, already sees the promoted bytes.
    EXPECT_EQ(read(*(*leases)[0]), contents(0));
}

TEST_F(CudaChunkPoolTest, EachLayerIsReadableAfterItsOwnTicket) {
    auto pool = pool_with_all_on_host(3, /*device_chunks=*/3);
    const memory::ChunkIdentity ids[] = {ident(0), ident(1), ident(2)};
    auto leases = pool->get_many(ids, /*ordered=*/false, memory::PromotionOrder::ByLayerGroup);
    ASSERT_TRUE(leases.ok()) << leases.error().message;
    // Group-major issue: every chunk's first layer before any chunk's last.
    std::uint64_t first_max = 0, last_min = ~std::uint64_t{0};
    for (const memory::ChunkLease& l : *leases) {
        first_max = std::max(first_max, l.layers_ticket(0));
        last_min = std::min(last_min, l.layers_ticket(kLayers - 1));
        for (std::int64_t layer = 1; layer < kLayers; ++layer)
            EXPECT_LE(l.layers_ticket(layer - 1), l.layers_ticket(layer));
    }
    EXPECT_GT(first_max, 0u);
    EXPECT_LT(first_max, last_min);
    const std::size_t layer_floats = kBytes / sizeof(float) / kLayers;
    for (std::size_t c = 0; c < 3; ++c) {
        const memory::ChunkLease& l = (*leases)[c];
        const std::vector<float> want = contents(static_cast<int>(c));
        for (std::int64_t layer = kLayers - 1; layer >= 0; --layer) {
            gpu_->order_after(l.layers_ticket(layer));
            std::vector<float> got(layer_floats);
            const Tensor bytes(static_cast<float*>(const_cast<void*>(l->data())) +
                                   layer * static_cast<std::int64_t>(layer_floats),
                               DType::F32, {static_cast<std::int64_t>(layer_floats)},
                               tensor::Device::Cuda);
            gpu_->copy_to_host(got.data(), bytes, layer_floats * sizeof(float));
            gpu_->synchronize();
            EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin() + layer * layer_floats))
                << "chunk " << c << " layer " << layer;
        }
    }
}

// The pinned buffers behind the host tier: a freed buffer comes back for the next request of
// its exact size (and keeps its bytes, being the same memory), other sizes get new memory,
// and past the cap a freed buffer is released instead of kept.
TEST_F(CudaChunkPoolTest, PinnedHostCacheReusesFreedBuffersOfTheSameSizeWithinTheCap) {
    backends::cuda::PinnedHostCache cache(3 << 20);
    void* a = cache.allocate(1 << 20);
    void* b = cache.allocate(2 << 20);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    std::memset(a, 7, 1 << 20);
    cache.free(a);
    EXPECT_EQ(cache.kept_bytes(), std::size_t{1} << 20);
    void* c = cache.allocate(3 << 20);  // no kept buffer of this size
    EXPECT_NE(c, a);
    void* again = cache.allocate(1 << 20);
    EXPECT_EQ(again, a);
    EXPECT_EQ(static_cast<unsigned char*>(again)[12345], 7);
    EXPECT_EQ(cache.kept_bytes(), 0u);
    cache.free(b);
    cache.free(c);  // 2 + 3 MiB would pass the 3 MiB cap: c is released
    EXPECT_EQ(cache.kept_bytes(), std::size_t{2} << 20);
    cache.free(again);
    EXPECT_EQ(cache.kept_bytes(), std::size_t{3} << 20);
}

}  // namespace
}  // namespace inferscale::cuda_test
