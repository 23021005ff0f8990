#include "apps/server/worker_pool.h"

#include <system_error>
#include <utility>

namespace inferscale::server {

WorkerPool::WorkerPool(std::size_t max_threads) : max_threads_(max_threads > 0 ? max_threads : 1) {}

WorkerPool::~WorkerPool() { shutdown(); }

void WorkerPool::enqueue(std::function<void()> fn) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
        Worker* worker = idle_.back();
        idle_.pop_back();
        worker->job = std::move(fn);
        worker->wake.notify_one();
    } else if (started_ < max_threads_) {
        Worker& worker = workers_.emplace_back();
        worker.job = std::move(fn);
        try {
            threads_.emplace_back([this, &worker] { run(worker); });
        } catch (const std::system_error&) {
            // Out of threads: the job waits for a running worker, as past the limit.
            if (started_ == 0) throw;
            jobs_.push_back(std::move(worker.job));
            workers_.pop_back();
            return;
        }
        ++started_;
    } else {
        jobs_.push_back(std::move(fn));
    }
}

void WorkerPool::run(Worker& worker) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        std::function<void()> job = std::move(worker.job);
        worker.job = nullptr;
        lock.unlock();
        job();
        job = nullptr;
        lock.lock();
        if (!jobs_.empty()) {
            worker.job = std::move(jobs_.front());
            jobs_.pop_front();
            continue;
        }
        if (shutdown_) return;
        idle_.push_back(&worker);
        worker.wake.wait(lock, [&] { return worker.job || shutdown_; });
        if (!worker.job) return;
    }
}

void WorkerPool::shutdown() {
    std::vector<std::thread> threads;
    {
        const std::lock_guard<std::mutex> lock(mutex_);
        shutdown_ = true;
        for (Worker* worker : idle_) worker->wake.notify_one();
        threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
}

std::size_t WorkerPool::threads() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return started_;
}

std::size_t WorkerPool::idle_threads() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return idle_.size();
}

}  // namespace inferscale::server
