// CudaBackend::dot_top_k against the CPU backend's op. Matrices of multiples of 1/8 make every dot
// product exact in f32 and f16 whatever the summation order, so rows and scores must match exactly,
// ties included (they are frequent with such values); sizes cross the selection's chunk (2048) and
// its multi-pass range, k up to the op's limit and past n. Random normal rows check the rounding of
// real embeddings within f32 tolerance.

#include <algorithm>
#include <limits>

#include "cuda_test_util.h"
#include "memory/device_user_vectors.h"
#include "memory/device_vector_index.h"
#include "retrieval/vector_index.h"

namespace inferscale::cuda_test {
namespace {

struct TopK {
    std::vector<std::int32_t> rows;
    std::vector<float> scores;
};

class CudaDotTopKTest : public CudaTest {
  protected:
    std::vector<float> eighths(std::size_t count) {
        std::uniform_int_distribution<int> dist(-3, 3);
        std::vector<float> v(count);
        for (float& x : v) x = static_cast<float>(dist(rng_)) / 8.0f;
        return v;
    }

    // The op on both backends: the matrix stored as `dtype` on each.
    std::pair<TopK, TopK> both(const std::vector<float>& m, std::vector<float> q, DType dtype,
                               std::int64_t n, std::int64_t k) {
        const auto dim = static_cast<std::int64_t>(q.size());
        std::vector<std::uint16_t> narrow(m.size());
        const void* data = m.data();
        if (dtype == DType::F16) {
            tensor::convert_from_f32(DType::F16, m.data(), narrow.data(), m.size());
            data = narrow.data();
        }
        TopK cpu{std::vector<std::int32_t>(k), std::vector<float>(k)};
        cpu_.dot_top_k(Tensor(const_cast<void*>(data), dtype, {n, dim}), host_view(q, {dim}),
                       host_view(cpu.rows, {k}), host_view(cpu.scores, {k}));

        DeviceTensor d_m = device_empty(*gpu_, dtype, {n, dim});
        if (n > 0) gpu_->copy_from_host(d_m.tensor, data, d_m.tensor.nbytes());
        DeviceTensor d_q = device_from(*gpu_, q, DType::F32, {dim});
        DeviceTensor d_rows = device_empty(*gpu_, DType::I32, {k});
        DeviceTensor d_scores = device_empty(*gpu_, DType::F32, {k});
        poison(*gpu_, d_rows.tensor);
        poison(*gpu_, d_scores.tensor);
        gpu_->dot_top_k(d_m.tensor, d_q.tensor, d_rows.tensor, d_scores.tensor);
        TopK gpu{std::vector<std::int32_t>(k), download(*gpu_, d_scores.tensor)};
        gpu_->copy_to_host(gpu.rows.data(), d_rows.tensor, k * sizeof(std::int32_t));
        gpu_->synchronize();
        return {std::move(cpu), std::move(gpu)};
    }
};

TEST_F(CudaDotTopKTest, ExactScoresMatchTheCpuOpTiesAndPaddingIncluded) {
    for (std::int64_t dim : {384, 20, 37}) {
        for (std::int64_t n : std::vector<std::int64_t>{0, 1, 7, 2048, 2049, 10000, 100000}) {
            if (dim != 384 && n > 10000) continue;
            const auto m = eighths(static_cast<std::size_t>(n * dim));
            const auto q = eighths(static_cast<std::size_t>(dim));
            for (std::int64_t k : {std::int64_t{1}, std::int64_t{10}, std::int64_t{100},
                                   std::int64_t{1024}, std::min<std::int64_t>(n + 5, 1024)}) {
                for (DType dtype : {DType::F32, DType::F16}) {
                    SCOPED_TRACE("dim " + std::to_string(dim) + " n " + std::to_string(n) + " k " +
                                 std::to_string(k) + " " + std::string(tensor::dtype_name(dtype)));
                    const auto [cpu, gpu] = both(m, q, dtype, n, k);
                    EXPECT_EQ(gpu.rows, cpu.rows);
                    EXPECT_EQ(gpu.scores, cpu.scores);
                }
            }
        }
    }
}

TEST_F(CudaDotTopKTest, RandomRowsMatchTheCpuOpWithinF32Rounding) {
    const std::int64_t n = 20000, dim = 384, k = 100;
    std::normal_distribution<float> dist;
    std::vector<float> m(static_cast<std::size_t>(n * dim)), q(static_cast<std::size_t>(dim));
    for (float& x : m) x = dist(rng_);
    for (float& x : q) x = dist(rng_);
    const auto [cpu, gpu] = both(m, q, DType::F32, n, k);
    // f32 sums in two orders differ by a few ulps of |row| |q| ~ 400, so places may only swap
    // between rows that close; each GPU row's own score (in double) must be what it reports.
    const double tol = 1e-3;
    for (std::int64_t j = 0; j < k; ++j) {
        EXPECT_NEAR(gpu.scores[j], cpu.scores[j], tol) << "place " << j;
        ASSERT_GE(gpu.rows[j], 0);
        double exact = 0.0;
        for (std::int64_t i = 0; i < dim; ++i) exact += double{m[gpu.rows[j] * dim + i]} * q[i];
        EXPECT_NEAR(gpu.scores[j], exact, tol) << "place " << j;
    }
}

// The device mirror on the GPU ranks as the host index does: exact scores, ties by fact id (runs of
// one vector under descending ids make tie groups wider than k and against row order).
TEST_F(CudaDotTopKTest, DeviceVectorIndexMatchesVectorIndex) {
    const std::size_t dim = 384;
    auto created = memory::DeviceVectorIndex::create(*gpu_, dim, 16);
    ASSERT_TRUE(created.ok()) << created.error().message;
    memory::DeviceVectorIndex& device = **created;
    retrieval::VectorIndex host(dim);
    const auto shared = eighths(dim);
    for (retrieval::FactId id = 12000; id > 0; --id) {
        const auto v = id % 97 == 0 ? shared : eighths(dim);
        ASSERT_TRUE(device.upsert(id, v).ok());
        host.upsert("u", id, v);
    }
    for (retrieval::FactId id = 1; id < 3000; id += 7) {
        EXPECT_EQ(device.remove(id), host.remove(id));
    }
    for (const auto& q : {shared, eighths(dim), eighths(dim)}) {
        // Up to 500: the mirror widens its request up to kDotTopKMax (1024) places to take in
        // the tie group at the k-th place, and these vectors tie in groups of tens.
        for (std::size_t k : {1, 10, 100, 500}) {
            EXPECT_EQ(device.search(q, k), host.search("u", q, k)) << "k " << k;
        }
    }
}

// What the server searches on the GPU: every user's mirror (DeviceUserVectors) through puts, moves
// between users, erases and user deletions, equal to the host index user by user.
TEST_F(CudaDotTopKTest, DeviceUserVectorsMatchVectorIndexAcrossUsers) {
    const std::size_t dim = 384;
    memory::DeviceUserVectors device(*gpu_, dim);
    retrieval::VectorIndex host(dim);
    const std::vector<std::string> users = {"a", "b", "c"};
    for (int step = 0; step < 2000; ++step) {
        const auto id = static_cast<retrieval::FactId>(rng_() % 600);
        const std::string& user = users[rng_() % users.size()];
        const int op = static_cast<int>(rng_() % 100);
        if (op < 75) {
            const auto v = eighths(dim);
            ASSERT_TRUE(device.put(user, id, v).ok());
            host.upsert(user, id, v);
        } else if (op < 99) {
            device.erase(id);
            host.remove(id);
        } else {
            device.erase_user(user);
            host.remove_user(user);
        }
    }
    for (int i = 0; i < 3; ++i) {
        const auto q = eighths(dim);
        for (const std::string& u : users)
            for (std::size_t k : {1, 10, 100})
                EXPECT_EQ(*device.nearest(u, q, k), host.search(u, q, k)) << u << " k " << k;
    }
}

}  // namespace
}  // namespace inferscale::cuda_test
