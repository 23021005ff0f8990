#pragma once
// A small JSON schema validator for the subset the grammar supports, written independently of
// the grammar, to check what random walks produce.

#include <nlohmann/json.hpp>
#include <string>

namespace inferscale::grammar::testing {

// Empty when `doc` satisfies `schema` (whose $refs resolve against `root`), else why not.
std::string schema_violation(const nlohmann::json& doc, const nlohmann::json& schema,
                             const nlohmann::json& root, const std::string& path = "");

}  // namespace inferscale::grammar::testing
