// inferscale chat: talk to the model through its chat template, one-shot or interactively.

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "apps/cli/cli_support.h"
#include "apps/cli/commands.h"
#include "engine/generator.h"

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

}  // namespace

Command add_chat_command(CLI::App& app) {
    struct Args {
        ModelArgs model;
        std::string message;
        std::string system;
        sampling::SamplingParams sampling;
    };
    auto args = std::make_shared<Args>();
    args->sampling.max_tokens = 512;
    CLI::App* cmd = app.add_subcommand(
        "chat", "chat through the model's chat template (interactive without --message)");
    add_model_flags(*cmd, args->model);
    cmd->add_option("--message", args->message, "send one message, print the reply and exit");
    cmd->add_option("--system", args->system, "system prompt");
    add_sampling_flags(*cmd, args->sampling);

    return [args]() -> int {
        auto loaded = load_model(args->model);
        if (!loaded.ok()) return fail(loaded.error().message);
        engine::LocalModel& lm = **loaded;
        if (!lm.chat_template()) return fail("the model carries no chat template this build knows");
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
