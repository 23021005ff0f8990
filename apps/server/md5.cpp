#include "apps/server/md5.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace inferscale::server {
namespace {

constexpr std::array<std::uint32_t, 16> kShift = {7, 12, 17, 22, 5, 9,  14, 20,
                                                  4, 11, 16, 23, 6, 10, 15, 21};

// K[i] = floor(2^32 * |sin(i + 1)|), as RFC 1321 defines the table.
std::array<std::uint32_t, 64> sine_table() {
    std::array<std::uint32_t, 64> k{};
    for (int i = 0; i < 64; ++i)
        k[i] = static_cast<std::uint32_t>(std::floor(4294967296.0 * std::fabs(std::sin(i + 1.0))));
    return k;
}

std::uint32_t rotl(std::uint32_t x, std::uint32_t n) { return (x << n) | (x >> (32 - n)); }

void compress(std::array<std::uint32_t, 4>& state, const unsigned char* block,
              const std::array<std::uint32_t, 64>& k) {
    std::uint32_t m[16];
    for (int i = 0; i < 16; ++i)
        m[i] = std::uint32_t{block[4 * i]} | std::uint32_t{block[4 * i + 1]} << 8 |
               std::uint32_t{block[4 * i + 2]} << 16 | std::uint32_t{block[4 * i + 3]} << 24;
    std::uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    for (int i = 0; i < 64; ++i) {
        std::uint32_t f = 0;
        int g = 0;
        const int round = i / 16;
        if (round == 0) {
            f = (b & c) | (~b & d);
            g = i;
        } else if (round == 1) {
            f = (d & b) | (~d & c);
            g = (5 * i + 1) % 16;
        } else if (round == 2) {
            f = b ^ c ^ d;
            g = (3 * i + 5) % 16;
        } else {
            f = c ^ (b | ~d);
            g = (7 * i) % 16;
        }
        const std::uint32_t next = b + rotl(a + f + k[i] + m[g], kShift[round * 4 + i % 4]);
        a = d;
        d = c;
        c = b;
        b = next;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
}

}  // namespace

std::string md5_hex(std::string_view bytes) {
    static const std::array<std::uint32_t, 64> k = sine_table();
    std::array<std::uint32_t, 4> state = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
    const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
    std::size_t whole = bytes.size() / 64 * 64;
    for (std::size_t at = 0; at < whole; at += 64) compress(state, data + at, k);
    // The tail, a 0x80 byte, zeros, and the length in bits (little-endian): one or two blocks.
    unsigned char tail[128] = {};
    const std::size_t rest = bytes.size() - whole;
    std::memcpy(tail, data + whole, rest);
    tail[rest] = 0x80;
    const std::size_t tail_size = rest < 56 ? 64 : 128;
    const std::uint64_t bits = static_cast<std::uint64_t>(bytes.size()) * 8;
    for (int i = 0; i < 8; ++i)
        tail[tail_size - 8 + i] = static_cast<unsigned char>(bits >> (8 * i));
    for (std::size_t at = 0; at < tail_size; at += 64) compress(state, tail + at, k);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (const std::uint32_t word : state)
        for (int i = 0; i < 4; ++i) {
            const auto byte = static_cast<unsigned char>(word >> (8 * i));
            out += kHex[byte >> 4];
            out += kHex[byte & 15];
        }
    return out;
}

}  // namespace inferscale::server
