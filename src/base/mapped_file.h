#pragma once
// MappedFile: a read-only memory map of a whole file. Move-only; unmaps on destruction.
// open() returns an Error naming the path when the file is missing, unreadable or not a file.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace inferscale {

class MappedFile {
  public:
    static Result<MappedFile> open(const std::string& path);

    MappedFile() = default;
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    const std::uint8_t* data() const { return data_; }
    std::size_t size() const { return size_; }
    const std::string& path() const { return path_; }
    std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }

  private:
    void reset();

    const std::uint8_t* data_ = nullptr;
    std::size_t size_ = 0;
    std::string path_;
};

// Reads a whole (small) file into a string.
Result<std::string> read_text_file(const std::string& path);

}  // namespace inferscale
