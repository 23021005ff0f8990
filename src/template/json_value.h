#pragma once
// Values to and from JSON: transformers' tojson filter (Python's json.dumps) and the JSON a
// request carries (tools, tool-call arguments), with object keys kept in their order.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "template/value.h"

namespace inferscale::jinja {

struct JsonFormat {
    bool ensure_ascii = false;
    int indent = -1;                    // < 0: one line
    std::string item_separator = ", ";  // json.dumps' defaults: "," when indented
    std::string key_separator = ": ";
    bool sort_keys = false;
};

// json.dumps(v, ...). Throws TemplateError for values JSON cannot hold (undefined, callables).
std::string to_json(const Value& v, const JsonFormat& format);

Value from_json(const nlohmann::ordered_json& json);

}  // namespace inferscale::jinja
