#include "memory/chunk_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace inferscale::memory {
namespace {

// The KV dtypes a chunk may have: f32, f16, bf16 or FP8 E4M3.
bool is_chunk_dtype(tensor::DType t) {
    return t == tensor::DType::F32 || t == tensor::DType::F16 || t == tensor::DType::BF16 ||
           t == tensor::DType::F8_E4M3;
}

static_assert(std::endian::native == std::endian::little, "chunk files are little-endian");

constexpr char kMagic[8] = {'I', 'S', 'K', 'V', 'C', 'H', 'K', '1'};
constexpr std::uint32_t kVersion = 1;
constexpr std::uint64_t kFnvOffset = 14695981039346656037ull;
constexpr std::uint64_t kFnvPrime = 1099511628211ull;
// No sane chunk has more: bounds what a damaged header can make us allocate.
constexpr std::uint64_t kMaxStringBytes = 1 << 16;
constexpr std::int64_t kMaxTokens = 1 << 20;

std::string errno_text(const std::string& what, const std::string& path) {
    return what + " " + path + ": " + std::strerror(errno);
}

template <class T>
void put(std::string& out, T v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void put_string(std::string& out, const std::string& s) {
    put(out, static_cast<std::uint32_t>(s.size()));
    out += s;
}

// Reads fields off a header held in memory; any read past the end sets `bad`.
struct Cursor {
    const char* p;
    const char* end;
    bool bad = false;

    template <class T>
    T get() {
        T v{};
        if (end - p < static_cast<std::ptrdiff_t>(sizeof(T))) {
            bad = true;
            return v;
        }
        std::memcpy(&v, p, sizeof(T));
        p += sizeof(T);
        return v;
    }
    std::string get_string() {
        const auto n = get<std::uint32_t>();
        if (bad || n > kMaxStringBytes || end - p < static_cast<std::ptrdiff_t>(n)) {
            bad = true;
            return {};
        }
        std::string s(p, n);
        p += n;
        return s;
    }
};

// Reads exactly `bytes` (short reads retried); false on error or early end of file.
bool read_exact(int fd, void* dst, std::size_t bytes) {
    char* p = static_cast<char*>(dst);
    while (bytes > 0) {
        const ssize_t n = ::read(fd, p, bytes);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        bytes -= static_cast<std::size_t>(n);
    }
    return true;
}

bool write_all(int fd, const void* src, std::size_t bytes) {
    const char* p = static_cast<const char*>(src);
    while (bytes > 0) {
        const ssize_t n = ::write(fd, p, bytes);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        bytes -= static_cast<std::size_t>(n);
    }
    return true;
}

std::string parent_dir(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The rename is only durable once the folder entry is on disk.
void fsync_dir(const std::string& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
}

// The payload bytes a header's shape implies (its fields already checked positive); nullopt when
// the product overflows, as only a damaged header's can.
std::optional<std::uint64_t> payload_bytes_of(const ChunkFileHeader& h, std::int64_t num_tokens) {
    std::uint64_t bytes = 2 * tensor::dtype_size(h.dtype);
    for (std::int64_t n : {h.num_layers, num_tokens, h.num_kv_heads, h.head_dim}) {
        if (__builtin_mul_overflow(bytes, static_cast<std::uint64_t>(n), &bytes))
            return std::nullopt;
    }
    return bytes;
}

// Parses the header from an open file positioned at 0; leaves it at the payload.
Result<ChunkFileHeader> parse_header(int fd, const std::string& path) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return make_error(errno_text("cannot stat", path));
    char fixed[16];
    if (!read_exact(fd, fixed, sizeof(fixed))) return make_error(path + ": truncated header");
    if (std::memcmp(fixed, kMagic, sizeof(kMagic)) != 0)
        return make_error(path + ": not a chunk file");
    std::uint32_t version = 0, header_bytes = 0;
    std::memcpy(&version, fixed + 8, 4);
    std::memcpy(&header_bytes, fixed + 12, 4);
    if (version != kVersion) return make_error(path + ": chunk file version " +
                                               std::to_string(version));
    if (header_bytes < sizeof(fixed) + 8 || header_bytes > static_cast<std::uint64_t>(st.st_size) ||
        header_bytes > 4 * kMaxStringBytes + 4 * static_cast<std::uint64_t>(kMaxTokens))
        return make_error(path + ": bad header length");
    std::string raw(fixed, sizeof(fixed));
    raw.resize(header_bytes);
    if (!read_exact(fd, raw.data() + sizeof(fixed), header_bytes - sizeof(fixed)))
        return make_error(path + ": truncated header");
    std::uint64_t stored = 0;
    std::memcpy(&stored, raw.data() + header_bytes - 8, 8);
    if (chunk_checksum(raw.data(), header_bytes - 8) != stored)
        return make_error(path + ": header checksum mismatch");

    Cursor c{raw.data() + sizeof(fixed), raw.data() + header_bytes - 8};
    ChunkFileHeader h;
    const auto dtype = c.get<std::uint8_t>();
    const auto mode = c.get<std::uint8_t>();
    h.identity.window = c.get<std::int32_t>();
    h.num_layers = c.get<std::int64_t>();
    h.num_kv_heads = c.get<std::int64_t>();
    h.head_dim = c.get<std::int64_t>();
    const auto num_tokens = c.get<std::int64_t>();
    h.payload_bytes = c.get<std::uint64_t>();
    h.payload_checksum = c.get<std::uint64_t>();
    h.identity.fact_id = c.get_string();
    h.identity.text_hash = c.get_string();
    h.identity.model = c.get_string();
    if (c.bad || num_tokens < 0 || num_tokens > kMaxTokens || h.num_layers <= 0 ||
        h.num_kv_heads <= 0 || h.head_dim <= 0 || mode > 1 ||
        !is_chunk_dtype(static_cast<tensor::DType>(dtype)))
        return make_error(path + ": bad header fields");
    h.dtype = static_cast<tensor::DType>(dtype);
    h.identity.mode = static_cast<EncodingMode>(mode);
    h.token_ids.resize(static_cast<std::size_t>(num_tokens));
    for (auto& t : h.token_ids) t = c.get<std::int32_t>();
    if (c.bad || c.p != c.end) return make_error(path + ": bad header layout");
    const auto shape_bytes = payload_bytes_of(h, num_tokens);
    if (!shape_bytes || h.payload_bytes != *shape_bytes ||
        h.payload_bytes != static_cast<std::uint64_t>(st.st_size) - header_bytes)
        return make_error(path + ": payload length does not match the file");
    return h;
}

}  // namespace

std::uint64_t chunk_checksum(const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint64_t lane[4] = {kFnvOffset, kFnvOffset ^ 1, kFnvOffset ^ 2, kFnvOffset ^ 3};
    std::size_t i = 0;
    for (; i + 32 <= bytes; i += 32) {
        for (int k = 0; k < 4; ++k) {
            std::uint64_t w;
            std::memcpy(&w, p + i + 8 * k, 8);
            lane[k] = (lane[k] ^ w) * kFnvPrime;
        }
    }
    std::uint64_t h = kFnvOffset;
    for (; i < bytes; ++i) h = (h ^ p[i]) * kFnvPrime;
    for (std::uint64_t l : lane) {
        // Fold each lane bytewise so every bit of it reaches every bit of the result.
        for (int b = 0; b < 8; ++b) h = (h ^ ((l >> (8 * b)) & 0xff)) * kFnvPrime;
    }
    return (h ^ bytes) * kFnvPrime;
}

std::size_t chunk_payload_bytes(std::int64_t num_layers, std::int64_t num_tokens,
                                std::int64_t num_kv_heads, std::int64_t head_dim,
                                tensor::DType dtype) {
    return static_cast<std::size_t>(num_layers * 2 * num_tokens * num_kv_heads * head_dim) *
           tensor::dtype_size(dtype);
}

std::string chunk_fact_dir(const std::string& root, std::string_view fact_id) {
    return root + "/f" + text_hash(fact_id);
}

std::string chunk_file_path(const std::string& root, const ChunkIdentity& identity) {
    return chunk_fact_dir(root, identity.fact_id) + "/" + text_hash(identity.key()) +
           std::string(kChunkFileSuffix);
}

Status write_chunk_file(const std::string& path, ChunkFileHeader header, const void* payload) {
    IS_CHECK(is_chunk_dtype(header.dtype)) << "chunk dtype " << tensor::dtype_name(header.dtype);
    const auto num_tokens = static_cast<std::int64_t>(header.token_ids.size());
    IS_CHECK(header.payload_bytes == chunk_payload_bytes(header.num_layers, num_tokens,
                                                         header.num_kv_heads, header.head_dim,
                                                         header.dtype));
    header.payload_checksum = chunk_checksum(payload, header.payload_bytes);

    std::string h(kMagic, sizeof(kMagic));
    put(h, kVersion);
    put(h, std::uint32_t{0});  // header_bytes, patched below
    put(h, static_cast<std::uint8_t>(header.dtype));
    put(h, static_cast<std::uint8_t>(header.identity.mode));
    put(h, header.identity.window);
    put(h, header.num_layers);
    put(h, header.num_kv_heads);
    put(h, header.head_dim);
    put(h, num_tokens);
    put(h, header.payload_bytes);
    put(h, header.payload_checksum);
    put_string(h, header.identity.fact_id);
    put_string(h, header.identity.text_hash);
    put_string(h, header.identity.model);
    for (std::int32_t t : header.token_ids) put(h, t);
    const auto header_bytes = static_cast<std::uint32_t>(h.size() + 8);
    std::memcpy(h.data() + 12, &header_bytes, 4);
    put(h, chunk_checksum(h.data(), h.size()));

    const std::string dir = parent_dir(path);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
        return make_error(errno_text("cannot create", dir));
    // mkstemp names the temp file uniquely, so concurrent writers of one path never share one.
    std::string tmp = path + ".tmpXXXXXX";
    const int fd = ::mkstemp(tmp.data());
    if (fd < 0) return make_error(errno_text("cannot create", tmp));
    const bool ok = write_all(fd, h.data(), h.size()) &&
                    write_all(fd, payload, header.payload_bytes) && ::fsync(fd) == 0;
    const std::string err = ok ? "" : errno_text("cannot write", tmp);
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string msg = ok ? errno_text("cannot rename", tmp) : err;
        ::unlink(tmp.c_str());
        return make_error(msg);
    }
    fsync_dir(dir);
    return {};
}

Result<ChunkFileHeader> read_chunk_header(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return make_error(errno_text("cannot open", path));
    Result<ChunkFileHeader> h = parse_header(fd, path);
    ::close(fd);
    return h;
}

Result<ChunkFileHeader> read_chunk_file(const std::string& path, const ChunkIdentity& expected,
                                        void* dst, std::size_t dst_bytes) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return make_error(errno_text("cannot open", path));
    Result<ChunkFileHeader> h = parse_header(fd, path);
    Status st;
    if (!h.ok()) {
        st = h.error();
    } else if (!(h->identity == expected)) {
        st = make_error(path + ": holds another chunk (" + h->identity.key() + ")");
    } else if (h->payload_bytes != dst_bytes) {
        st = make_error(path + ": payload of " + std::to_string(h->payload_bytes) +
                        " bytes, expected " + std::to_string(dst_bytes));
    } else if (!read_exact(fd, dst, dst_bytes)) {
        st = make_error(path + ": truncated payload");
    } else if (chunk_checksum(dst, dst_bytes) != h->payload_checksum) {
        st = make_error(path + ": payload checksum mismatch");
    }
    ::close(fd);
    if (!st.ok()) return std::move(st).error();
    return h;
}

}  // namespace inferscale::memory
