#include "tokenizer/utf8.h"

namespace inferscale::tokenizer {
namespace {

bool in_range(unsigned char c, unsigned char lo, unsigned char hi) { return c >= lo && c <= hi; }

// Number of bytes a sequence with this lead byte has, 0 for bytes that never start one.
std::size_t sequence_length(unsigned char lead) {
    if (lead < 0x80) return 1;
    if (in_range(lead, 0xC2, 0xDF)) return 2;
    if (in_range(lead, 0xE0, 0xEF)) return 3;
    if (in_range(lead, 0xF0, 0xF4)) return 4;
    return 0;
}

// Valid range of the second byte given the lead byte (Unicode Table 3-7); later bytes are 80..BF.
void second_byte_range(unsigned char lead, unsigned char* lo, unsigned char* hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (lead == 0xE0) *lo = 0xA0;
    if (lead == 0xED) *hi = 0x9F;
    if (lead == 0xF0) *lo = 0x90;
    if (lead == 0xF4) *hi = 0x8F;
}

// How many bytes from pos form a valid prefix of a sequence (at least 1 for the lead when the
// lead itself is valid), and whether the whole sequence is present.
std::size_t valid_prefix(std::string_view s, std::size_t pos, std::size_t* need) {
    const auto lead = static_cast<unsigned char>(s[pos]);
    *need = sequence_length(lead);
    if (*need == 0) return 0;
    std::size_t n = 1;
    while (n < *need && pos + n < s.size()) {
        const auto c = static_cast<unsigned char>(s[pos + n]);
        unsigned char lo = 0x80, hi = 0xBF;
        if (n == 1) second_byte_range(lead, &lo, &hi);
        if (!in_range(c, lo, hi)) break;
        ++n;
    }
    return n;
}

}  // namespace

std::size_t utf8_sequence_at(std::string_view s, std::size_t pos, char32_t* cp) {
    std::size_t need = 0;
    const std::size_t n = valid_prefix(s, pos, &need);
    if (n == 0 || n != need) return 0;
    const auto lead = static_cast<unsigned char>(s[pos]);
    char32_t v = need == 1   ? lead
                 : need == 2 ? (lead & 0x1F)
                 : need == 3 ? (lead & 0x0F)
                             : (lead & 0x07);
    for (std::size_t i = 1; i < need; ++i)
        v = (v << 6) | (static_cast<unsigned char>(s[pos + i]) & 0x3F);
    *cp = v;
    return need;
}

std::string sanitize_utf8(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    std::size_t pos = 0;
    while (pos < bytes.size()) {
        std::size_t need = 0;
        const std::size_t n = valid_prefix(bytes, pos, &need);
        if (n != 0 && n == need) {
            out.append(bytes.substr(pos, n));
            pos += n;
        } else {
            // One replacement per maximal subpart: the valid prefix (or the single bad byte).
            append_utf8(out, kReplacementChar);
            pos += n == 0 ? 1 : n;
        }
    }
    return out;
}

std::size_t utf8_complete_prefix(std::string_view bytes) {
    // A sequence can be at most 4 bytes, so only the last 3 bytes can start an unfinished one.
    const std::size_t start = bytes.size() > 3 ? bytes.size() - 3 : 0;
    for (std::size_t pos = start; pos < bytes.size(); ++pos) {
        std::size_t need = 0;
        const std::size_t n = valid_prefix(bytes, pos, &need);
        if (need > 1 && n == bytes.size() - pos && n < need) return pos;
    }
    return bytes.size();
}

bool is_unicode_whitespace(char32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

bool is_python_whitespace(char32_t cp) {
    return is_unicode_whitespace(cp) || (cp >= 0x1C && cp <= 0x1F);
}

std::string python_strip(std::string_view s) {
    std::size_t begin = 0, end = s.size();
    char32_t cp = 0;
    while (begin < end) {
        const std::size_t n = utf8_sequence_at(s, begin, &cp);
        if (n == 0 || !is_python_whitespace(cp)) break;
        begin += n;
    }
    while (end > begin) {
        std::size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        const std::size_t n = utf8_sequence_at(s, start, &cp);
        if (n == 0 || start + n != end || !is_python_whitespace(cp)) break;
        end = start;
    }
    return std::string(s.substr(begin, end - begin));
}

}  // namespace inferscale::tokenizer
