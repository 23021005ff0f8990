#include "apps/server/memory_filter.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

namespace inferscale::server {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 10> kOperators = {
    "eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "contains", "icontains"};

std::optional<ApiError> check_operand(const std::string& op, const json& value,
                                      const std::string& where) {
    const auto wrong = [&](const char* what) {
        return bad_request("'" + where + "." + op + "' must be " + what, where);
    };
    if ((op == "in" || op == "nin") && !value.is_array()) return wrong("a list");
    if ((op == "gt" || op == "gte" || op == "lt" || op == "lte") && !value.is_number())
        return wrong("a number");
    if ((op == "contains" || op == "icontains") && !value.is_string()) return wrong("a string");
    return std::nullopt;
}

// The fact's value under `key`, or null when it has none.
json value_of(const std::string& key, const memory::Fact& fact, const json& metadata) {
    const auto scope = [](const std::string& v) { return v.empty() ? json() : json(v); };
    if (key == "user_id") return json(fact.user);
    if (key == "agent_id") return scope(fact.agent_id);
    if (key == "run_id") return scope(fact.run_id);
    if (metadata.is_object())
        if (auto it = metadata.find(key); it != metadata.end()) return *it;
    return json();
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

bool test(const std::string& op, const json& value, const json& operand) {
    const bool present = !value.is_null();
    if (op == "*") return present;
    if (op == "eq") return present && value == operand;
    if (op == "ne") return !(present && value == operand);
    if (op == "in" || op == "nin") {
        const bool in =
            present && std::find(operand.begin(), operand.end(), value) != operand.end();
        return op == "in" ? in : !in;
    }
    if (op == "contains" || op == "icontains") {
        if (!value.is_string()) return false;
        std::string haystack = value.get<std::string>(), needle = operand.get<std::string>();
        if (op == "icontains") {
            haystack = lower(std::move(haystack));
            needle = lower(std::move(needle));
        }
        return haystack.find(needle) != std::string::npos;
    }
    if (!value.is_number()) return false;
    const double v = value.get<double>(), x = operand.get<double>();
    if (op == "gt") return v > x;
    if (op == "gte") return v >= x;
    if (op == "lt") return v < x;
    return v <= x;  // lte: parse admits nothing else
}

}  // namespace

std::variant<MemoryFilter, ApiError> MemoryFilter::parse(const json& filters) {
    if (!filters.is_object()) return bad_request("'filters' must be an object", "filters");
    MemoryFilter filter;
    if (auto error = parse_node(filters, "filters", filter.root_)) return *error;
    return filter;
}

std::optional<ApiError> MemoryFilter::parse_node(const json& obj, const std::string& where,
                                                 Node& out) {
    out.kind = Node::Kind::All;
    for (const auto& [key, value] : obj.items()) {
        const std::string at = where + "." + key;
        if (key == "AND" || key == "OR" || key == "NOT") {
            if (!value.is_array() || value.empty())
                return bad_request("'" + at + "' must be a non-empty list of filter objects", at);
            Node group;
            group.kind = key == "AND"  ? Node::Kind::All
                         : key == "OR" ? Node::Kind::Any
                                       : Node::Kind::None;
            for (std::size_t i = 0; i < value.size(); ++i) {
                const std::string item = at + "[" + std::to_string(i) + "]";
                if (!value[i].is_object())
                    return bad_request("'" + item + "' must be a filter object", item);
                Node child;
                if (auto error = parse_node(value[i], item, child)) return error;
                group.children.push_back(std::move(child));
            }
            out.children.push_back(std::move(group));
            continue;
        }
        if (!value.is_object()) {
            const bool any = value.is_string() && value.get<std::string>() == "*";
            out.children.push_back({Node::Kind::Test, {}, key, any ? "*" : "eq", value});
            continue;
        }
        if (value.empty()) return bad_request("'" + at + "' names no operator", at);
        for (const auto& [op, operand] : value.items()) {
            if (std::find(kOperators.begin(), kOperators.end(), op) == kOperators.end())
                return bad_request("unsupported filter operator '" + op + "' in '" + at +
                                       "' (supported: eq, ne, in, nin, gt, gte, lt, lte, "
                                       "contains, icontains)",
                                   at);
            if (auto error = check_operand(op, operand, at)) return error;
            out.children.push_back({Node::Kind::Test, {}, key, op, operand});
        }
    }
    return std::nullopt;
}

bool MemoryFilter::matches(const memory::Fact& fact, const json& metadata) const {
    return eval(root_, fact, metadata);
}

bool MemoryFilter::eval(const Node& node, const memory::Fact& fact, const json& metadata) {
    const auto holds = [&](const Node& child) { return eval(child, fact, metadata); };
    switch (node.kind) {
        case Node::Kind::All:
            return std::all_of(node.children.begin(), node.children.end(), holds);
        case Node::Kind::Any:
            return std::any_of(node.children.begin(), node.children.end(), holds);
        case Node::Kind::None:
            return std::none_of(node.children.begin(), node.children.end(), holds);
        case Node::Kind::Test:
            return test(node.op, value_of(node.key, fact, metadata), node.operand);
    }
    return false;
}

}  // namespace inferscale::server
