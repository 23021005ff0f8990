#pragma once
// Helpers for the tokenizer tests: locate and read the golden fixtures.

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace inferscale::tokenizer::testing {

inline std::string fixture_path(const std::string& name) {
    const char* root = std::getenv("INFERSCALE_FIXTURES");
    return std::string(root ? root : "tests/fixtures") + "/tokenizer/" + name;
}

inline std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

inline nlohmann::json read_json(const std::string& name) {
    return nlohmann::json::parse(read_text(fixture_path(name)));
}

}  // namespace inferscale::tokenizer::testing
