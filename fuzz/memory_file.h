#pragma once
// MemoryFile: a fuzz input behind a file path (an anonymous in-memory file, /proc/self/fd/N), for
// parsers that open a path. No disk traffic, nothing left behind.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace inferscale::fuzz {

class MemoryFile {
  public:
    MemoryFile(const std::uint8_t* data, std::size_t size) : fd_(memfd_create("fuzz-input", 0)) {
        if (fd_ < 0) std::abort();
        while (size > 0) {
            const ssize_t n = ::write(fd_, data, size);
            if (n <= 0) std::abort();
            data += n;
            size -= static_cast<std::size_t>(n);
        }
    }
    ~MemoryFile() { ::close(fd_); }
    MemoryFile(const MemoryFile&) = delete;
    MemoryFile& operator=(const MemoryFile&) = delete;

    std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

  private:
    int fd_;
};

}  // namespace inferscale::fuzz
