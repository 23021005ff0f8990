// Request bodies of /v1/chat/completions (first byte even) and /v1/completions (odd) turned into
// engine requests, with structured outputs and tool calling compiled against a small
// byte-level vocabulary.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "apps/server/openai_api.h"
#include "grammar/grammar_cache.h"

using namespace inferscale;

namespace {

std::shared_ptr<const grammar::Vocabulary> byte_vocabulary() {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
    for (const char* word : {"{\"", "\":", "\"}", "true", "null", "name", "<tool_call>"})
        tokens.emplace_back(word);
    tokens.emplace_back("<|end|>");
    std::vector<bool> special(tokens.size(), false);
    special.back() = true;
    const auto end = static_cast<std::int32_t>(tokens.size() - 1);
    return std::make_shared<const grammar::Vocabulary>(std::move(tokens), std::move(special),
                                                       std::vector<std::int32_t>{end});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    static grammar::GrammarCache grammars(byte_vocabulary(), 4);
    server::ServedModel model;
    model.id = "smollm2";
    model.vocab_size = 49152;
    model.grammars = &grammars;
    const bool chat = data[0] % 2 == 0;
    const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
    const auto call = server::parse_completion_call(body, chat, model, engine::MemoryDefaults{});
    if (const auto* c = std::get_if<server::CompletionCall>(&call))
        (void)server::choice_requests(*c);
    return 0;
}
