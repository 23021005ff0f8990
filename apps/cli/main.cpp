// inferscale: the command-line front end.

#include <CLI/CLI.hpp>

#include <vector>

#include "apps/cli/commands.h"

int main(int argc, char** argv) {
    using namespace inferscale::cli;
    CLI::App app{"inferscale: an LLM serving engine with GPU-native memory injection"};
    app.require_subcommand(1);
    std::vector<std::pair<CLI::App*, Command>> commands;
    for (auto add : {add_generate_command, add_chat_command, add_tokenize_command,
                     add_bench_command, add_memory_command, add_serve_command, add_embed_command}) {
        const std::size_t before = app.get_subcommands({}).size();
        Command run = add(app);
        commands.emplace_back(app.get_subcommands({})[before], std::move(run));
    }
    CLI11_PARSE(app, argc, argv);
    for (auto& [cmd, run] : commands)
        if (cmd->parsed()) return run();
    return 1;
}
