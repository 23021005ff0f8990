#pragma once
// IS_LOG(Info) << "message"; one line per statement on stderr, led by an ISO-8601 UTC time. The
// threshold comes from the environment variable INFERSCALE_LOG (debug, info, warn, error;
// default info). In LogFormat::Json each line is one JSON object: time, level, source, message.

#include <sstream>
#include <string>
#include <string_view>

namespace inferscale {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3 };
enum class LogFormat { Text, Json };

bool log_enabled(LogLevel level);
// Set once at start-up, before other threads log; Text until then.
void set_log_format(LogFormat format);
LogFormat log_format();

// Now as "2026-12-06T20:30:01.123Z".
std::string utc_timestamp();
// `text` as a JSON string literal, quotes included.
std::string json_quoted(std::string_view text);
// Writes `line` and a newline to stderr in one call, so lines from threads never interleave.
void write_log_line(std::string line);

class LogLine {
  public:
    LogLine(LogLevel level, const char* file, int line);
    ~LogLine();
    std::ostream& stream() { return message_; }

  private:
    LogLevel level_;
    std::string source_;  // file:line
    std::ostringstream message_;
};

}  // namespace inferscale

#define IS_LOG(level)                                                             \
    if (!::inferscale::log_enabled(::inferscale::LogLevel::level)) {              \
    } else                                                                        \
        ::inferscale::LogLine(::inferscale::LogLevel::level, __FILE__, __LINE__).stream()
