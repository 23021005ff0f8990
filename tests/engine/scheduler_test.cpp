// Scheduler and prefix cache driven by a fake model: every step's runs are checked against a
// shadow KV store that records, for each block slot, which token and cache salt were computed
// (or injected) there. A run may only attend over slots that hold exactly its own sequence's
// tokens, so a wrong prefix-cache hit, a lost block or a preemption that forgets to recompute
// fails here without any tensor math.

#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace inferscale::engine {
namespace {

constexpr std::int64_t kBlock = 4;

struct Slot {
    std::int32_t token = -1;
    std::string salt;
    bool operator==(const Slot&) const = default;
};

class FakeEngine {
  public:
    FakeEngine(std::int32_t blocks, SchedulerOptions options, bool caching = true)
        : pool_(blocks), cache_(pool_, caching), scheduler_(cache_, options),
          slots_(blocks * kBlock) {}

    Sequence* add(std::vector<std::int32_t> prompt, std::int64_t max_new, std::string salt = "",
                  std::int64_t injected = 0) {
        auto seq = std::make_unique<Sequence>();
        seq->id = next_id_++;
        seq->prompt_len = static_cast<std::int64_t>(prompt.size());
        seq->tokens = std::move(prompt);
        seq->max_len = seq->prompt_len + max_new;
        seq->cache_salt = std::move(salt);
        seq->injected_tokens = injected;
        for (std::int64_t b = 0; b < injected / kBlock; ++b)
            seq->memory_block_keys.push_back("chunk");
        Sequence* raw = seq.get();
        seqs_.push_back(std::move(seq));
        scheduler_.add(raw);
        return raw;
    }

    // The fake model's next token: a function of the whole sequence so far.
    static std::int32_t next_token(const Sequence& s) {
        std::uint32_t h = 2166136261u;
        for (std::int32_t t : s.tokens) h = (h ^ static_cast<std::uint32_t>(t)) * 16777619u;
        return static_cast<std::int32_t>(h % 1000);
    }

    Slot& slot(const Sequence& s, std::int64_t pos) {
        return slots_[static_cast<std::size_t>(s.blocks[pos / kBlock] * kBlock + pos % kBlock)];
    }

    // One step; returns the plan for extra checks.
    StepPlan step() {
        StepPlan plan = scheduler_.schedule();
        const auto& opt = scheduler_.options();
        EXPECT_LE(plan.num_tokens, opt.max_step_tokens);
        EXPECT_LE(static_cast<std::int64_t>(plan.runs.size()), opt.max_step_seqs);
        for (const Injection& inj : plan.injections) {
            EXPECT_TRUE(inj.seq->memory_ready);
            for (std::int64_t p = inj.first_token; p < inj.seq->injected_tokens; ++p)
                slot(*inj.seq, p) = {inj.seq->tokens[p], inj.seq->cache_salt};
            ++injections_;
        }
        for (const ScheduledRun& run : plan.runs) {
            const Sequence& s = *run.seq;
            EXPECT_EQ(s.status, SequenceStatus::Running);
            EXPECT_GE(static_cast<std::int64_t>(s.blocks.size()) * kBlock, run.start + run.count);
            // Everything before the run must already hold this sequence's tokens.
            for (std::int64_t p = 0; p < run.start; ++p)
                EXPECT_EQ(slot(s, p), (Slot{s.tokens[p], s.cache_salt}))
                    << "seq " << s.id << " pos " << p;
            for (std::int64_t p = run.start; p < run.start + run.count; ++p)
                slot(s, p) = {s.tokens[p], s.cache_salt};
            computed_ += run.count;
        }
        scheduler_.complete(plan);
        for (const ScheduledRun& run : plan.runs) {
            if (!run.sample) continue;
            Sequence& s = *run.seq;
            s.tokens.push_back(next_token(s));
            if (static_cast<std::int64_t>(s.tokens.size()) >= s.max_len) scheduler_.finish(&s);
        }
        return plan;
    }

    void run_to_end(int max_steps = 10000) {
        for (int i = 0;
             i < max_steps && (scheduler_.num_running() || scheduler_.num_waiting()); ++i)
            step();
        ASSERT_EQ(scheduler_.num_running() + scheduler_.num_waiting(), 0u);
    }

