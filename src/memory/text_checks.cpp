#include "memory/text_checks.h"

#include <cstdint>

namespace inferscale::memory {
namespace {

bool is_ascii_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

std::string normalize_whitespace(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    bool pending_space = false;
    for (const char c : text) {
        if (is_ascii_space(c)) {
            pending_space = !out.empty();
            continue;
        }
        if (pending_space) out.push_back(' ');
        pending_space = false;
        out.push_back(c);
    }
    return out;
}

bool is_valid_utf8(std::string_view text) {
    // The smallest code point of each sequence length: anything below is an overlong form.
    static constexpr std::uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    std::size_t i = 0;
    while (i < text.size()) {
        const auto c = static_cast<unsigned char>(text[i]);
        std::size_t len = 0;
        std::uint32_t cp = 0;
        if (c < 0x80) {
            ++i;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2, cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cp = c & 0x07;
        } else {
            return false;
        }
        if (i + len > text.size()) return false;
        for (std::size_t j = 1; j < len; ++j) {
            const auto cc = static_cast<unsigned char>(text[i + j]);
            if ((cc & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (cc & 0x3F);
        }
        if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

Status check_user_id(std::string_view user, std::size_t max_bytes) {
    if (user.empty()) return make_error(ErrorKind::InvalidArgument, "user id is empty");
    if (user.size() > max_bytes)
        return make_error(ErrorKind::InvalidArgument,
                          "user id is longer than " + std::to_string(max_bytes) + " bytes");
    if (!is_valid_utf8(user))
        return make_error(ErrorKind::InvalidArgument, "user id is not valid UTF-8");
    for (const char c : user)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F)
            return make_error(ErrorKind::InvalidArgument, "user id contains a control character");
    return {};
}

Result<std::string> normalize_fact_text(std::string_view text, std::size_t max_bytes) {
    if (!is_valid_utf8(text))
        return make_error(ErrorKind::InvalidArgument, "fact text is not valid UTF-8");
    std::string normalized = normalize_whitespace(text);
    if (normalized.empty()) return make_error(ErrorKind::InvalidArgument, "fact text is empty");
    if (normalized.size() > max_bytes)
        return make_error(ErrorKind::InvalidArgument,
                          "fact text is longer than " + std::to_string(max_bytes) + " bytes");
    return normalized;
}

}  // namespace inferscale::memory
