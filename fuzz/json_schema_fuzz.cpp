// JSON schema to grammar: the schema compiled to GBNF and that GBNF parsed into a grammar.

#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

using namespace inferscale::grammar;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto schema = nlohmann::ordered_json::parse(data, data + size, nullptr, false);
    if (schema.is_discarded()) return 0;
    auto grammar = Grammar::from_json_schema(schema);
    if (grammar.ok()) (void)(*grammar)->accepts(R"({"a": 1, "b": [true, null, "x"]})");
    return 0;
}
