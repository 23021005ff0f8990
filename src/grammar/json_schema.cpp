// JSON schema -> GBNF (the subset in json_schema.h). Every value rule matches the value alone;
// whitespace (rule `P-ws`, bounded) goes between tokens inside objects and arrays, never twice
// in a row, so the grammar stays unambiguous and a model cannot loop in whitespace.
// Objects: with properties p_0..p_{n-1} in order, `P-kvN-first-i` matches the members from p_i
// on when none was written yet and `P-kvN-rest-i` when one was (each then starts with a comma);
// an optional property is an alternative, a required one is not.

#include "grammar/json_schema.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "grammar/grammar.h"
#include "grammar/integer_range.h"
#include "grammar/regex_gbnf.h"

namespace inferscale::grammar {
namespace {

using json = nlohmann::ordered_json;

bool is_rule_name(std::string_view name) {
    if (name.empty()) return false;
    for (char c : name) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_';
        if (!ok) return false;
    }
    return true;
}

std::string literal(std::string_view bytes) { return gbnf_literal(bytes); }

// The shared JSON rules, named prefix-NAME.
std::string json_rules(const std::string& p) {
    std::string ws = p + "-ws";
    std::string s;
    s += p + "-ws ::= \"\" | \" \" | \"\\n\" [ \\t]{0,20}\n";
    s += p + "-char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n";
    s += p + "-string ::= \"\\\"\" " + p + "-char* \"\\\"\"\n";
    s += p + "-integer ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n";
    s += p + "-number ::= " + p + "-integer (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?\n";
    s += p + "-boolean ::= \"true\" | \"false\"\n";
    s += p + "-null ::= \"null\"\n";
    s += p + "-value ::= " + p + "-object | " + p + "-array | " + p + "-string | " + p +
         "-number | " + p + "-boolean | " + p + "-null\n";
    s += p + "-object ::= \"{\" " + ws + " (" + p + "-string " + ws + " \":\" " + ws + " " + p +
         "-value " + ws + " (\",\" " + ws + " " + p + "-string " + ws + " \":\" " + ws + " " + p +
         "-value " + ws + ")*)? \"}\"\n";
    s += p + "-array ::= \"[\" " + ws + " (" + p + "-value " + ws + " (\",\" " + ws + " " + p +
         "-value " + ws + ")*)? \"]\"\n";
    return s;
}

const std::set<std::string>& annotations() {
    static const std::set<std::string> k = {
        "title",  "description", "examples", "default",   "$schema", "$id",        "$comment",
        "strict", "deprecated",  "readOnly", "writeOnly", "$defs",   "definitions"};
    return k;
}

const std::set<std::string>& supported() {
    static const std::set<std::string> k = {"type",
                                            "properties",
                                            "required",
                                            "additionalProperties",
                                            "enum",
                                            "const",
                                            "anyOf",
                                            "oneOf",
                                            "allOf",
                                            "items",
                                            "prefixItems",
                                            "minItems",
                                            "maxItems",
                                            "minLength",
                                            "maxLength",
                                            "format",
                                            "$ref",
                                            "minimum",
                                            "maximum",
                                            "exclusiveMinimum",
                                            "exclusiveMaximum",
                                            "pattern"};
    return k;
}

class Converter {
  public:
    Converter(const json& root, std::string prefix) : root_(root), p_(std::move(prefix)) {}

    Result<std::string> run() {
        std::string body = IS_TRY(visit(root_, ""));
        std::string out = p_ + " ::= " + body + "\n";
        for (const auto& [name, rule] : rules_) out += name + " ::= " + rule + "\n";
        out += json_rules(p_);
        return out;
    }

  private:
    Error unsupported(const std::string& keyword, const std::string& path) {
        return make_error(
            ErrorKind::InvalidArgument,
            "unsupported JSON schema keyword `" + keyword + "` at " + (path.empty() ? "/" : path));
    }
    Error invalid(const std::string& what, const std::string& path) {
        return make_error(ErrorKind::InvalidArgument,
                          "invalid JSON schema at " + (path.empty() ? "/" : path) + ": " + what);
    }

    // A rule for `body`; the same body twice (two fields with maxLength 100) is one rule, so
    // the vocabulary is walked for its positions once.
    std::string new_rule(const std::string& hint, std::string body) {
        auto known = bodies_.find(body);
        if (known != bodies_.end()) return known->second;
        std::string name = p_ + "-" + hint + std::to_string(counter_++);
        bodies_.emplace(body, name);
        rules_.emplace_back(name, std::move(body));
        return name;
    }
    std::string ws() const { return p_ + "-ws"; }

