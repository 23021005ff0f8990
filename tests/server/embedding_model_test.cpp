// EmbeddingModel: encodings asked for on many threads run on the model's own thread, so the
// callers start no OpenMP threads of their own. Skips without models/all-minilm-l6-v2.

#include "apps/server/embedding_model.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "embed/embed_fixture.h"

namespace inferscale::server {
namespace {

std::size_t thread_count() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task"))
        ++n;
    return n;
}

// An OpenMP runtime keeps a team for each thread that starts a parallel region; callers that
// live on (the server's HTTP threads) must not each get one.
TEST(EmbeddingModelTest, CallersOnManyThreadsStartNoThreadsOfTheirOwn) {
    if (!embed::testing::model_present()) GTEST_SKIP() << embed::testing::kSkipMessage;
    if (omp_get_max_threads() < 2) GTEST_SKIP() << "one OpenMP thread: no team to leave behind";
    auto model = EmbeddingModel::load(embed::testing::model_dir(), engine::BackendChoice{});
    ASSERT_TRUE(model.ok()) << model.error().message;
    const std::vector<std::string> texts = {"My dog is called Biscuit.", "I live in Lisbon."};
    auto first = (*model)->embed(texts);
    ASSERT_TRUE(first.ok()) << first.error().message;
    const std::size_t before = thread_count();

    constexpr int kCallers = 6;
    std::latch embedded(kCallers), release(1);
    std::vector<std::thread> callers;
    std::vector<std::vector<float>> out(kCallers);
    for (int i = 0; i < kCallers; ++i) {
        callers.emplace_back([&, i] {
            auto v = (*model)->embed(texts);
            if (v.ok()) out[i] = std::move(v).value();
            embedded.count_down();
            release.wait();
        });
    }
    embedded.wait();
    EXPECT_EQ(thread_count(), before + kCallers);
    release.count_down();
    for (std::thread& t : callers) t.join();
    for (const auto& v : out) EXPECT_EQ(v, *first);
}

}  // namespace
}  // namespace inferscale::server
