// Integer ranges as digit patterns: a range of equal-length numerals splits into the numerals
// that share the lower bound's first digit, those whose first digit lies strictly between the
// bounds' (any digits after), and those that share the upper bound's first digit.

#include "grammar/integer_range.h"

#include <vector>

namespace inferscale::grammar {
namespace {

constexpr int kMaxDigits = 16;
constexpr std::int64_t kMaxMagnitude = 9999999999999999;  // 16 digits

std::string digit_class(char lo, char hi) {
    if (lo == hi) return std::string("\"") + lo + "\"";
    return std::string("[") + lo + "-" + hi + "]";
}

std::string any_digits(std::size_t n) {
    if (n == 0) return "";
    return n == 1 ? " [0-9]" : " [0-9]{" + std::to_string(n) + "}";
}

// Numerals of a's length between a and b (leading zeros allowed below the first digit).
void same_length(const std::string& a, const std::string& b, const std::string& prefix,
                 std::vector<std::string>& alts) {
    std::string lead = prefix.empty() ? "" : prefix + " ";
    if (a == b) {
        alts.push_back(lead + "\"" + a + "\"");
        return;
    }
    std::size_t n = a.size();
    if (n == 1) {
        alts.push_back(lead + digit_class(a[0], b[0]));
        return;
    }
    std::string rest_a = a.substr(1);
    std::string rest_b = b.substr(1);
    if (a[0] == b[0]) {
        same_length(rest_a, rest_b, lead + digit_class(a[0], a[0]), alts);
        return;
    }
    std::string zeros(n - 1, '0');
    std::string nines(n - 1, '9');
    char first_lo = a[0];
    char first_hi = b[0];
    if (rest_a != zeros) {
        same_length(rest_a, nines, lead + digit_class(a[0], a[0]), alts);
        ++first_lo;
    }
    if (rest_b != nines) --first_hi;
    if (first_lo <= first_hi)
        alts.push_back(lead + digit_class(first_lo, first_hi) + any_digits(n - 1));
    if (rest_b != nines) same_length(zeros, rest_b, lead + digit_class(b[0], b[0]), alts);
}

std::int64_t pow10(int d) {
    std::int64_t p = 1;
    for (int i = 0; i < d; ++i) p *= 10;
    return p;
}

// Non-negative integers in [lo, hi] (hi nullopt: up to 16 digits), lo >= 0.
void non_negative(std::int64_t lo, std::optional<std::int64_t> hi, const std::string& prefix,
                  std::vector<std::string>& alts) {
    int lo_digits = static_cast<int>(std::to_string(lo).size());
    int hi_digits = hi ? static_cast<int>(std::to_string(*hi).size()) : kMaxDigits;
    for (int d = lo_digits; d <= hi_digits; ++d) {
        std::int64_t a = std::max(lo, d == 1 ? 0 : pow10(d - 1));
        std::int64_t b = hi ? std::min(*hi, pow10(d) - 1) : pow10(d) - 1;
        if (a > b) continue;
        if (!hi && d > lo_digits) {
            alts.push_back((prefix.empty() ? "" : prefix + " ") + "[1-9] [0-9]{" +
                           std::to_string(d - 1) + "," + std::to_string(kMaxDigits - 1) + "}");
            break;
        }
        same_length(std::to_string(a), std::to_string(b), prefix, alts);
    }
}

}  // namespace

std::string integer_range_gbnf(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi) {
    if (lo && *lo < -kMaxMagnitude) lo.reset();
    if (hi && *hi > kMaxMagnitude) hi.reset();
    std::vector<std::string> alts;
    // Negative numbers: "-" followed by magnitudes in [max(1, -hi), -lo].
    if (!lo || *lo < 0) {
        std::int64_t mag_lo = hi && *hi < 0 ? -*hi : 1;
        std::optional<std::int64_t> mag_hi;
        if (lo) mag_hi = -*lo;
        non_negative(mag_lo, mag_hi, "\"-\"", alts);
    }
    if (!hi || *hi >= 0) non_negative(lo && *lo > 0 ? *lo : 0, hi, "", alts);
    std::string out = "(";
    for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
}

}  // namespace inferscale::grammar
