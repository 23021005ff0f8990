#pragma once
// The `inferscale` subcommands. Each registers its flags on `app` and returns the callback
// that runs it; a callback returns the process exit code.

#include <CLI/CLI.hpp>

#include <functional>

namespace inferscale::cli {

using Command = std::function<int()>;

Command add_generate_command(CLI::App& app);
Command add_chat_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_memory_command(CLI::App& app);
Command add_serve_command(CLI::App& app);
Command add_embed_command(CLI::App& app);

}  // namespace inferscale::cli
