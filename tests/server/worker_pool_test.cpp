// WorkerPool: a worker is started only when none is idle, up to the limit; jobs past the limit
// wait and run as workers free up; the worker that went idle last takes the next job; shutdown
// runs what was queued.

#include "apps/server/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <mutex>
#include <set>
#include <thread>

namespace inferscale::server {
namespace {

// Runs `fn` on the pool and waits until it has run.
void run_one(WorkerPool& pool, const std::function<void()>& fn) {
    std::latch done(1);
    pool.enqueue([&] {
        fn();
        done.count_down();
    });
    done.wait();
}

TEST(WorkerPoolTest, JobsOneAfterAnotherRunOnOneThread) {
    WorkerPool pool(512);
    std::set<std::thread::id> ids;
    for (int i = 0; i < 200; ++i) {
        run_one(pool, [&] { ids.insert(std::this_thread::get_id()); });
        while (pool.idle_threads() == 0) std::this_thread::yield();  // back from the job
    }
    EXPECT_EQ(pool.threads(), 1u);
    EXPECT_EQ(ids.size(), 1u);
    pool.shutdown();
}

TEST(WorkerPoolTest, TheLastIdleWorkerTakesTheNextJob) {
    WorkerPool pool(8);
    std::latch started(2), release(1);
    std::thread::id first, second;
    pool.enqueue([&] {
        first = std::this_thread::get_id();
        started.count_down();
        release.wait();
    });
    pool.enqueue([&] {
        second = std::this_thread::get_id();
        started.count_down();
    });
    started.wait();
    while (pool.idle_threads() == 0) std::this_thread::yield();  // the second one is back
    release.count_down();
    while (pool.idle_threads() < 2) std::this_thread::yield();  // the first one is back too
    std::thread::id next;
    run_one(pool, [&] { next = std::this_thread::get_id(); });
    EXPECT_EQ(next, first);
    EXPECT_NE(first, second);
    pool.shutdown();
}

TEST(WorkerPoolTest, StartsUpToTheLimitAndQueuesTheRest) {
    WorkerPool pool(3);
    std::latch started(3), release(1), all_done(5);
    std::atomic<int> ran{0};
    for (int i = 0; i < 5; ++i) {
        pool.enqueue([&, i] {
            if (i < 3) {
                started.count_down();
                release.wait();
            }
            ++ran;
            all_done.count_down();
        });
    }
    started.wait();
    EXPECT_EQ(pool.threads(), 3u);
    EXPECT_EQ(ran.load(), 0);
    release.count_down();
    all_done.wait();
    EXPECT_EQ(ran.load(), 5);
    EXPECT_EQ(pool.threads(), 3u);
    pool.shutdown();
}

TEST(WorkerPoolTest, ShutdownRunsQueuedJobs) {
    std::atomic<int> ran{0};
    {
        WorkerPool pool(1);
        std::latch started(1), release(1);
        pool.enqueue([&] {
            started.count_down();
            release.wait();
            ++ran;
        });
        started.wait();
        for (int i = 0; i < 4; ++i) pool.enqueue([&] { ++ran; });
        release.count_down();
        pool.shutdown();
        EXPECT_EQ(ran.load(), 5);
    }
    EXPECT_EQ(ran.load(), 5);
}

}  // namespace
}  // namespace inferscale::server
