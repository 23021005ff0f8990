// KV chunk files: the header (sizes, identity, token ids, checksums), then the payload. The
// harness writes both checksums into the input first (where its header length allows), so
// mutations reach the fields behind them instead of stopping at a checksum mismatch.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "memory/chunk_file.h"
#include "memory_file.h"

using namespace inferscale;

namespace {

constexpr std::size_t kHeaderBytesAt = 12;      // after magic and version
constexpr std::size_t kPayloadChecksumAt = 62;  // after the fixed-size fields before it

void write_checksums(std::vector<std::uint8_t>& bytes) {
    if (bytes.size() < kHeaderBytesAt + 4) return;
    std::uint32_t header_bytes = 0;
    std::memcpy(&header_bytes, bytes.data() + kHeaderBytesAt, 4);
    if (header_bytes < kPayloadChecksumAt + 8 || header_bytes > bytes.size()) return;
    const std::uint64_t payload =
        memory::chunk_checksum(bytes.data() + header_bytes, bytes.size() - header_bytes);
    std::memcpy(bytes.data() + kPayloadChecksumAt, &payload, 8);
    const std::uint64_t header = memory::chunk_checksum(bytes.data(), header_bytes - 8);
    std::memcpy(bytes.data() + header_bytes - 8, &header, 8);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::vector<std::uint8_t> bytes(data, data + size);
    write_checksums(bytes);
    fuzz::MemoryFile file(bytes.data(), bytes.size());
    auto header = memory::read_chunk_header(file.path());
    if (!header.ok() || header->payload_bytes > size) return 0;
    std::vector<std::uint8_t> payload(header->payload_bytes);
    (void)memory::read_chunk_file(file.path(), header->identity, payload.data(), payload.size());
    return 0;
}
