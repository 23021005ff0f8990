// ExtractionQueue with a model that echoes each message as a fact: jobs of one
// user run one at a time and in order, different users' jobs run side by side,
// a failure is reported as the job's state, and a full queue says so; a
// reserved id reads PENDING until its job is given (then runs as a submitted
// one) or the reservation fails, and reservations count against the bound.

#include "extract/extraction_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>

namespace inferscale::extract {
namespace {

using nlohmann::json;

// Answers step 1 with the message text as the only fact ("fail" fails).
class EchoLlm final : public JsonLlm {
  public:
    Result<json> complete(const std::vector<jinja::ChatMessage>& messages, const json&,
                          int) override {
        const std::string& asked = messages.back().content;
        const auto begin = asked.find("user: ") + 6;
        const std::string said = asked.substr(begin, asked.find('\n', begin) - begin);
        if (said == "fail") return make_error("the model is down");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return json{{"facts", {said}}, {"forget", json::array()}};
    }
};

ExtractionJob job(std::string user, std::string said) {
    ExtractionJob j;
    j.user = std::move(user);
    j.messages = {{"user", "", std::move(said)}};
    return j;
}

TEST(ExtractionQueue, OneUserAtATimeInOrderManyUsersAtOnce) {
    EchoLlm llm;
    FactExtractor extractor(llm);
    std::mutex mutex;
    std::map<std::string, std::vector<std::string>> applied;
    std::map<std::string, int> running;
    int most_users_at_once = 0, now = 0;
    const auto apply = [&](const ExtractionJob& j,
                           const std::vector<FactChange>& changes) -> Result<json> {
        {
            std::lock_guard lock(mutex);
            EXPECT_EQ(running[j.user]++, 0) << "two jobs of " << j.user << " at once";
            most_users_at_once = std::max(most_users_at_once, ++now);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::lock_guard lock(mutex);
        --running[j.user];
        --now;
        for (const FactChange& c : changes) applied[j.user].push_back(c.text);
        return json::array({changes.at(0).text});
    };
    const auto nothing_similar = [](const ExtractionJob&) -> SimilarFacts {
        return [](std::string_view, std::size_t) -> Result<std::vector<StoredFact>> {
            return std::vector<StoredFact>{};
        };
    };
    ExtractionQueue queue(extractor, nothing_similar, apply, {.workers = 3});
    std::vector<std::uint64_t> ids;
    for (int i = 0; i < 4; ++i)
        for (const char* user : {"ann", "bob", "cy"})
            ids.push_back(*queue.submit(job(user, std::string(user) + std::to_string(i))));
    for (const std::uint64_t id : ids) {
        const auto state = queue.wait(id);
        ASSERT_TRUE(state.has_value());
        EXPECT_EQ(state->status, JobStatus::Succeeded) << state->error;
    }
    for (const char* user : {"ann", "bob", "cy"}) {
        std::vector<std::string> want;
        for (int i = 0; i < 4; ++i) want.push_back(std::string(user) + std::to_string(i));
        EXPECT_EQ(applied[user], want);
    }
    EXPECT_GT(most_users_at_once, 1);
    const auto first = queue.state(ids[0]);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->user, "ann");
    EXPECT_EQ(first->results, json::array({"ann0"}));
    EXPECT_FALSE(queue.state(12345).has_value());
}

TEST(ExtractionQueue, FailuresAreTheJobsStateAndAFullQueueSaysSo) {
    EchoLlm llm;
    FactExtractor extractor(llm);
    std::mutex gate;
    gate.lock();  // holds the only worker inside apply
    const auto apply = [&](const ExtractionJob&, const std::vector<FactChange>&) -> Result<json> {
        std::lock_guard lock(gate);
        return json::array();
    };
    const auto nothing_similar = [](const ExtractionJob&) -> SimilarFacts {
        return [](std::string_view, std::size_t) -> Result<std::vector<StoredFact>> {
            return std::vector<StoredFact>{};
        };
    };
    ExtractionQueue queue(extractor, nothing_similar, apply, {.workers = 1, .max_queued = 2});
    const auto failing = *queue.submit(job("ann", "fail"));
    const auto failed = queue.wait(failing);
    ASSERT_TRUE(failed.has_value());
    EXPECT_EQ(failed->status, JobStatus::Failed);
    EXPECT_EQ(failed->error, "the model is down");

    const auto blocked = *queue.submit(job("ann", "a"));
    while (queue.state(blocked)->status != JobStatus::Running)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(queue.submit(job("bob", "b")).ok());
    ASSERT_TRUE(queue.submit(job("cy", "c")).ok());
    const auto full = queue.submit(job("dee", "d"));
    ASSERT_FALSE(full.ok());
    EXPECT_EQ(full.error().kind, ErrorKind::Unavailable);
    gate.unlock();
    EXPECT_EQ(queue.wait(blocked)->status, JobStatus::Succeeded);
}

TEST(ExtractionQueue, ReservedIdsWaitForTheirJobOrFail) {
    EchoLlm llm;
    FactExtractor extractor(llm);
    const auto apply = [](const ExtractionJob&,
                          const std::vector<FactChange>& changes) -> Result<json> {
        return json::array({changes.at(0).text});
    };
    const auto nothing_similar = [](const ExtractionJob&) -> SimilarFacts {
        return [](std::string_view, std::size_t) -> Result<std::vector<StoredFact>> {
            return std::vector<StoredFact>{};
        };
    };
    ExtractionQueue queue(extractor, nothing_similar, apply, {.workers = 1, .max_queued = 2});
    const std::uint64_t kept = *queue.reserve("ann");
    const std::uint64_t dropped = *queue.reserve("bob");
    EXPECT_EQ(queue.state(kept)->status, JobStatus::Queued);
    EXPECT_EQ(queue.state(kept)->user, "ann");
    const auto full = queue.submit(job("cy", "c"));
    ASSERT_FALSE(full.ok());
    EXPECT_EQ(full.error().kind, ErrorKind::Unavailable);
    // Workers pass a reservation by until its job comes.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(queue.state(kept)->status, JobStatus::Queued);

    queue.submit(kept, job("ann", "kept"));
    const auto done = queue.wait(kept);
    ASSERT_TRUE(done.has_value());
    EXPECT_EQ(done->status, JobStatus::Succeeded) << done->error;
    EXPECT_EQ(done->results, json::array({"kept"}));

    queue.fail(dropped, "the answer was cancelled");
    const auto failed = queue.wait(dropped);
    ASSERT_TRUE(failed.has_value());
    EXPECT_EQ(failed->status, JobStatus::Failed);
    EXPECT_EQ(failed->error, "the answer was cancelled");
    EXPECT_EQ(failed->user, "bob");
    EXPECT_TRUE(queue.submit(job("cy", "c")).ok());
}

}  // namespace
}  // namespace inferscale::extract
