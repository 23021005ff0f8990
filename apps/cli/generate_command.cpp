// inferscale generate: complete a raw prompt, on an in-process Engine.

#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>

#include "apps/cli/cli_support.h"
#include "apps/cli/commands.h"
#include "apps/cli/local_engine.h"

namespace inferscale::cli {

Command add_generate_command(CLI::App& app) {
    struct Args {
        ModelArgs model;
        std::string prompt;
        sampling::SamplingParams sampling;
        OutputFormatArgs format;
        bool json = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* cmd = app.add_subcommand("generate", "complete a prompt (no chat template)");
    add_model_flags(*cmd, args->model);
    cmd->add_option("--prompt", args->prompt, "the text to complete")->required();
    add_sampling_flags(*cmd, args->sampling);
    add_output_format_flags(*cmd, args->format);
    cmd->add_flag("--json", args->json,
                  "print one JSON object: prompt_token_ids, token_ids, text, finish_reason");

    return [args]() -> int {
        auto loaded = load_model(args->model);
        if (!loaded.ok()) return fail(loaded.error().message);
        engine::LocalModel& lm = **loaded;
        engine::EngineRequest request;
        request.prompt_token_ids = lm.tokenizer().encode(args->prompt, /*add_special=*/true);
        request.sampling = args->sampling;
        auto grammar = output_grammar(args->format, lm);
        if (!grammar.ok()) return fail(grammar.error().message);
        request.grammar = std::move(grammar).value();
        const std::vector<std::int32_t> prompt = request.prompt_token_ids;
        auto local = LocalEngine::start(lm, engine::EngineOptions{}, nullptr);
        if (!local.ok()) return fail(local.error().message);
        auto gen = run_request((*local)->engine(), std::move(request), /*print=*/!args->json);
        if (!gen.ok()) return fail(gen.error().message);
        if (args->json) {
            nlohmann::json out = {
                {"prompt_token_ids", prompt},
                {"token_ids", gen->token_ids},
                {"text", gen->text},
                {"finish_reason", gen->finish_reason}};
            std::printf("%s\n",
                        out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        }
        return 0;
    };
}

}  // namespace inferscale::cli
