#include "extract/extraction_queue.h"

#include "base/check.h"

namespace inferscale::extract {

const char* job_status_name(JobStatus status) {
    switch (status) {
        case JobStatus::Queued:
            return "PENDING";
        case JobStatus::Running:
            return "RUNNING";
        case JobStatus::Succeeded:
            return "SUCCEEDED";
        case JobStatus::Failed:
            return "FAILED";
    }
    return "FAILED";
}

ExtractionQueue::ExtractionQueue(FactExtractor& extractor, SimilarFor similar, Apply apply,
                                 ExtractionQueueOptions options)
    : extractor_(extractor),
      similar_(std::move(similar)),
      apply_(std::move(apply)),
      options_(options) {
    for (int i = 0; i < std::max(1, options_.workers); ++i)
        workers_.emplace_back([this] { work(); });
}

ExtractionQueue::~ExtractionQueue() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    for (std::thread& t : workers_) t.join();
}

Result<std::uint64_t> ExtractionQueue::submit(ExtractionJob job) {
    const std::uint64_t id = IS_TRY(reserve(job.user));
    submit(id, std::move(job));
    return id;
}

Result<std::uint64_t> ExtractionQueue::reserve(std::string user) {
    std::lock_guard lock(mutex_);
    if (queued_.size() + reserved_.size() >= options_.max_queued)
        return make_error(ErrorKind::Unavailable,
                          "too many memory extraction jobs are waiting; retry later");
    const std::uint64_t id = next_id_++;
    Entry entry;
    entry.state.id = id;
    entry.state.user = std::move(user);
    entries_.emplace(id, std::move(entry));
    reserved_.insert(id);
    return id;
}

void ExtractionQueue::submit(std::uint64_t id, ExtractionJob job) {
    {
        std::lock_guard lock(mutex_);
        IS_CHECK(reserved_.erase(id) == 1) << "job " << id << " is not reserved";
        Entry& entry = entries_.at(id);
        IS_CHECK(job.user == entry.state.user) << "job " << id << " was reserved for another user";
        entry.job = std::move(job);
        queued_.push_back(id);
    }
    changed_.notify_all();
}

void ExtractionQueue::fail(std::uint64_t id, std::string error) {
    {
        std::lock_guard lock(mutex_);
        IS_CHECK(reserved_.erase(id) == 1) << "job " << id << " is not reserved";
        Entry& entry = entries_.at(id);
        entry.state.status = JobStatus::Failed;
        entry.state.error = std::move(error);
        finish_locked(entry);
    }
    changed_.notify_all();
}

std::optional<JobState> ExtractionQueue::state(std::uint64_t id) const {
    std::lock_guard lock(mutex_);
    const auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    return it->second.state;
}

std::optional<JobState> ExtractionQueue::wait(std::uint64_t id) const {
    std::unique_lock lock(mutex_);
    const auto finished = [&] {
        const auto it = entries_.find(id);
        return it == entries_.end() || it->second.state.status == JobStatus::Succeeded ||
               it->second.state.status == JobStatus::Failed;
    };
    changed_.wait(lock, [&] { return finished() || stopping_; });
    const auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    return it->second.state;
}

ExtractionQueue::Entry* ExtractionQueue::take_locked() {
    for (auto it = queued_.begin(); it != queued_.end(); ++it) {
        Entry& entry = entries_.at(*it);
        if (busy_users_.count(entry.job.user)) continue;
        queued_.erase(it);
        busy_users_.insert(entry.job.user);
        entry.state.status = JobStatus::Running;
        return &entry;
    }
    return nullptr;
}

void ExtractionQueue::finish_locked(Entry& entry) {
    finished_.push_back(entry.state.id);
    while (finished_.size() > options_.finished_kept) {
        entries_.erase(finished_.front());
        finished_.pop_front();
    }
}

void ExtractionQueue::work() {
    std::unique_lock lock(mutex_);
    while (true) {
        Entry* entry = nullptr;
        changed_.wait(lock, [&] { return stopping_ || (entry = take_locked()) != nullptr; });
        if (entry == nullptr) return;  // stopping
        // Entries are only erased once finished and the map keeps addresses stable,
        // so the job can be read without the lock.
        const ExtractionJob& job = entry->job;
        lock.unlock();
        Result<nlohmann::json> outcome = [&]() -> Result<nlohmann::json> {
            const std::vector<FactChange> changes =
                IS_TRY(extractor_.extract(job.messages, job.date, similar_(job)));
            return apply_(job, changes);
        }();
        lock.lock();
        busy_users_.erase(job.user);
        if (outcome.ok()) {
            entry->state.status = JobStatus::Succeeded;
            entry->state.results = std::move(outcome).value();
        } else {
            entry->state.status = JobStatus::Failed;
            entry->state.error = outcome.error().message;
        }
        finish_locked(*entry);
        changed_.notify_all();
    }
}

}  // namespace inferscale::extract