    Result<std::string> visit(const json& schema, const std::string& path) {
        if (schema.is_boolean()) {
            if (schema.get<bool>()) return p_ + "-value";
            return invalid("the schema `false` allows no value", path);
        }
        if (!schema.is_object()) return invalid("a schema must be an object or a boolean", path);
        for (const auto& [key, value] : schema.items()) {
            if (!supported().count(key) && !annotations().count(key)) {
                return unsupported(key, path);
            }
        }
        if (schema.contains("$ref")) return visit_ref(schema, path);
        if (schema.contains("const")) return literal(schema["const"].dump());
        if (schema.contains("enum")) {
            const json& values = schema["enum"];
            if (!values.is_array() || values.empty())
                return invalid("enum must be a non-empty array", path + "/enum");
            std::string out = "(";
            for (std::size_t i = 0; i < values.size(); ++i) {
                if (i > 0) out += " | ";
                out += literal(values[i].dump());
            }
            return out + ")";
        }
        for (const char* key : {"anyOf", "oneOf"}) {
            if (!schema.contains(key)) continue;
            const json& alts = schema[key];
            if (!alts.is_array() || alts.empty())
                return invalid(std::string(key) + " must be a non-empty array", path);
            std::string out = "(";
            for (std::size_t i = 0; i < alts.size(); ++i) {
                if (i > 0) out += " | ";
                out += IS_TRY(visit(merged_with_siblings(schema, alts[i], key),
                                    path + "/" + key + "/" + std::to_string(i)));
            }
            return out + ")";
        }
        if (schema.contains("allOf")) {
            const json& all = schema["allOf"];
            if (!all.is_array() || all.empty())
                return invalid("allOf must be a non-empty array", path);
            if (all.size() == 1) {
                return visit(merged_with_siblings(schema, all[0], "allOf"), path + "/allOf/0");
            }
            json merged = IS_TRY(merge_objects(schema, path));
            return visit(merged, path);
        }
        if (schema.contains("type")) {
            const json& type = schema["type"];
            if (type.is_array()) {
                if (type.empty()) return invalid("type list is empty", path + "/type");
                std::string out = "(";
                for (std::size_t i = 0; i < type.size(); ++i) {
                    if (!type[i].is_string())
                        return invalid("type must be a string", path + "/type");
                    if (i > 0) out += " | ";
                    out += IS_TRY(visit_type(schema, type[i].get<std::string>(), path));
                }
                return out + ")";
            }
            if (!type.is_string()) return invalid("type must be a string", path + "/type");
            return visit_type(schema, type.get<std::string>(), path);
        }
        if (schema.contains("properties") || schema.contains("additionalProperties") ||
            schema.contains("required")) {
            return visit_type(schema, "object", path);
        }
        if (schema.contains("items") || schema.contains("prefixItems")) {
            return visit_type(schema, "array", path);
        }
        // Keywords of one type only constrain values of that type; without a type the grammar
        // would not enforce them.
        for (const char* key :
             {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
              "maxLength", "format", "minItems", "maxItems", "pattern"}) {
            if (schema.contains(key)) return unsupported(key, path);
        }
        return p_ + "-value";
    }

    // Integer bounds: minimum/maximum and exclusive ones (numbers; draft 4's boolean forms are
    // not supported).
    Result<std::string> visit_integer(const json& schema, const std::string& path) {
        std::optional<std::int64_t> lo;
        std::optional<std::int64_t> hi;
        auto bound = [&](const char* key) -> Result<std::optional<double>> {
            if (!schema.contains(key)) return std::optional<double>();
            const json& v = schema[key];
            if (!v.is_number()) return unsupported(key, path);
            double x = v.get<double>();
            if (std::fabs(x) > 1e16) return std::optional<double>();  // beyond 16 digits
            return std::optional<double>(x);
        };
        auto tighten_lo = [&](std::int64_t v) { lo = lo ? std::max(*lo, v) : v; };
        auto tighten_hi = [&](std::int64_t v) { hi = hi ? std::min(*hi, v) : v; };
        if (auto v = IS_TRY(bound("minimum"))) tighten_lo(static_cast<std::int64_t>(std::ceil(*v)));
        if (auto v = IS_TRY(bound("exclusiveMinimum"))) {
            tighten_lo(static_cast<std::int64_t>(std::floor(*v)) + 1);
        }
        if (auto v = IS_TRY(bound("maximum")))
            tighten_hi(static_cast<std::int64_t>(std::floor(*v)));
        if (auto v = IS_TRY(bound("exclusiveMaximum"))) {
            tighten_hi(static_cast<std::int64_t>(std::ceil(*v)) - 1);
        }
        if (!lo && !hi) return p_ + "-integer";
        if (lo && hi && *lo > *hi) return invalid("no integer lies between the bounds", path);
        return new_rule("integer", integer_range_gbnf(lo, hi));
    }

