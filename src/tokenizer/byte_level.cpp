#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace inferscale::tokenizer {
namespace {

struct ByteMap {
    std::array<char32_t, 256> to_unicode{};
    std::array<int, 324> to_byte{};  // indexed by code point, -1 when unmapped

    ByteMap() {
        to_byte.fill(-1);
        int next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable =
                (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
            const char32_t cp =
                printable ? static_cast<char32_t>(b) : static_cast<char32_t>(next++);
            to_unicode[b] = cp;
            to_byte[cp] = b;
        }
    }
};

const ByteMap& byte_map() {
    static const ByteMap map;  // immutable after construction
    return map;
}

}  // namespace

std::string byte_level_encode(std::string_view bytes) {
    const ByteMap& map = byte_map();
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) append_utf8(out, map.to_unicode[static_cast<unsigned char>(c)]);
    return out;
}

bool byte_level_decode(std::string_view token, std::string* out) {
    const ByteMap& map = byte_map();
    std::string bytes;
    std::size_t pos = 0;
    while (pos < token.size()) {
        char32_t cp = 0;
        const std::size_t n = utf8_sequence_at(token, pos, &cp);
        if (n == 0 || cp >= map.to_byte.size() || map.to_byte[cp] < 0) return false;
        bytes.push_back(static_cast<char>(map.to_byte[cp]));
        pos += n;
    }
    out->append(bytes);
    return true;
}

}  // namespace inferscale::tokenizer
