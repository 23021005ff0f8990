#pragma once
// Helpers for the tokenizer tests: locate and read the golden fixtures.

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/vocab_data.h"

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

// The bundled SmolLM2 GGUF's vocabulary (smollm2_vocab.json, tools/make_tokenizer_fixtures.py).
inline VocabData read_smollm2_vocab() {
    const auto j = read_json("smollm2_vocab.json");
    VocabData v;
    v.model = j.at("model");
    v.pre = j.at("pre");
    v.tokens = j.at("tokens").get<std::vector<std::string>>();
    for (int t : j.at("token_types")) v.token_types.push_back(static_cast<TokenType>(t));
    v.merges = j.at("merges").get<std::vector<std::string>>();
    v.bos_id = j.at("bos_id");
    v.eos_id = j.at("eos_id");
    v.unk_id = j.at("unk_id");
    v.pad_id = j.at("pad_id");
    v.add_bos = j.at("add_bos");
    v.add_space_prefix = j.at("add_space_prefix");
    return v;
}

}  // namespace inferscale::tokenizer::testing
