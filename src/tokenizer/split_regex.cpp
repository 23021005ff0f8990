#include "tokenizer/split_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>

namespace inferscale::tokenizer {

struct SplitRegex::Code {
    pcre2_code* code = nullptr;
    ~Code() { pcre2_code_free(code); }
};

Result<SplitRegex> SplitRegex::compile(std::string_view pattern) {
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
    if (code == nullptr) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(error_code, message, sizeof(message));
        return make_error("bad split regex at offset " + std::to_string(error_offset) + ": " +
                          reinterpret_cast<const char*>(message));
    }
    // JIT is only a speed-up; the interpreter gives the same matches when it is unavailable.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    auto owned = std::make_shared<Code>();
    owned->code = code;
    SplitRegex regex;
    regex.code_ = std::move(owned);
    return regex;
}

std::vector<std::pair<std::size_t, std::size_t>> SplitRegex::find_all(std::string_view text) const {
    std::vector<std::pair<std::size_t, std::size_t>> matches;
    pcre2_match_data* data = pcre2_match_data_create_from_pattern(code_->code, nullptr);
    IS_CHECK(data != nullptr);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::size_t offset = 0;
    while (offset <= text.size()) {
        // Input was validated once at the tokenizer entry, so skip PCRE2's per-call UTF check.
        const int rc = pcre2_match(code_->code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK,
                                   data, nullptr);
        if (rc < 0) break;
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
        const std::size_t begin = ovector[0], end = ovector[1];
        if (end == begin) {
            // Empty match: step over one whole character so the loop always advances.
            std::size_t next = begin + 1;
            while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80)
                ++next;
            offset = next;
            continue;
        }
        matches.emplace_back(begin, end);
        offset = end;
    }
    pcre2_match_data_free(data);
    return matches;
}

}  // namespace inferscale::tokenizer
