#pragma once
// The disk form of a KvChunk: one file per chunk, so a chunk is written, read and deleted on
// its own. Layout (little-endian):
//   magic "ISKVCHK1" | u32 version | u32 header_bytes (everything before the payload)
//   | u8 dtype | u8 mode | i32 window | i64 num_layers, num_kv_heads, head_dim, num_tokens
//   | u64 payload_bytes | u64 payload_checksum | 3 x (u32 length, bytes): fact_id, text_hash,
//   model | num_tokens x i32 token ids | u64 header_checksum (of all the header before it)
//   | payload: [num_layers][2][num_tokens][kvh][d] dtype, K before RoPE.
// Files are written atomically (temp file, fsync, rename, fsync of the folder), so a crash
// leaves either the old file, the new one, or a stray temp file, never a torn chunk; the two
// checksums catch what the disk itself damages later.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "memory/kv_chunk.h"
#include "tensor/dtype.h"

namespace inferscale::memory {

inline constexpr std::string_view kChunkFileSuffix = ".kvc";

// A 64-bit checksum of `bytes`: FNV-1a over 64-bit words in four independent lanes (so it runs
// near memory speed instead of one multiply per byte), the tail bytewise, lanes folded at the
// end. Not cryptographic: it catches disk damage, not an adversary.
std::uint64_t chunk_checksum(const void* data, std::size_t bytes);

// Everything in a chunk file except the payload.
struct ChunkFileHeader {
    ChunkIdentity identity;
    std::vector<std::int32_t> token_ids;  // [num_tokens]
    std::int64_t num_layers = 0;
    std::int64_t num_kv_heads = 0;
    std::int64_t head_dim = 0;
    tensor::DType dtype = tensor::DType::F32;
    std::uint64_t payload_bytes = 0;
    std::uint64_t payload_checksum = 0;
};

// Bytes of a chunk's KV: num_layers * 2 * num_tokens * kvh * d * dtype size.
std::size_t chunk_payload_bytes(std::int64_t num_layers, std::int64_t num_tokens,
                                 std::int64_t num_kv_heads, std::int64_t head_dim,
                                 tensor::DType dtype);

// The folder holding every chunk of one fact (so erasing a fact touches one folder) and the
// file of one identity in it; both named by hashes, so any fact id or model name is safe as a
// file name. The full identity sits in the header and is checked on every read.
std::string chunk_fact_dir(const std::string& root, std::string_view fact_id);
std::string chunk_file_path(const std::string& root, const ChunkIdentity& identity);

// Writes header + payload to `path` atomically (creating the fact folder). `header`'s
// payload_checksum is computed here. An Error on any I/O failure (the temp file is removed).
Status write_chunk_file(const std::string& path, ChunkFileHeader header, const void* payload);

// Reads and checks the header only (magic, version, sizes, header checksum, file length).
// An Error names what is wrong: the caller treats the file as corrupt.
Result<ChunkFileHeader> read_chunk_header(const std::string& path);

// Reads the whole file: the header as above, then the payload into `dst`, checking that the
// identity equals `expected`, that the payload is exactly `dst_bytes` long and its checksum.
// An Error when anything differs; `dst` may then hold garbage.
Result<ChunkFileHeader> read_chunk_file(const std::string& path, const ChunkIdentity& expected,
                                        void* dst, std::size_t dst_bytes);

}  // namespace inferscale::memory
