#include "extract/engine_json_llm.h"

#include <string>

namespace inferscale::extract {

Result<nlohmann::json> EngineJsonLlm::complete(const std::vector<jinja::ChatMessage>& messages,
                                               const nlohmann::json& schema, int max_tokens) {
    engine::EngineRequest request;
    request.messages = messages;
    request.sampling.temperature = 0.0f;
    request.sampling.max_tokens = max_tokens;
    request.grammar = IS_TRY(engine_.model().grammars().json_schema(schema));
    request.background = true;
    std::shared_ptr<engine::RequestStream> stream = IS_TRY(engine_.submit(std::move(request)));
    const engine::Completion done = IS_TRY(stream->collect());
    if (std::string(done.finish_reason) == "length")
        return make_error(ErrorKind::Failed, "the extraction model's answer reached " +
                                                 std::to_string(max_tokens) +
                                                 " tokens before its JSON ended");
    nlohmann::json value = nlohmann::json::parse(done.text, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded())
        return make_error(ErrorKind::Failed,
                          "the extraction model's answer is not JSON: " + done.text);
    return value;
}

}  // namespace inferscale::extract
