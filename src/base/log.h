#pragma once
// IS_LOG(Info) << "message"; one line per statement on stderr. The threshold comes from the
// environment variable INFERSCALE_LOG (debug, info, warn, error; default info).

#include <sstream>

namespace inferscale {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3 };

bool log_enabled(LogLevel level);

class LogLine {
  public:
    LogLine(LogLevel level, const char* file, int line);
    ~LogLine();
    std::ostream& stream() { return message_; }

  private:
    std::ostringstream message_;
};

}  // namespace inferscale

#define IS_LOG(level)                                                             \
    if (!::inferscale::log_enabled(::inferscale::LogLevel::level)) {              \
    } else                                                                        \
        ::inferscale::LogLine(::inferscale::LogLevel::level, __FILE__, __LINE__).stream()
