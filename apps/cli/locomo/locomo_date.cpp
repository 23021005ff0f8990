#include "apps/cli/locomo/locomo_date.h"

#include <array>
#include <chrono>
#include <cstdio>

namespace inferscale::memory {
namespace {

constexpr std::array<std::string_view, 12> kMonths = {
    "january", "february", "march",     "april",   "may",      "june",
    "july",    "august",   "september", "october", "november", "december"};

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

// A tiny cursor over the text: each reader consumes on success only.
struct Cursor {
    std::string_view s;

    bool literal(std::string_view word) {
        if (lower(s.substr(0, word.size())) != word) return false;
        s.remove_prefix(word.size());
        return true;
    }
    void spaces() {
        while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    }
    bool number(int min_digits, int max_digits, int& out) {
        int n = 0, value = 0;
        while (n < max_digits && n < static_cast<int>(s.size()) && s[n] >= '0' && s[n] <= '9')
            value = value * 10 + (s[n++] - '0');
        if (n < min_digits) return false;
        s.remove_prefix(static_cast<std::size_t>(n));
        out = value;
        return true;
    }
    // A full month name, or a prefix of at least three letters ("May", "Sep", "Sept").
    bool month(int& out) {
        std::size_t n = 0;
        while (n < s.size() && ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z'))) ++n;
        const std::string word = lower(s.substr(0, n));
        if (word.size() < 3) return false;
        for (std::size_t m = 0; m < kMonths.size(); ++m) {
            if (kMonths[m].substr(0, word.size()) == word) {
                out = static_cast<int>(m) + 1;
                s.remove_prefix(n);
                return true;
            }
        }
        return false;
    }
};

bool valid_calendar_date(const LocomoDate& d) {
    using namespace std::chrono;
    return year_month_day{year{d.year}, month{static_cast<unsigned>(d.month)},
                          day{static_cast<unsigned>(d.day)}}
        .ok();
}

bool parse_clock_form(std::string_view text, LocomoDate& d) {
    Cursor c{text};
    int hour12 = 0;
    if (!c.number(1, 2, hour12) || !c.literal(":") || !c.number(2, 2, d.minute)) return false;
    c.spaces();
    bool pm = false;
    if (c.literal("pm")) {
        pm = true;
    } else if (!c.literal("am")) {
        return false;
    }
    if (hour12 < 1 || hour12 > 12 || d.minute > 59) return false;
    d.hour = hour12 % 12 + (pm ? 12 : 0);
    c.spaces();
    if (!c.literal("on")) return false;
    c.spaces();
    if (!c.number(1, 2, d.day)) return false;
    c.spaces();
    if (!c.month(d.month)) return false;
    c.literal(".");
    if (!c.literal(",")) return false;
    c.spaces();
    if (!c.number(4, 4, d.year)) return false;
    return c.s.empty();
}

bool parse_iso_form(std::string_view text, LocomoDate& d) {
    Cursor c{text};
    return c.number(4, 4, d.year) && c.literal("-") && c.number(2, 2, d.month) && c.literal("-") &&
           c.number(2, 2, d.day) && c.s.empty();
}

}  // namespace

std::int64_t LocomoDate::epoch_seconds() const {
    using namespace std::chrono;
    const sys_days days{year_month_day{std::chrono::year{year},
                                       std::chrono::month{static_cast<unsigned>(month)},
                                       std::chrono::day{static_cast<unsigned>(day)}}};
    return days.time_since_epoch().count() * 86400LL + hour * 3600LL + minute * 60LL;
}

std::string LocomoDate::iso_utc() const {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02dT%02d:%02d:00.000Z", year, month, day,
                  hour, minute);
    return buffer;
}

Result<LocomoDate> parse_locomo_date(std::string_view text) {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    LocomoDate date;
    if (parse_clock_form(text, date) && valid_calendar_date(date)) return date;
    date = {};
    if (parse_iso_form(text, date) && valid_calendar_date(date)) return date;
    return make_error("unrecognized LoCoMo date '" + std::string(text) + "'");
}

}  // namespace inferscale::memory
