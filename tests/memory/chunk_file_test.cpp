// The chunk file reader on damaged files: every header field that lies is an Error naming the
// file, never an overflow, a crash or a huge read, even when the checksums are made to match.

#include "memory/chunk_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "memory/temp_dir.h"

namespace inferscale::memory {
namespace {

constexpr std::size_t kHeadDimAt = 38;  // magic, version, length, dtype, mode, window, 2 x i64

// A valid file of 2 tokens, 1 layer, 1 head of 2 f32.
void write_small_chunk(const std::string& path) {
    ChunkFileHeader h;
    h.identity = ChunkIdentity{"fact", "abcd", "model", 0, EncodingMode::Standalone};
    h.token_ids = {5, 6};
    h.num_layers = 1;
    h.num_kv_heads = 1;
    h.head_dim = 2;
    h.payload_bytes = chunk_payload_bytes(1, 2, 1, 2, tensor::DType::F32);
    const std::vector<float> payload(h.payload_bytes / sizeof(float), 0.5f);
    ASSERT_TRUE(write_chunk_file(path, h, payload.data()).ok());
}

// Overwrites an i64 header field and writes the header checksum that makes it match again.
void patch_header_field(const std::string& path, std::size_t at, std::int64_t value) {
    std::vector<char> bytes;
    {
        std::ifstream in(path, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    std::memcpy(bytes.data() + at, &value, sizeof(value));
    std::uint32_t header_bytes = 0;
    std::memcpy(&header_bytes, bytes.data() + 12, sizeof(header_bytes));
    const std::uint64_t checksum = chunk_checksum(bytes.data(), header_bytes - 8);
    std::memcpy(bytes.data() + header_bytes - 8, &checksum, sizeof(checksum));
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
}

TEST(ChunkFile, ShapeWhosePayloadSizeOverflowsIsAnError) {
    testing::TempDir dir;
    const std::string path = dir.file("chunk.kvc");
    write_small_chunk(path);
    ASSERT_TRUE(read_chunk_header(path).ok());
    // 1 layer x 2 x 2 tokens x 1 head x head_dim x 4 bytes wraps past 2^64 back to the 32 bytes
    // the file holds (a fuzzer found the overflow): the wrapped product passed as the real one.
    patch_header_field(path, kHeadDimAt, (std::int64_t{1} << 60) + 2);
    const auto header = read_chunk_header(path);
    ASSERT_FALSE(header.ok());
    EXPECT_NE(header.error().message.find("payload length does not match the file"),
              std::string::npos)
        << header.error().message;
}

}  // namespace
}  // namespace inferscale::memory