    // Numbers: only `minimum: 0` (no sign) is supported among the bounds.
    Result<std::string> visit_number(const json& schema, const std::string& path) {
        for (const char* key : {"maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
            if (schema.contains(key)) return unsupported(key, path);
        }
        if (!schema.contains("minimum")) return p_ + "-number";
        const json& m = schema["minimum"];
        if (!m.is_number() || m.get<double>() != 0.0) return unsupported("minimum", path);
        return new_rule("number",
                        "(\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,16})? "
                        "([eE] [-+]? [0-9]{1,3})?");
    }

    // allOf over object schemas (each with properties, required and nothing else that
    // constrains): one object schema with every member's properties and required keys.
    Result<json> merge_objects(const json& schema, const std::string& path) {
        json merged = json::object();
        for (const auto& [k, v] : schema.items()) {
            if (k != "allOf") merged[k] = v;
        }
        if (!merged.contains("type")) merged["type"] = "object";
        if (merged["type"] != "object") return unsupported("allOf", path);
        json properties = merged.value("properties", json::object());
        json required = merged.value("required", json::array());
        const json& all = schema["allOf"];
        for (std::size_t i = 0; i < all.size(); ++i) {
            const json* member = &all[i];
            std::string at = path + "/allOf/" + std::to_string(i);
            if (member->is_object() && member->contains("$ref") && (*member)["$ref"].is_string()) {
                std::string target = (*member)["$ref"].get<std::string>();
                json::json_pointer ptr;
                try {
                    ptr = json::json_pointer(target.substr(1));
                } catch (const std::exception&) {
                    return unsupported("allOf", at);
                }
                if (target.empty() || target[0] != '#' || !root_.contains(ptr)) {
                    return unsupported("allOf", at);
                }
                member = &root_.at(ptr);
            }
            if (!member->is_object()) return unsupported("allOf", at);
            for (const auto& [k, v] : member->items()) {
                if (annotations().count(k)) continue;
                if (k == "type" && v == "object") continue;
                if (k == "properties" && v.is_object()) {
                    for (const auto& [name, sub] : v.items()) {
                        if (properties.contains(name))
                            return unsupported("allOf", at + "/properties/" + name);
                        properties[name] = sub;
                    }
                    continue;
                }
                if (k == "required" && v.is_array()) {
                    for (const json& r : v) required.push_back(r);
                    continue;
                }
                return unsupported("allOf", at + "/" + k);
            }
        }
        merged["properties"] = properties;
        merged["required"] = required;
        return merged;
    }

    // A branch of anyOf/oneOf/allOf with the parent's other keywords (e.g. a shared `type`).
    static json merged_with_siblings(const json& parent, const json& branch, const char* key) {
        if (!branch.is_object()) return branch;
        json out = branch;
        for (const auto& [k, v] : parent.items()) {
            if (k != key && !out.contains(k) && !annotations().count(k)) out[k] = v;
        }
        return out;
    }

    Result<std::string> visit_ref(const json& schema, const std::string& path) {
        const json& ref = schema["$ref"];
        if (!ref.is_string()) return invalid("$ref must be a string", path + "/$ref");
        std::string target = ref.get<std::string>();
        if (target.empty() || target[0] != '#') return unsupported("$ref", path);
        auto found = refs_.find(target);
        if (found != refs_.end()) return found->second;
        std::string pointer = target.substr(1);
        json::json_pointer ptr;
        try {
            ptr = json::json_pointer(pointer);
        } catch (const std::exception&) {
            return invalid("bad $ref `" + target + "`", path + "/$ref");
        }
        if (!root_.contains(ptr)) return invalid("$ref `" + target + "` not found", path + "/$ref");
        std::string name = p_ + "-ref" + std::to_string(counter_++);
        refs_.emplace(target, name);
        std::size_t slot = rules_.size();
        rules_.emplace_back(name, "");
        std::string body = IS_TRY(visit(root_.at(ptr), pointer));
        rules_[slot].second = body;
        return name;
    }

    Result<std::string> visit_type(const json& schema, const std::string& type,
                                   const std::string& path) {
        if (type == "object") return visit_object(schema, path);
        if (type == "array") return visit_array(schema, path);
        if (type == "string") return visit_string(schema, path);
        if (type == "number") return visit_number(schema, path);
        if (type == "integer") return visit_integer(schema, path);
        if (type == "boolean") return p_ + "-boolean";
        if (type == "null") return p_ + "-null";
        return invalid("unknown type `" + type + "`", path + "/type");
    }

    Result<std::string> visit_string(const json& schema, const std::string& path) {
        if (schema.contains("pattern")) {
            for (const char* key : {"format", "minLength", "maxLength"}) {
                if (schema.contains(key))
                    return unsupported(std::string(key) + "` with `pattern", path);
            }
            const json& pattern = schema["pattern"];
            if (!pattern.is_string()) return invalid("pattern must be a string", path + "/pattern");
            auto body = regex_to_gbnf(pattern.get<std::string>(), p_ + "-char");
            if (!body.ok()) {
                return make_error(ErrorKind::InvalidArgument, unsupported("pattern", path).message +
                                                                  ": " + body.error().message);
            }
            return new_rule("pattern", "\"\\\"\" " + *body + " \"\\\"\"");
        }
        if (schema.contains("format")) {
            std::string f = schema["format"].is_string() ? schema["format"].get<std::string>() : "";
            std::string date =
                "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [12] [0-9] | "
                "\"3\" [01])";
            std::string time =
                "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" "
                "[0-9]{1,6})? "
                "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])";
            std::string body;
            if (f == "date") {
                body = date;
            } else if (f == "time") {
                body = time;
            } else if (f == "date-time") {
                body = date + " \"T\" " + time;
            } else if (f == "uuid") {
                body =
                    "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
                    "[0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}";
            } else {
                return unsupported("format", path);
            }
            return new_rule("format", "\"\\\"\" " + body + " \"\\\"\"");
        }
        int min = 0;
        int max = -1;
        if (schema.contains("minLength")) min = IS_TRY(count(schema, "minLength", path));
        if (schema.contains("maxLength")) max = IS_TRY(count(schema, "maxLength", path));
        if (min == 0 && max < 0) return p_ + "-string";
        if (max >= 0 && max < min) return invalid("maxLength < minLength", path);
        std::string rep =
            "{" + std::to_string(min) + "," + (max < 0 ? "" : std::to_string(max)) + "}";
        return new_rule("string", "\"\\\"\" " + p_ + "-char" + rep + " \"\\\"\"");
    }

    Result<int> count(const json& schema, const char* key, const std::string& path) {
        const json& v = schema[key];
        if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > 100000) {
            return invalid(std::string(key) + " must be a non-negative integer", path + "/" + key);
        }
        return static_cast<int>(v.get<long long>());
    }

