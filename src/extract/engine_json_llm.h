#pragma once
// EngineJsonLlm: JsonLlm on an Engine: greedy, the schema compiled through the
// model's grammar cache, run as background work (EngineRequest::background) so
// foreground requests keep their latency.

#include "engine/engine.h"
#include "extract/json_llm.h"

namespace inferscale::extract {

class EngineJsonLlm final : public JsonLlm {
  public:
    // `engine` must outlive this object.
    explicit EngineJsonLlm(engine::Engine& engine) : engine_(engine) {}

    Result<nlohmann::json> complete(const std::vector<jinja::ChatMessage>& messages,
                                    const nlohmann::json& schema, int max_tokens) override;

  private:
    engine::Engine& engine_;
};

}  // namespace inferscale::extract
