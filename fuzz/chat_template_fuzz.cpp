// Jinja chat templates: parse the input as a template, then render a small fixed conversation
// with tools and with a generation prompt.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "template/chat_template.h"
#include "template/json_value.h"

using namespace inferscale::jinja;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view source(reinterpret_cast<const char*>(data), size);
    auto tmpl = ChatTemplate::parse(source, {"<s>", "</s>"});
    if (!tmpl.ok()) return 0;
    std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi"}};
    ChatMessage call("assistant", "");
    call.tool_calls.push_back({"call_1", "lookup", R"({"q": "x"})"});
    messages.push_back(call);
    ChatMessage result("tool", "42");
    result.tool_call_id = "call_1";
    messages.push_back(result);
    static const Value tools = from_json(nlohmann::ordered_json::parse(
        R"([{"type": "function", "function": {"name": "lookup", "description": "Looks up.",)"
        R"( "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}])"));
    (void)tmpl->render(messages, true, tools);
    return 0;
}
