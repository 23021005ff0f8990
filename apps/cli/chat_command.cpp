// inferscale chat: talk to the model through its chat template, one-shot or interactively. The
// conversation runs on an in-process Engine exactly as a server request would; with --user
// every turn is answered over the user's memory.

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "apps/cli/cli_support.h"
#include "apps/cli/commands.h"
#include "apps/cli/local_engine.h"

namespace inferscale::cli {
namespace {

struct MemoryArgs {
    std::string user;
    std::string mode;  // empty: kv with --user, none without
    int top_k = engine::MemoryDefaults{}.top_k;
    int context_window = engine::MemoryDefaults{}.context_window;
    EngineMemoryArgs store;
    EmbeddingArgs embedding;
};

void add_memory_flags(CLI::App& cmd, MemoryArgs& args) {
    cmd.add_option("--user", args.user, "answer with this user's memories");
    cmd.add_option("--memory", args.mode, "kv (inject KV chunks), prompt (facts as text) or none")
        ->check(CLI::IsMember({"kv", "prompt", "none"}));
    cmd.add_option("--top-k", args.top_k, "facts retrieved per question")->capture_default_str();
    cmd.add_option("--context-window", args.context_window,
                   "conversation turns each fact is encoded after")
        ->capture_default_str();
    add_chunk_flags(cmd, args.store.chunks);
    add_db_flag(cmd, args.store.db);
    add_embedding_flags(cmd, args.embedding, "embedding the user's facts for retrieval");
}

// The request's memory options from the flags, through the choice the server makes too.
Status choose_memory(const MemoryArgs& args, engine::EngineRequest& request) {
    request.user = args.user;
    engine::MemoryChoice choice;
    if (!args.mode.empty()) choice.mode = args.mode;
    choice.top_k = args.top_k;
    choice.context_window = args.context_window;
    engine::MemoryDefaults defaults;
    defaults.retrieval = default_retrieval(args.embedding);
    const auto error = engine::choose_memory(choice, defaults, request);
    if (!error) return {};
    if (error->option == "user") return make_error("--memory " + args.mode + " needs --user");
    if (error->option == "mode") return make_error(error->message);
    return make_error((error->option == "top_k" ? "--top-k " : "--context-window ") +
                      error->message);
}

}  // namespace

Command add_chat_command(CLI::App& app) {
    struct Args {
        ModelArgs model;
        std::string message;
        std::string system;
        sampling::SamplingParams sampling;
        OutputFormatArgs format;
        MemoryArgs memory;
    };
    auto args = std::make_shared<Args>();
    args->sampling.max_tokens = 512;
    CLI::App* cmd = app.add_subcommand(
        "chat", "chat through the model's chat template (interactive without --message)");
    add_model_flags(*cmd, args->model);
    add_chat_template_flag(*cmd, args->model);
    cmd->add_option("--message", args->message, "send one message, print the reply and exit");
    cmd->add_option("--system", args->system, "system prompt");
    add_sampling_flags(*cmd, args->sampling, "--sampling-top-k");
    add_output_format_flags(*cmd, args->format);
    add_memory_flags(*cmd, args->memory);
    const CLI::Option* device_pool_flag = cmd->get_option("--device-pool-mb");

    return [args, device_pool_flag]() -> int {
        engine::EngineRequest request;
        request.sampling = args->sampling;
        if (Status st = choose_memory(args->memory, request); !st.ok())
            return fail(st.error().message);
        const bool with_memory = !args->memory.user.empty();
        auto embeddings = with_memory ? load_embedding_model(args->memory.embedding, args->model)
                                      : std::unique_ptr<server::EmbeddingModel>();
        if (!embeddings.ok()) return fail(embeddings.error().message);
        auto loaded = load_model(args->model, [&](engine::LocalModelOptions& o) {
            o.with_memory = with_memory;
            if (device_pool_flag->count() > 0)
                o.device_pool_bytes = args->memory.store.chunks.device_pool_mb << 20;
        });
        if (!loaded.ok()) return fail(loaded.error().message);
        engine::LocalModel& lm = **loaded;
        if (!lm.chat_template()) return fail("the model carries no chat template this build knows");
        auto grammar = output_grammar(args->format, lm);
        if (!grammar.ok()) return fail(grammar.error().message);
        request.grammar = std::move(grammar).value();
        engine::EngineOptions options;
        auto local = LocalEngine::start(lm, options, with_memory ? &args->memory.store : nullptr,
                                        embeddings->get());
        if (!local.ok()) return fail(local.error().message);
        if (with_memory) {
            auto known = (*local)->store()->has_user(args->memory.user);
            if (!known.ok()) return fail(known.error().message);
            if (!*known)
                return fail("unknown user '" + args->memory.user +
                            "' (add memories with `inferscale memory add`)");
        }
        engine::Engine& engine = (*local)->engine();
        std::vector<jinja::ChatMessage>& messages = request.messages;
        if (!args->system.empty()) messages.push_back({"system", args->system});
        // Sends the conversation, streaming the reply to stdout, and keeps the reply in it.
        const auto reply = [&]() -> Status {
            auto done = run_request(engine, request, /*print=*/true);
            if (!done.ok()) return std::move(done).error();
            messages.push_back({"assistant", done->text});
            return {};
        };

        if (!args->message.empty()) {
            messages.push_back({"user", args->message});
            auto st = reply();
            return st.ok() ? 0 : fail(st.error().message);
        }
        const bool tty = isatty(STDIN_FILENO) != 0;
        if (tty)
            std::fprintf(stderr, "chatting with %s; an empty line or Ctrl-D ends\n",
                         lm.config().name.c_str());
        std::string line;
        while (true) {
            if (tty) std::fprintf(stderr, "> ");
            if (!std::getline(std::cin, line) || line.empty()) break;
            messages.push_back({"user", line});
            if (Status st = reply(); !st.ok()) {
                std::fprintf(stderr, "error: %s\n", st.error().message.c_str());
                messages.pop_back();  // the conversation goes on without the failed turn
            }
        }
        return 0;
    };
}

}  // namespace inferscale::cli
