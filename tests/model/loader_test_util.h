#pragma once
// Helpers shared by the model-loader tests: fixture paths and scratch files.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace inferscale::model::test {

inline std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

inline std::string loader_fixture(const std::string& rel) {
    return env_or("INFERSCALE_FIXTURES", "tests/fixtures") + "/loader/" + rel;
}

inline std::string models_dir() { return env_or("INFERSCALE_MODELS", "models"); }

inline std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A fresh directory under the test temp dir, removed by the destructor.
class ScratchDir {
  public:
    ScratchDir() {
        std::string tmpl = ::testing::TempDir() + "/is_loader_XXXXXX";
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        char* p = ::mkdtemp(buf.data());
        EXPECT_NE(p, nullptr);
        path_ = p != nullptr ? p : ::testing::TempDir();
    }
    ~ScratchDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

  private:
    std::string path_;
};

}  // namespace inferscale::model::test