    // What the sequence must end as: its prompt, then next_token applied repeatedly.
    static std::vector<std::int32_t> expected(std::vector<std::int32_t> prompt,
                                              std::int64_t max_new) {
        Sequence s;
        s.tokens = std::move(prompt);
        for (std::int64_t i = 0; i < max_new; ++i) s.tokens.push_back(next_token(s));
        return s.tokens;
    }

    kv::BlockPool pool_;
    kv::PrefixCache cache_;
    Scheduler scheduler_;
    std::vector<Slot> slots_;
    std::vector<std::unique_ptr<Sequence>> seqs_;
    std::uint64_t next_id_ = 1;
    std::int64_t computed_ = 0;
    int injections_ = 0;
};

std::vector<std::int32_t> tokens(std::int32_t n, std::int32_t seed) {
    std::vector<std::int32_t> t;
    for (std::int32_t i = 0; i < n; ++i) t.push_back(seed * 1000 + i);
    return t;
}

TEST(Scheduler, ChunksLongPromptsAndKeepsRunningSequencesFirst) {
    FakeEngine e(64, {.max_step_tokens = 8, .max_step_seqs = 4, .block_size = kBlock});
    Sequence* a = e.add(tokens(5, 1), 6);
    StepPlan p1 = e.step();
    ASSERT_EQ(p1.runs.size(), 1u);
    EXPECT_TRUE(p1.runs[0].sample);  // 5 prompt tokens fit one step
    Sequence* b = e.add(tokens(20, 2), 3);
    StepPlan p2 = e.step();
    ASSERT_EQ(p2.runs.size(), 2u);
    EXPECT_EQ(p2.runs[0].seq, a);  // the decode goes first
    EXPECT_EQ(p2.runs[0].count, 1);
    EXPECT_EQ(p2.runs[1].seq, b);
    EXPECT_EQ(p2.runs[1].count, 7);  // the rest of the budget: a chunk of b's prompt
    EXPECT_FALSE(p2.runs[1].sample);
    e.run_to_end();
    EXPECT_EQ(a->tokens, FakeEngine::expected(tokens(5, 1), 6));
    EXPECT_EQ(b->tokens, FakeEngine::expected(tokens(20, 2), 3));
    e.cache_.evict_all();
    EXPECT_EQ(e.pool_.num_free(), 64);
}

TEST(Scheduler, PrefixCacheSkipsSharedBlocksOnlyWithinOneSalt) {
    FakeEngine e(64, {.max_step_tokens = 64, .max_step_seqs = 8, .block_size = kBlock});
    std::vector<std::int32_t> shared = tokens(12, 3);
    std::vector<std::int32_t> p1 = shared, p2 = shared, p3 = shared;
    p1.push_back(1);
    p2.push_back(2);
    p3.push_back(3);
    e.add(p1, 2, "alice");
    e.run_to_end();
    Sequence* same_user = e.add(p2, 2, "alice");
    Sequence* other_user = e.add(p3, 2, "bob");
    e.step();
    EXPECT_EQ(same_user->num_cached, 12);
    EXPECT_EQ(other_user->num_cached, 0);
    e.run_to_end();
    EXPECT_EQ(same_user->tokens, FakeEngine::expected(p2, 2));
    EXPECT_EQ(other_user->tokens, FakeEngine::expected(p3, 2));
}

TEST(Scheduler, CopiesOfOnePromptComputeItsSharedBlocksOnce) {
    // Four copies of a 14-token prompt (3 full blocks before the last token) arrive together
    // with an unrelated prompt.
    FakeEngine e(64, {.max_step_tokens = 16, .max_step_seqs = 8, .block_size = kBlock});
    const std::vector<std::int32_t> prompt = tokens(14, 5);
    std::vector<Sequence*> copies;
    for (int i = 0; i < 4; ++i) copies.push_back(e.add(prompt, 3));
    Sequence* other = e.add(tokens(6, 6), 3);
    StepPlan first = e.step();
    ASSERT_EQ(first.runs.size(), 2u);  // the copies wait for the leader; the other passes
    EXPECT_EQ(first.runs[0].seq, copies[0]);
    EXPECT_EQ(first.runs[1].seq, other);
    e.run_to_end();
    for (int i = 1; i < 4; ++i) EXPECT_EQ(copies[i]->num_cached, 12) << "copy " << i;
    // The prompt once, each follower its last block, every sampled token of the decodes.
    const std::int64_t decode_tokens = 4 * 2 + 2;
    EXPECT_EQ(e.computed_, 14 + 3 * 2 + 6 + decode_tokens);
    for (Sequence* c : copies) EXPECT_EQ(c->tokens, FakeEngine::expected(prompt, 3));
}

TEST(Scheduler, ASequenceWantingItsWholePromptTakesNoCacheHitsNorWaits) {
    FakeEngine e(64, {.max_step_tokens = 64, .max_step_seqs = 8, .block_size = kBlock});
    e.add(tokens(12, 7), 1);
    e.run_to_end();
    Sequence* whole = e.add(tokens(12, 7), 2);
    whole->compute_whole_prompt = true;
    StepPlan p = e.step();
    ASSERT_EQ(p.runs.size(), 1u);
    EXPECT_EQ(p.runs[0].start, 0);
    EXPECT_EQ(whole->num_cached, 0);
    e.run_to_end();
    EXPECT_EQ(whole->tokens, FakeEngine::expected(tokens(12, 7), 2));
}

TEST(Scheduler, APromptFullyCachedStillComputesItsLastToken) {
    FakeEngine e(32, {.max_step_tokens = 64, .max_step_seqs = 8, .block_size = kBlock});
    e.add(tokens(8, 4), 1);
    e.run_to_end();
    Sequence* again = e.add(tokens(8, 4), 1);
    StepPlan p = e.step();
    ASSERT_EQ(p.runs.size(), 1u);
    EXPECT_EQ(p.runs[0].start, 4);  // block 2 holds the last token: recomputed
    EXPECT_EQ(again->num_cached, 4);
}

TEST(Scheduler, PreemptsByRecomputeWhenBlocksRunOutAndEveryoneFinishesRight) {
    // 12 blocks of 4 tokens: far too few for 6 sequences of up to 24 tokens at once.
    FakeEngine e(12, {.max_step_tokens = 16, .max_step_seqs = 8, .block_size = kBlock});
    std::vector<Sequence*> seqs;
    for (int i = 0; i < 6; ++i) seqs.push_back(e.add(tokens(6 + i, 10 + i), 14));
    e.run_to_end();
    int preemptions = 0;
    for (int i = 0; i < 6; ++i) {
        EXPECT_EQ(seqs[i]->tokens, FakeEngine::expected(tokens(6 + i, 10 + i), 14)) << i;
        preemptions += seqs[i]->preemptions;
    }
    EXPECT_GT(preemptions, 0);
    e.cache_.evict_all();
    EXPECT_EQ(e.pool_.num_free(), 12);
}

TEST(Scheduler, ASequenceWaitingForMemoryLetsOthersPassAndThenInjects) {
    FakeEngine e(64, {.max_step_tokens = 32, .max_step_seqs = 8, .block_size = kBlock});
    Sequence* mem = e.add(tokens(14, 5), 2, "carol", /*injected=*/8);
    Sequence* plain = e.add(tokens(6, 6), 2);
    const auto need = e.scheduler_.needing_memory(4);
    ASSERT_EQ(need.size(), 1u);
    EXPECT_EQ(need[0], mem);
    StepPlan p = e.step();
    ASSERT_EQ(p.runs.size(), 1u);
    EXPECT_EQ(p.runs[0].seq, plain);
    EXPECT_EQ(mem->status, SequenceStatus::WaitingForMemory);

    mem->memory_ready = true;
    p = e.step();
    ASSERT_EQ(p.injections.size(), 1u);
    EXPECT_EQ(p.injections[0].first_token, 0);
    const auto it = std::find_if(p.runs.begin(), p.runs.end(),
                                 [&](const ScheduledRun& r) { return r.seq == mem; });
    ASSERT_NE(it, p.runs.end());
    EXPECT_EQ(it->start, 8);  // the memory counts as computed
    e.run_to_end();
    EXPECT_EQ(mem->tokens, FakeEngine::expected(tokens(14, 5), 2));

    // The same memory for the same user again: the injected blocks come from the cache, no
    // chunks are needed.
    Sequence* again = e.add(tokens(14, 5), 2, "carol", 8);
    EXPECT_TRUE(e.scheduler_.needing_memory(4).empty());
    const int before = e.injections_;
    e.run_to_end();
    EXPECT_EQ(e.injections_, before);
    EXPECT_GE(again->num_cached, 8);
}

TEST(Scheduler, BackgroundSequencesTakeOnlyWhatForegroundOnesLeave) {
    FakeEngine e(64, {.max_step_tokens = 8, .max_step_seqs = 4, .block_size = kBlock});
    Sequence* bg = e.add(tokens(20, 1), 3);
    bg->background = true;
    Sequence* fg = e.add(tokens(6, 2), 3);
    StepPlan p = e.step();
    ASSERT_EQ(p.runs.size(), 2u);
    EXPECT_EQ(p.runs[0].seq, fg);  // arrived later, admitted first
    EXPECT_EQ(p.runs[0].count, 6);
    EXPECT_EQ(p.runs[1].seq, bg);  // the rest of the budget
    EXPECT_EQ(p.runs[1].count, 2);

    // Running: foreground before background, whatever the admission order.
    Sequence* fg2 = e.add(tokens(9, 3), 2);
    p = e.step();
    ASSERT_GE(p.runs.size(), 2u);
    EXPECT_EQ(p.runs[0].seq, fg);
    EXPECT_EQ(p.runs[1].seq, fg2);
    EXPECT_EQ(p.runs[1].count, 7);
    EXPECT_TRUE(std::none_of(p.runs.begin(), p.runs.end(),
                             [&](const ScheduledRun& r) { return r.seq == bg; }));
    e.run_to_end();
    EXPECT_EQ(bg->tokens, FakeEngine::expected(tokens(20, 1), 3));
    EXPECT_EQ(fg->tokens, FakeEngine::expected(tokens(6, 2), 3));
    EXPECT_EQ(fg2->tokens, FakeEngine::expected(tokens(9, 3), 2));
}

TEST(Scheduler, BackgroundSequencesArePreemptedFirst) {
    // 7 blocks of 4 tokens: 6 for the background sequence plus 4 for the foreground one
    // do not fit, so one of them must give way, and it is always the background one.
    FakeEngine e(7, {.max_step_tokens = 16, .max_step_seqs = 4, .block_size = kBlock});
    Sequence* bg = e.add(tokens(8, 1), 16);
    bg->background = true;
    e.step();
    Sequence* fg = e.add(tokens(8, 2), 8);
    e.run_to_end();
    EXPECT_EQ(fg->preemptions, 0);
    EXPECT_GT(bg->preemptions, 0);
    EXPECT_EQ(bg->tokens, FakeEngine::expected(tokens(8, 1), 16));
    EXPECT_EQ(fg->tokens, FakeEngine::expected(tokens(8, 2), 8));
}

TEST(Scheduler, RandomizedLoadKeepsEveryInvariant) {
    std::mt19937 rng(7);
    std::uint64_t preemptions = 0, hits = 0;
    for (int trial = 0; trial < 20; ++trial) {
        const auto blocks =
            static_cast<std::int32_t>(std::uniform_int_distribution<int>(10, 40)(rng));
        FakeEngine e(blocks, {.max_step_tokens = std::uniform_int_distribution<int>(4, 32)(rng),
                              .max_step_seqs = std::uniform_int_distribution<int>(1, 8)(rng),
                              .block_size = kBlock},
                     trial % 2 == 0);
        std::vector<std::pair<Sequence*, std::vector<std::int32_t>>> want;
        for (int step = 0; step < 400; ++step) {
            if (want.size() < 30 && rng() % 3 == 0) {
                const int len = std::uniform_int_distribution<int>(1, 20)(rng);
                const int max_new = std::uniform_int_distribution<int>(1, 12)(rng);
                // Few distinct prompts, so prefixes repeat and the cache gets hits.
                auto prompt = tokens(len, static_cast<std::int32_t>(rng() % 3));
                const std::string salt = rng() % 2 ? "u1" : "u2";
                Sequence* seq = e.add(prompt, max_new, salt);
                seq->background = rng() % 4 == 0;
                want.emplace_back(seq, FakeEngine::expected(prompt, max_new));
            }
            e.step();
        }
        e.run_to_end();
        for (const auto& [seq, tokens] : want) {
            EXPECT_EQ(seq->tokens, tokens);
            preemptions += static_cast<std::uint64_t>(seq->preemptions);
        }
        hits += e.cache_.stats().hit_blocks;
        e.cache_.evict_all();
        EXPECT_EQ(e.pool_.num_free(), blocks);
    }
    // The load really exercised both paths.
    EXPECT_GT(preemptions, 0u);
    EXPECT_GT(hits, 0u);
}

}  // namespace
}  // namespace inferscale::engine
