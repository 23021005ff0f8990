// The validator in schema_check.h.

#include "schema_check.h"

#include <regex>

namespace inferscale::grammar::testing {
namespace {

using nlohmann::json;

std::size_t code_points(const std::string& s) {
    std::size_t n = 0;
    for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

bool has_type(const json& doc, const std::string& type) {
    if (type == "object") return doc.is_object();
    if (type == "array") return doc.is_array();
    if (type == "string") return doc.is_string();
    if (type == "integer") return doc.is_number_integer();
    if (type == "number") return doc.is_number();
    if (type == "boolean") return doc.is_boolean();
    if (type == "null") return doc.is_null();
    return false;
}

}  // namespace

std::string schema_violation(const json& doc, const json& schema, const json& root,
                             const std::string& path) {
    if (schema.is_boolean()) return schema.get<bool>() ? "" : path + ": schema false";
    if (schema.contains("$ref")) {
        std::string ref = schema["$ref"].get<std::string>().substr(1);
        return schema_violation(doc, root.at(json::json_pointer(ref)), root, path);
    }
    if (schema.contains("const") && doc != schema["const"]) return path + ": not the const";
    if (schema.contains("enum")) {
        bool found = false;
        for (const json& v : schema["enum"]) found |= v == doc;
        if (!found) return path + ": not in enum";
    }
    for (const char* key : {"anyOf", "oneOf"}) {
        if (!schema.contains(key)) continue;
        bool any = false;
        for (const json& alt : schema[key]) any |= schema_violation(doc, alt, root, path).empty();
        if (!any) return path + ": no " + key + " branch matches";
    }
    if (schema.contains("type")) {
        const json& t = schema["type"];
        bool ok = false;
        if (t.is_array()) {
            for (const json& one : t) ok |= has_type(doc, one.get<std::string>());
        } else {
            ok = has_type(doc, t.get<std::string>());
        }
        if (!ok) return path + ": wrong type " + std::string(doc.type_name());
    }
    if (doc.is_object()) {
        const json props = schema.value("properties", json::object());
        for (const json& r : schema.value("required", json::array())) {
            if (!doc.contains(r.get<std::string>()))
                return path + ": missing " + r.get<std::string>();
        }
        for (const auto& [key, value] : doc.items()) {
            if (props.contains(key)) {
                std::string v = schema_violation(value, props[key], root, path + "/" + key);
                if (!v.empty()) return v;
            } else if (schema.contains("additionalProperties")) {
                const json& ap = schema["additionalProperties"];
                std::string v = schema_violation(value, ap, root, path + "/" + key);
                if (!v.empty()) return v;
            } else if (schema.contains("properties")) {
                return path + ": unexpected key " + key;
            }
        }
    }
    if (doc.is_array()) {
        std::size_t n = doc.size();
        if (schema.contains("minItems") && n < schema["minItems"].get<std::size_t>())
            return path + ": too few items";
        if (schema.contains("maxItems") && n > schema["maxItems"].get<std::size_t>())
            return path + ": too many items";
        std::size_t k = 0;
        if (schema.contains("prefixItems")) {
            for (; k < schema["prefixItems"].size() && k < n; ++k) {
                std::string v = schema_violation(doc[k], schema["prefixItems"][k], root,
                                                 path + "/" + std::to_string(k));
                if (!v.empty()) return v;
            }
        }
        if (schema.contains("items")) {
            for (; k < n; ++k) {
                std::string v =
                    schema_violation(doc[k], schema["items"], root, path + "/" + std::to_string(k));
                if (!v.empty()) return v;
            }
        }
    }
    if (doc.is_string()) {
        std::size_t n = code_points(doc.get<std::string>());
        if (schema.contains("minLength") && n < schema["minLength"].get<std::size_t>())
            return path + ": too short";
        if (schema.contains("maxLength") && n > schema["maxLength"].get<std::size_t>())
            return path + ": too long";
        if (schema.contains("pattern") &&
            !std::regex_search(doc.get<std::string>(),
                               std::regex(schema["pattern"].get<std::string>()))) {
            return path + ": does not match the pattern";
        }
    }
    return "";
}

}  // namespace inferscale::grammar::testing
