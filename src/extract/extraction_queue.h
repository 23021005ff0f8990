#pragma once
// ExtractionQueue: fact extraction as background jobs. A few worker threads
// take jobs in arrival order, never two of one user at once (each job's
// decisions see what the user's previous job stored), run FactExtractor on them
// (its model calls are background engine requests) and hand the changes to
// `apply`, which commits them. A job's state can be polled by id or waited for;
// finished jobs are kept, the oldest dropped past a bound.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "extract/fact_extractor.h"

namespace inferscale::extract {

struct ExtractionJob {
    std::string user;  // whose facts change; the other fields are the caller's to read
    std::string agent_id;
    std::string run_id;
    nlohmann::json metadata = nlohmann::json::object();
    std::vector<ConversationMessage> messages;
    std::string date;  // of the messages, when known
};

enum class JobStatus { Queued, Running, Succeeded, Failed };
const char* job_status_name(JobStatus status);  // "PENDING", "RUNNING", "SUCCEEDED", "FAILED"

struct JobState {
    std::uint64_t id = 0;
    std::string user;
    JobStatus status = JobStatus::Queued;
    nlohmann::json results = nlohmann::json::array();  // what `apply` returned, when succeeded
    std::string error;                                 // when failed
};

struct ExtractionQueueOptions {
    int workers = 4;
    std::size_t max_queued = 1024;     // more is Unavailable
    std::size_t finished_kept = 4096;  // finished job states kept for polling
};

class ExtractionQueue {
  public:
    // The stored facts most like a text, of the job's scope.
    using SimilarFor = std::function<SimilarFacts(const ExtractionJob&)>;
    // Commits the changes (one transaction) and returns what the job reports,
    // e.g. Mem0's
    // [{id, memory, event}].
    using Apply =
        std::function<Result<nlohmann::json>(const ExtractionJob&, const std::vector<FactChange>&)>;

    // `extractor` must outlive the queue. Starts the workers.
    ExtractionQueue(FactExtractor& extractor, SimilarFor similar, Apply apply,
                    ExtractionQueueOptions options = {});
    // Finishes the job each worker is running; queued jobs are dropped.
    ~ExtractionQueue();
    ExtractionQueue(const ExtractionQueue&) = delete;
    ExtractionQueue& operator=(const ExtractionQueue&) = delete;

    // The job's id; Unavailable when max_queued jobs wait already.
    Result<std::uint64_t> submit(ExtractionJob job);
    // An id for `user`'s job to come, counted as queued (Unavailable as for
    // submit). Exactly one of submit(id, job) and fail(id, error) must follow.
    Result<std::uint64_t> reserve(std::string user);
    // Queues the reserved job; `job.user` must be the reserved user.
    void submit(std::uint64_t id, ExtractionJob job);
    // Ends the reservation as a failed job with this error.
    void fail(std::uint64_t id, std::string error);
    // nullopt for an id never given out or no longer kept.
    std::optional<JobState> state(std::uint64_t id) const;
    // Waits until the job has finished; its state (nullopt as for state()).
    std::optional<JobState> wait(std::uint64_t id) const;

  private:
    struct Entry {
        ExtractionJob job;
        JobState state;
    };
    void work();
    // Takes the first queued job whose user has no job running; null when none.
    // Lock held.
    Entry* take_locked();
    // Records the entry as finished, dropping the oldest past the bound. Lock held.
    void finish_locked(Entry& entry);

    FactExtractor& extractor_;
    SimilarFor similar_;
    Apply apply_;
    ExtractionQueueOptions options_;

    mutable std::mutex mutex_;
    mutable std::condition_variable changed_;
    bool stopping_ = false;
    std::uint64_t next_id_ = 1;
    std::map<std::uint64_t, Entry> entries_;  // queued, running and kept finished jobs
    std::deque<std::uint64_t> queued_;
    std::deque<std::uint64_t> finished_;
    std::set<std::uint64_t> reserved_;  // ids whose job is still to come
    std::set<std::string> busy_users_;
    std::vector<std::thread> workers_;
};

}  // namespace inferscale::extract
