#include "base/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace inferscale {
namespace {

LogLevel threshold_from_env() {
    const char* env = std::getenv("INFERSCALE_LOG");
    if (env == nullptr) return LogLevel::Info;
    if (std::strcmp(env, "debug") == 0) return LogLevel::Debug;
    if (std::strcmp(env, "warn") == 0) return LogLevel::Warn;
    if (std::strcmp(env, "error") == 0) return LogLevel::Error;
    return LogLevel::Info;
}

const char* level_name(LogLevel level) {
    switch (level) {
        case LogLevel::Debug: return "D";
        case LogLevel::Info: return "I";
        case LogLevel::Warn: return "W";
        case LogLevel::Error: return "E";
    }
    return "?";
}

}  // namespace

bool log_enabled(LogLevel level) {
    static const LogLevel threshold = threshold_from_env();
    return static_cast<int>(level) >= static_cast<int>(threshold);
}

LogLine::LogLine(LogLevel level, const char* file, int line) {
    const char* base = std::strrchr(file, '/');
    message_ << "[" << level_name(level) << " " << (base ? base + 1 : file) << ":" << line << "] ";
}

LogLine::~LogLine() {
    message_ << "\n";
    std::fputs(message_.str().c_str(), stderr);
}

}  // namespace inferscale
