// UTF-8 range splitting: a range of code points of one encoded length whose low 6-bit groups
// run full (0x00..0x3F) below the first differing group is a product of byte ranges; any other
// range is split at the group boundary until that holds.

#include "grammar/utf8_ranges.h"

#include <algorithm>

namespace inferscale::grammar {

int decode_utf8(std::string_view s, std::uint32_t& cp) {
    if (s.empty()) return 0;
    auto b0 = static_cast<unsigned char>(s[0]);
    int len = 0;
    std::uint32_t min = 0;
    if (b0 < 0x80) {
        cp = b0;
        return 1;
    } else if ((b0 & 0xE0) == 0xC0) {
        len = 2;
        cp = b0 & 0x1F;
        min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        len = 3;
        cp = b0 & 0x0F;
        min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        len = 4;
        cp = b0 & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (s.size() < static_cast<std::size_t>(len)) return 0;
    for (int i = 1; i < len; ++i) {
        auto b = static_cast<unsigned char>(s[i]);
        if ((b & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

std::vector<CodeRange> normalize_ranges(std::vector<CodeRange> ranges) {
    std::sort(ranges.begin(), ranges.end());
    std::vector<CodeRange> out;
    for (const CodeRange& r : ranges) {
        if (!out.empty() && r.first <= out.back().second + 1) {
            out.back().second = std::max(out.back().second, r.second);
        } else {
            out.push_back(r);
        }
    }
    return out;
}

std::vector<CodeRange> complement_ranges(const std::vector<CodeRange>& ranges, std::uint32_t max) {
    std::vector<CodeRange> out;
    std::uint32_t next = 0;
    for (const CodeRange& r : ranges) {
        if (r.first > next) out.emplace_back(next, r.first - 1);
        next = r.second + 1;
    }
    if (next <= max) out.emplace_back(next, max);
    return out;
}

void remove_surrogates(std::vector<CodeRange>& ranges) {
    std::vector<CodeRange> out;
    for (const CodeRange& r : ranges) {
        if (r.second < 0xD800 || r.first > 0xDFFF) {
            out.push_back(r);
            continue;
        }
        if (r.first < 0xD800) out.emplace_back(r.first, 0xD7FF);
        if (r.second > 0xDFFF) out.emplace_back(0xE000, r.second);
    }
    ranges = std::move(out);
}

namespace {

int encoded_length(std::uint32_t cp) {
    return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

void split(std::uint32_t lo, std::uint32_t hi, std::vector<std::vector<ByteRange>>& out) {
    static constexpr std::uint32_t kLengthMax[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    int n = encoded_length(lo);
    if (hi > kLengthMax[n - 1]) {
        split(lo, kLengthMax[n - 1], out);
        split(kLengthMax[n - 1] + 1, hi, out);
        return;
    }
    for (int i = 1; i < n; ++i) {
        std::uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                split(lo, lo | m, out);
                split((lo | m) + 1, hi, out);
                return;
            }
            if ((hi & m) != m) {
                split(lo, (hi & ~m) - 1, out);
                split(hi & ~m, hi, out);
                return;
            }
        }
    }
    std::string a;
    std::string b;
    append_utf8(a, lo);
    append_utf8(b, hi);
    std::vector<ByteRange> seq;
    for (std::size_t k = 0; k < a.size(); ++k) {
        seq.emplace_back(static_cast<std::uint8_t>(a[k]), static_cast<std::uint8_t>(b[k]));
    }
    out.push_back(std::move(seq));
}

}  // namespace

std::vector<std::vector<ByteRange>> utf8_sequences(std::uint32_t lo, std::uint32_t hi) {
    std::vector<std::vector<ByteRange>> out;
    if (lo <= hi) split(lo, hi, out);
    return out;
}

}  // namespace inferscale::grammar
