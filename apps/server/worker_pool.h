#pragma once
// WorkerPool: the HTTP server's task queue. Up to `max_threads` workers, each started when a
// connection finds none idle; a connection goes to the worker that went idle last. A pool that
// started every thread at once and woke them in turn would, over the server's life, run
// requests on all of them, each thread's stack, malloc caches and thread-local state touched
// and kept (resident memory that grows with traffic up to max_threads threads' worth); this one
// touches only as many threads as connections were ever open at once.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace inferscale::server {

class WorkerPool final : public httplib::TaskQueue {
  public:
    explicit WorkerPool(std::size_t max_threads);
    ~WorkerPool() override;
    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

    void enqueue(std::function<void()> fn) override;
    // Runs the jobs queued so far, then joins every worker.
    void shutdown() override;

    // Workers started so far, and those of them waiting for a job.
    std::size_t threads() const;
    std::size_t idle_threads() const;

  private:
    struct Worker {
        std::condition_variable wake;
        std::function<void()> job;
    };
    void run(Worker& worker);

    const std::size_t max_threads_;
    mutable std::mutex mutex_;
    std::list<Worker> workers_;        // stable addresses
    std::vector<Worker*> idle_;        // the last to go idle at the back
    std::deque<std::function<void()>> jobs_;  // waiting while all max_threads_ are busy
    std::vector<std::thread> threads_;
    std::size_t started_ = 0;
    bool shutdown_ = false;
};

}  // namespace inferscale::server