    Result<std::string> visit_object(const json& schema, const std::string& path) {
        std::vector<std::pair<std::string, std::string>> props;  // key literal, value expr
        std::set<std::string> required;
        if (schema.contains("required")) {
            if (!schema["required"].is_array())
                return invalid("required must be an array", path + "/required");
            for (const json& r : schema["required"]) {
                if (!r.is_string())
                    return invalid("required must list strings", path + "/required");
                required.insert(r.get<std::string>());
            }
        }
        std::vector<bool> is_required;
        if (schema.contains("properties")) {
            const json& properties = schema["properties"];
            if (!properties.is_object())
                return invalid("properties must be an object", path + "/properties");
            for (const auto& [key, sub] : properties.items()) {
                std::string value = IS_TRY(visit(sub, path + "/properties/" + key));
                props.emplace_back(literal(json(key).dump()), value);
                is_required.push_back(required.count(key) > 0);
            }
        }
        std::string extra;  // the value expression of additional properties, "" when none
        if (schema.contains("additionalProperties")) {
            const json& ap = schema["additionalProperties"];
            if (ap.is_boolean()) {
                if (ap.get<bool>()) extra = p_ + "-value";
            } else {
                extra = IS_TRY(visit(ap, path + "/additionalProperties"));
            }
        } else if (!schema.contains("properties")) {
            extra = p_ + "-value";  // {"type": "object"}: any object
        }
        for (const std::string& r : required) {
            if (!schema.contains("properties") || !schema["properties"].contains(r)) {
                if (extra.empty())
                    return invalid("required property `" + r + "` is not allowed", path);
                return unsupported("required", path);  // a required key outside properties
            }
        }
        std::string w = ws();
        int id = counter_++;
        std::string base = p_ + "-kv" + std::to_string(id);
        std::size_t n = props.size();
        std::vector<std::string> member(n);
        for (std::size_t i = 0; i < n; ++i) {
            member[i] = props[i].first + " " + w + " \":\" " + w + " " + props[i].second + " " + w;
        }
        std::string extra_member =
            extra.empty() ? "" : p_ + "-string " + w + " \":\" " + w + " " + extra + " " + w;
        auto first = [&](std::size_t i) { return base + "-first-" + std::to_string(i); };
        auto rest = [&](std::size_t i) { return base + "-rest-" + std::to_string(i); };
        for (std::size_t i = 0; i <= n; ++i) {
            std::string f;
            std::string r;
            if (i == n) {
                f = extra.empty()
                        ? "\"\""
                        : "(" + extra_member + " (\",\" " + w + " " + extra_member + ")*)?";
                r = extra.empty() ? "\"\"" : "(\",\" " + w + " " + extra_member + ")*";
            } else if (is_required[i]) {
                f = member[i] + " " + rest(i + 1);
                r = "\",\" " + w + " " + member[i] + " " + rest(i + 1);
            } else {
                f = member[i] + " " + rest(i + 1) + " | " + first(i + 1);
                r = "(\",\" " + w + " " + member[i] + ")? " + rest(i + 1);
            }
            rules_.emplace_back(first(i), f);
            rules_.emplace_back(rest(i), r);
        }
        return new_rule("object", "\"{\" " + w + " " + first(0) + " \"}\"");
    }

