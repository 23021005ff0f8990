// inferscale bench: prefill and decode throughput of one sequence on this machine, run as an
// engine request (the engine's clock: submit to first token, first token to the end).

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "apps/cli/cli_support.h"
#include "apps/cli/commands.h"
#include "apps/cli/local_engine.h"

namespace inferscale::cli {
namespace {

// A fixed English text, repeated until it yields enough tokens. bench/cpu_vs_llama_cpp.py
// builds its prompt from the same text.
constexpr const char* kBenchText =
    "The history of computing is a story of ideas meeting machines. Early mechanical "
    "calculators gave way to electronic computers, which grew from rooms of vacuum tubes into "
    "chips holding billions of transistors. Along the way, programmers learned to describe "
    "problems precisely, and engineers learned to build hardware that runs those descriptions "
    "quickly. ";

}  // namespace

Command add_bench_command(CLI::App& app) {
    struct Args {
        ModelArgs model;
        int prompt_tokens = 128;
        int gen_tokens = 64;
        int repeats = 3;
        bool json = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* cmd = app.add_subcommand("bench", "measure prefill and decode tokens/s");
    add_model_flags(*cmd, args->model);
    cmd->add_option("--prompt-tokens", args->prompt_tokens)
        ->capture_default_str()->check(CLI::Range(1, 1 << 16));
    cmd->add_option("--gen-tokens", args->gen_tokens)
        ->capture_default_str()->check(CLI::Range(2, 1 << 16));
    cmd->add_option("--repeats", args->repeats, "best of N runs")
        ->capture_default_str()->check(CLI::Range(1, 100));
    cmd->add_flag("--json", args->json, "print one JSON object");

    return [args]() -> int {
        auto loaded = load_model(args->model);
        if (!loaded.ok()) return fail(loaded.error().message);
        engine::LocalModel& lm = **loaded;
        std::string text;
        std::vector<std::int32_t> prompt;
        while (static_cast<int>(prompt.size()) < args->prompt_tokens) {
            text += kBenchText;
            prompt = lm.tokenizer().encode(text, /*add_special=*/false);
        }
        prompt.resize(args->prompt_tokens);
        engine::EngineRequest request;
        request.prompt_token_ids = prompt;
        request.sampling.max_tokens = args->gen_tokens;
        request.sampling.ignore_eos = true;
        engine::EngineOptions options;
        options.prefix_caching = false;  // every run prefills the whole prompt
        auto local = LocalEngine::start(lm, options, nullptr);
        if (!local.ok()) return fail(local.error().message);

        double best_prefill = 1e30, best_decode = 1e30;
        for (int r = -1; r < args->repeats; ++r) {  // run -1 warms up
            auto gen = run_request((*local)->engine(), request, /*print=*/false);
            if (!gen.ok()) return fail(gen.error().message);
            if (r < 0) continue;
            best_prefill = std::min(best_prefill, gen->first_token_seconds);
            // The first token comes from the prefill; each later one from a decode step.
            best_decode = std::min(best_decode, (gen->finished_seconds - gen->first_token_seconds) /
                                                    (args->gen_tokens - 1));
        }
        const double prefill_tps = args->prompt_tokens / best_prefill;
        const double decode_tps = 1.0 / best_decode;
        if (args->json) {
            nlohmann::json out = {{"model", lm.config().name},
                                  {"prompt_tokens", args->prompt_tokens},
                                  {"gen_tokens", args->gen_tokens},
                                  {"prefill_tokens_per_s", prefill_tps},
                                  {"decode_tokens_per_s", decode_tps}};
            std::printf("%s\n", out.dump().c_str());
        } else {
            std::printf("model %s\nprefill %d tokens: %.1f tokens/s\n"
                        "decode %d tokens: %.1f tokens/s\n",
                        lm.config().name.c_str(), args->prompt_tokens, prefill_tps,
                        args->gen_tokens, decode_tps);
        }
        return 0;
    };
}

}  // namespace inferscale::cli
