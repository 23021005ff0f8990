#pragma once
// JsonLlm: the one thing fact extraction asks of a language model: answer a
// chat with a JSON value that follows a schema (structured output).
// EngineJsonLlm runs it on the engine.

#include <nlohmann/json.hpp>
#include <vector>

#include "base/result.h"
#include "template/chat_template.h"

namespace inferscale::extract {

class JsonLlm {
  public:
    virtual ~JsonLlm() = default;
    // The model's answer to `messages`, constrained to `schema` and parsed. An
    // Error when the model cannot run, or its answer is cut off by `max_tokens`
    // before the JSON ends.
    virtual Result<nlohmann::json> complete(const std::vector<jinja::ChatMessage>& messages,
                                            const nlohmann::json& schema, int max_tokens) = 0;
};

}  // namespace inferscale::extract
