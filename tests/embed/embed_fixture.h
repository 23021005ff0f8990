#pragma once
// The sentence-embedding golden fixture (tests/fixtures/embed/minilm_embeddings.json, from
// tools/make_embedding_fixtures.py) and the model folder it belongs to, for the CPU and CUDA
// encoder tests.

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace inferscale::embed::testing {

struct Case {
    std::string text;
    std::vector<std::int32_t> ids;
    std::vector<float> embedding;
};

struct Fixture {
    std::int64_t dim = 0;
    std::int64_t max_seq_length = 0;
    std::vector<Case> cases;
};

inline constexpr const char* kSkipMessage =
    "models/all-minilm-l6-v2 absent (scripts/fetch_embedding_model.sh fetches it)";

inline std::string model_dir() {
    const char* models = std::getenv("INFERSCALE_MODELS");
    return std::string(models ? models : "models") + "/all-minilm-l6-v2";
}

inline bool model_present() {
    struct stat st {};
    return ::stat((model_dir() + "/model.safetensors").c_str(), &st) == 0;
}

inline Fixture read_fixture() {
    const char* root = std::getenv("INFERSCALE_FIXTURES");
    std::ifstream in(std::string(root ? root : "tests/fixtures") + "/embed/minilm_embeddings.json");
    std::stringstream text;
    text << in.rdbuf();
    const auto j = nlohmann::json::parse(text.str());
    Fixture f;
    f.dim = j.at("dim");
    f.max_seq_length = j.at("max_seq_length");
    for (const auto& c : j.at("cases")) {
        f.cases.push_back({c.at("text"), c.at("ids"), c.at("embedding")});
    }
    return f;
}

inline double norm(std::span<const float> a) {
    double s = 0.0;
    for (float x : a) s += static_cast<double>(x) * x;
    return std::sqrt(s);
}

inline double cosine(std::span<const float> a, std::span<const float> b) {
    double dot = 0.0;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
        dot += static_cast<double>(a[i]) * b[i];
    return dot / (norm(a) * norm(b));
}

}  // namespace inferscale::embed::testing
