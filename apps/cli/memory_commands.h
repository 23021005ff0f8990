#pragma once
// Subcommands of `inferscale memory` that live in files of their own.

#include <CLI/CLI.hpp>

#include <functional>

namespace inferscale::cli {

// `memory encode`. The returned function runs it when it was the parsed subcommand and
// returns -1 otherwise.
std::function<int()> add_memory_encode_command(CLI::App& memory);

}  // namespace inferscale::cli
