#pragma once
// MemoryFilter: the `filters` object of a memory search, as Mem0 reads it, over a fact's
// user_id, agent_id and run_id (null when absent) and its metadata keys:
//   {"key": value}                      equal (JSON equality; "*" matches any present value)
//   {"key": {"op": value, ...}}         every operator holds: eq, ne, in, nin (a list), gt, gte,
//                                       lt, lte (numbers), contains, icontains (strings; icontains
//                                       folds ASCII case)
//   {"AND": [f, ...]} {"OR": [f, ...]}  every / any filter holds
//   {"NOT": [f, ...]}                   none of the filters holds
// A key missing from the metadata fails every operator but ne and nin. An unknown operator or
// an operand of the wrong type is a 400 naming the filter.

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/server/api_error.h"
#include "memory/memory_types.h"

namespace inferscale::server {

class MemoryFilter {
  public:
    // An empty object matches every fact.
    static std::variant<MemoryFilter, ApiError> parse(const nlohmann::json& filters);

    // `metadata`: the fact's metadata, parsed.
    bool matches(const memory::Fact& fact, const nlohmann::json& metadata) const;

  private:
    struct Node {
        enum class Kind { All, Any, None, Test } kind = Kind::All;
        std::vector<Node> children;  // All, Any, None
        std::string key;             // Test
        std::string op;              // Test: "eq", "ne", ... ("*": present)
        nlohmann::json operand;      // Test
    };
    static std::optional<ApiError> parse_node(const nlohmann::json& obj, const std::string& where,
                                              Node& out);
    static bool eval(const Node& node, const memory::Fact& fact, const nlohmann::json& metadata);

    Node root_;
};

}  // namespace inferscale::server
