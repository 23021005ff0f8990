#pragma once
// LoCoMo session dates: "1:56 pm on 8 May, 2023" (also an abbreviated month, "8 Sep, 2023",
// or a bare ISO date, "2023-05-08"), as the reference parses them
// ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%Y-%m-%d").

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace inferscale::memory {

struct LocomoDate {
    int year = 0, month = 0, day = 0, hour = 0, minute = 0;

    std::int64_t epoch_seconds() const;  // treating the time as UTC, as the reference does
    std::string iso_utc() const;         // "2023-05-08T13:56:00.000Z"
    auto operator<=>(const LocomoDate&) const = default;
};

// Error naming the text when it matches none of the formats or is not a real date.
Result<LocomoDate> parse_locomo_date(std::string_view text);

}  // namespace inferscale::memory
