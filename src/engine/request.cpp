#include "engine/request.h"

namespace inferscale::engine {

const char* memory_mode_name(MemoryMode mode) {
    switch (mode) {
        case MemoryMode::Kv:
            return "kv";
        case MemoryMode::Prompt:
            return "prompt";
        case MemoryMode::None:
            return "none";
    }
    return "?";
}

Result<MemoryMode> parse_memory_mode(std::string_view name) {
    if (name == "kv") return MemoryMode::Kv;
    if (name == "prompt") return MemoryMode::Prompt;
    if (name == "none") return MemoryMode::None;
    return make_error("unknown memory mode '" + std::string(name) + "' (kv, prompt or none)");
}

std::optional<MemoryChoiceError> choose_memory(const MemoryChoice& choice,
                                               const MemoryDefaults& defaults,
                                               EngineRequest& request) {
    request.memory_mode = request.user.empty() ? MemoryMode::None : defaults.mode;
    if (choice.mode) {
        auto parsed = parse_memory_mode(*choice.mode);
        if (!parsed.ok()) return MemoryChoiceError{"mode", parsed.error().message};
        request.memory_mode = *parsed;
    }
    const std::int64_t top_k = choice.top_k.value_or(defaults.top_k);
    const std::int64_t window = choice.context_window.value_or(defaults.context_window);
    if (top_k < 0 || top_k > 1000) return MemoryChoiceError{"top_k", "must be in [0, 1000]"};
    if (window < 0 || window > 1000)
        return MemoryChoiceError{"context_window", "must be in [0, 1000]"};
    request.retrieval.top_k = static_cast<int>(top_k);
    request.retrieval.context_window = static_cast<int>(window);
    request.retrieval.method = defaults.retrieval;
    if (choice.retrieval) {
        auto parsed = retrieval::parse_retrieval_method(*choice.retrieval);
        if (!parsed.ok()) return MemoryChoiceError{"retrieval", parsed.error().message};
        request.retrieval.method = *parsed;
    }
    if (request.memory_mode != MemoryMode::None && request.user.empty())
        return MemoryChoiceError{"user", "memory needs a user"};
    return std::nullopt;
}

}  // namespace inferscale::engine
