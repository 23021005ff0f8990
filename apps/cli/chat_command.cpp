// inferscale chat: talk to the model through its chat template, one-shot or interactively.

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "apps/cli/cli_support.h"
#include "apps/cli/commands.h"
#include "engine/generator.h"
#include "engine/memory_answer.h"
#include "engine/memory_retrieval.h"
#include "memory/fact_indexer.h"
#include "retrieval/bm25_index.h"

namespace inferscale::cli {
namespace {

// Renders the conversation, generates the assistant's reply while streaming it to stdout, and
// appends the reply to the conversation.
Status reply(engine::LocalModel& lm, std::vector<tokenizer::ChatMessage>& messages,
             const sampling::SamplingParams& params) {
    const std::string prompt = lm.chat_template()->render(messages, /*add_generation_prompt=*/true);
    // The template writes BOS itself where the model has one.
    const auto ids = lm.tokenizer().encode(prompt, /*add_special=*/false);
    auto gen = engine::generate(lm, ids, params, [](std::string_view t) {
        std::fwrite(t.data(), 1, t.size(), stdout);
        std::fflush(stdout);
    });
    if (!gen.ok()) return std::move(gen).error();
    std::printf("\n");
    messages.push_back({"assistant", gen->text});
    return {};
}

struct MemoryArgs {
    std::string user;
    std::string mode;  // empty: kv with --user, none without
    DbArgs db;
    engine::RetrievalOptions retrieval;
    ChunkArgs chunks;
};

// A user's memory, opened once for the whole chat: the store, its BM25 index kept in step, and
// the chunk runtime (scaffold chunks encoded, fact chunks cached across questions).
class MemorySession {
  public:
    static Result<std::unique_ptr<MemorySession>> open(engine::LocalModel& lm,
                                                       const MemoryArgs& args) {
        auto s = std::unique_ptr<MemorySession>(new MemorySession(args));
        s->mode_ = IS_TRY(engine::parse_memory_mode(args.mode.empty() ? "kv" : args.mode));
        s->store_ = IS_TRY(open_store(args.db));
        if (!IS_TRY(s->store_->has_user(args.user)))
            return make_error("unknown user '" + args.user +
                              "' (add memories with `inferscale memory add`)");
        s->indexer_ = IS_TRY(memory::FactIndexer::attach(*s->store_, s->index_));
        s->runtime_ = IS_TRY(engine::MemoryRuntime::create(
            lm, memory_options(args.chunks, s->store_->path())));
        return s;
    }

    // Retrieves this user's facts for the question and answers with them, streaming to stdout.
    Status answer(engine::LocalModel& lm, const std::string& question,
                  const sampling::SamplingParams& params) {
        const auto facts = IS_TRY(engine::retrieve_memory_facts(lm, *store_, index_, args_.user,
                                                               question, args_.retrieval));
        auto answer = engine::answer_with_memory(lm, *runtime_, facts, question, mode_, params,
                                                 [](std::string_view t) {
                                                     std::fwrite(t.data(), 1, t.size(), stdout);
                                                     std::fflush(stdout);
                                                 });
        if (!answer.ok()) return std::move(answer).error();
        std::printf("\n");
        return {};
    }

  private:
    explicit MemorySession(const MemoryArgs& args) : args_(args) {}
    MemoryArgs args_;
    engine::MemoryMode mode_ = engine::MemoryMode::Kv;
    std::unique_ptr<memory::MemoryStore> store_;
    retrieval::Bm25Index index_;
    std::unique_ptr<memory::FactIndexer> indexer_;
    std::unique_ptr<engine::MemoryRuntime> runtime_;
};

void add_memory_flags(CLI::App& cmd, MemoryArgs& args) {
    cmd.add_option("--user", args.user, "answer with this user's memories");
    cmd.add_option("--memory", args.mode, "kv (inject KV chunks), prompt (facts as text) or none")
        ->check(CLI::IsMember({"kv", "prompt", "none"}));
    cmd.add_option("--top-k", args.retrieval.top_k, "facts retrieved per question")
        ->capture_default_str()->check(CLI::Range(0, 1000));
    cmd.add_option("--context-window", args.retrieval.context_window,
                   "conversation turns each fact is encoded after")
        ->capture_default_str()->check(CLI::Range(0, 1000));
    add_chunk_flags(cmd, args.chunks);
    add_db_flag(cmd, args.db);
}

}  // namespace

Command add_chat_command(CLI::App& app) {
    struct Args {
        ModelArgs model;
        std::string message;
        std::string system;
        sampling::SamplingParams sampling;
        MemoryArgs memory;
    };
    // With --user every message is answered as a fresh question over the user's memory (the
    // memory prompt carries no chat history).
    auto chat_with_memory = [](engine::LocalModel& lm, const Args& a) -> int {
        auto session = MemorySession::open(lm, a.memory);
        if (!session.ok()) return fail(session.error().message);
        if (!a.message.empty()) {
            auto st = (*session)->answer(lm, a.message, a.sampling);
            return st.ok() ? 0 : fail(st.error().message);
        }
        std::string line;
        while (std::getline(std::cin, line) && !line.empty()) {
            auto st = (*session)->answer(lm, line, a.sampling);
            if (!st.ok()) std::fprintf(stderr, "error: %s\n", st.error().message.c_str());
        }
        return 0;
    };
    auto args = std::make_shared<Args>();
    args->sampling.max_tokens = 512;
    CLI::App* cmd = app.add_subcommand(
        "chat", "chat through the model's chat template (interactive without --message)");
    add_model_flags(*cmd, args->model);
    cmd->add_option("--message", args->message, "send one message, print the reply and exit");
    cmd->add_option("--system", args->system, "system prompt");
    add_sampling_flags(*cmd, args->sampling, "--sampling-top-k");
    add_memory_flags(*cmd, args->memory);

    return [args, chat_with_memory]() -> int {
        if (args->memory.user.empty() && !args->memory.mode.empty() && args->memory.mode != "none")
            return fail("--memory " + args->memory.mode + " needs --user");
        auto loaded = load_model(args->model);
        if (!loaded.ok()) return fail(loaded.error().message);
        engine::LocalModel& lm = **loaded;
        if (!lm.chat_template()) return fail("the model carries no chat template this build knows");
        if (!args->memory.user.empty()) return chat_with_memory(lm, *args);
        std::vector<tokenizer::ChatMessage> messages;
        if (!args->system.empty()) messages.push_back({"system", args->system});

        if (!args->message.empty()) {
            messages.push_back({"user", args->message});
            auto st = reply(lm, messages, args->sampling);
            return st.ok() ? 0 : fail(st.error().message);
        }
        const bool tty = isatty(STDIN_FILENO) != 0;
        if (tty) std::fprintf(stderr, "chatting with %s; an empty line or Ctrl-D ends\n",
                              lm.config().name.c_str());
        std::string line;
        while (true) {
            if (tty) std::fprintf(stderr, "> ");
            if (!std::getline(std::cin, line) || line.empty()) break;
            messages.push_back({"user", line});
            auto st = reply(lm, messages, args->sampling);
            if (!st.ok()) {
                std::fprintf(stderr, "error: %s\n", st.error().message.c_str());
                messages.pop_back();  // the conversation goes on without the failed turn
            }
        }
        return 0;
    };
}

}  // namespace inferscale::cli
