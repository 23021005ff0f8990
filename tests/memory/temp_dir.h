#pragma once
// A fresh directory per test, removed afterwards.

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace inferscale::memory::testing {

class TempDir {
  public:
    TempDir() {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "inferscale-memory-XXXXXX").string();
        path_ = mkdtemp(pattern.data());
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

  private:
    std::filesystem::path path_;
};

}  // namespace inferscale::memory::testing
