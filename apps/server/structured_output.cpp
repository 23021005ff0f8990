#include "apps/server/structured_output.h"

#include <string>

#include "apps/server/json_fields.h"

namespace inferscale::server {

using nlohmann::json;

std::optional<ApiError> read_output_format(const json& body, OrderedBody& ordered,
                                           grammar::GrammarCache& grammars,
                                           std::shared_ptr<const grammar::CompiledGrammar>& out) {
    const auto format = body.find("response_format");
    const auto gbnf = body.find("grammar");
    const bool has_format = format != body.end() && !format->is_null();
    const bool has_grammar = gbnf != body.end() && !gbnf->is_null();
    if (has_format && has_grammar)
        return bad_request("give either 'response_format' or 'grammar', not both", "grammar");
    if (has_grammar) {
        if (!gbnf->is_string()) return bad_request("'grammar' must be a string (GBNF)", "grammar");
        auto compiled = grammars.gbnf(gbnf->get<std::string>());
        if (!compiled.ok()) return bad_request("'grammar': " + compiled.error().message, "grammar");
        out = std::move(compiled).value();
        return std::nullopt;
    }
    if (!has_format) return std::nullopt;
    if (!format->is_object())
        return bad_request("'response_format' must be an object", "response_format");
    const auto type = format->find("type");
    if (type == format->end() || !type->is_string())
        return bad_request("'response_format.type' must be 'text', 'json_object' or 'json_schema'",
                           "response_format.type");
    const std::string kind = type->get<std::string>();
    if (kind == "text" || kind == "json_object") {
        if (auto e = unsupported_field(*format, {"type"}, "response_format.")) return e;
        if (kind == "json_object") out = grammars.json_object();
        return std::nullopt;
    }
    if (kind != "json_schema")
        return bad_request("'response_format.type' must be 'text', 'json_object' or 'json_schema'",
                           "response_format.type");
    if (auto e = unsupported_field(*format, {"type", "json_schema"}, "response_format.")) return e;
    const auto spec = format->find("json_schema");
    if (spec == format->end() || !spec->is_object())
        return bad_request("'response_format.json_schema' must be an object",
                           "response_format.json_schema");
    if (auto e = unsupported_field(*spec, {"name", "description", "schema", "strict"},
                                   "response_format.json_schema."))
        return e;
    Fields f(*spec);
    std::string name, description;
    bool strict = false;
    f.read("name", name, "a string", &json::is_string);
    f.read("description", description, "a string", &json::is_string);
    f.read("strict", strict, "a boolean", &json::is_boolean);
    if (f.error) {
        f.error->param = "response_format.json_schema." + f.error->param.value_or("");
        return f.error;
    }
    const auto schema = spec->find("schema");
    if (schema == spec->end() || !(schema->is_object() || schema->is_boolean()))
        return bad_request("'response_format.json_schema.schema' must be a JSON schema object",
                           "response_format.json_schema.schema");
    // Strict or not, the answer follows the schema: decoding cannot leave it. `body` sorted
    // the keys; the ordered body has the schema's own property order.
    auto compiled =
        grammars.json_schema(ordered.get()["response_format"]["json_schema"]["schema"]);
    if (!compiled.ok())
        return bad_request("'response_format.json_schema.schema': " + compiled.error().message,
                           "response_format.json_schema.schema");
    out = std::move(compiled).value();
    return std::nullopt;
}

}  // namespace inferscale::server