    Result<std::string> visit_array(const json& schema, const std::string& path) {
        int min = 0;
        int max = -1;
        if (schema.contains("minItems")) min = IS_TRY(count(schema, "minItems", path));
        if (schema.contains("maxItems")) max = IS_TRY(count(schema, "maxItems", path));
        if (max >= 0 && max < min) return invalid("maxItems < minItems", path);
        std::vector<std::string> prefix;
        if (schema.contains("prefixItems")) {
            const json& items = schema["prefixItems"];
            if (!items.is_array())
                return invalid("prefixItems must be an array", path + "/prefixItems");
            for (std::size_t i = 0; i < items.size(); ++i) {
                prefix.push_back(
                    IS_TRY(visit(items[i], path + "/prefixItems/" + std::to_string(i))));
            }
        }
        std::string item;  // "" when no items follow the prefix
        if (schema.contains("items")) {
            const json& items = schema["items"];
            if (!(items.is_boolean() && !items.get<bool>())) {
                item = IS_TRY(visit(items, path + "/items"));
            }
        } else if (prefix.empty()) {
            item = p_ + "-value";
        }
        std::string w = ws();
        int k = static_cast<int>(prefix.size());
        if (max >= 0 && k > max) k = max;
        if (item.empty() && min > k) return invalid("minItems exceeds the items allowed", path);
        auto element = [&](int j, const std::string& value) {
            return (j == 0 ? "" : "\",\" " + w + " ") + value + " " + w;
        };
        // The tail after the prefix: further items, min' to max' of them.
        std::string tail;
        if (!item.empty() && (max < 0 || max > k)) {
            int rmin = std::max(0, min - k);
            int rmax = max < 0 ? -1 : max - k;
            auto rep = [](int lo, int hi) {
                return "{" + std::to_string(lo) + "," + (hi < 0 ? "" : std::to_string(hi)) + "}";
            };
            if (k == 0) {
                std::string more = "(\",\" " + w + " " + item + " " + w + ")" +
                                   rep(std::max(0, rmin - 1), rmax < 0 ? -1 : rmax - 1);
                tail = item + " " + w + " " + more;
                if (rmin == 0) tail = "(" + tail + ")?";
            } else {
                tail = "(\",\" " + w + " " + item + " " + w + ")" + rep(rmin, rmax);
            }
        }
        std::string content = tail;
        for (int j = k - 1; j >= 0; --j) {
            std::string e = element(j, prefix[j]) + (content.empty() ? "" : " " + content);
            content = j < min ? e : "(" + e + ")?";
        }
        return new_rule("array",
                        "\"[\" " + w + " " + (content.empty() ? "" : content + " ") + "\"]\"");
    }

    const json& root_;
    std::string p_;
    std::vector<std::pair<std::string, std::string>> rules_;
    std::map<std::string, std::string> refs_;
    std::map<std::string, std::string> bodies_;  // rule body -> name
    int counter_ = 0;
};

}  // namespace

std::string json_object_gbnf() { return "root ::= root-object\n" + json_rules("root"); }

Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema, std::string_view rule_name) {
    return json_schema_to_gbnf(nlohmann::ordered_json::parse(schema.dump()), rule_name);
}

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema,
                                        std::string_view rule_name) {
    if (!is_rule_name(rule_name)) {
        return make_error(ErrorKind::InvalidArgument,
                          "rule name `" + std::string(rule_name) + "` is not a GBNF name");
    }
    return Converter(schema, std::string(rule_name)).run();
}

}  // namespace inferscale::grammar
