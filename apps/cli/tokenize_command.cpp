// inferscale tokenize: print the token ids of a text.

#include <cstdio>
#include <memory>

#include "apps/cli/cli_support.h"
#include "apps/cli/commands.h"
#include "model/model_files.h"

namespace inferscale::cli {

Command add_tokenize_command(CLI::App& app) {
    struct Args {
        ModelArgs model;
        std::string text;
        bool no_special = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* cmd = app.add_subcommand("tokenize", "print the token ids of TEXT");
    add_model_flags(*cmd, args->model);
    cmd->add_option("text", args->text, "the text to tokenize")->required();
    cmd->add_flag("--no-special", args->no_special, "no BOS, and special tokens as plain text");

    return [args]() -> int {
        auto loaded = load_model(args->model);
        if (!loaded.ok()) return fail(loaded.error().message);
        const auto ids =
            (*loaded)->tokenizer().encode(args->text, !args->no_special, !args->no_special);
        for (std::size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
        std::printf("\n");
        return 0;
    };
}

}  // namespace inferscale::cli
