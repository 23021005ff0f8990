#include "base/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace inferscale {
namespace {

std::atomic<LogFormat> g_format{LogFormat::Text};

LogLevel threshold_from_env() {
    const char* env = std::getenv("INFERSCALE_LOG");
    if (env == nullptr) return LogLevel::Info;
    if (std::strcmp(env, "debug") == 0) return LogLevel::Debug;
    if (std::strcmp(env, "warn") == 0) return LogLevel::Warn;
    if (std::strcmp(env, "error") == 0) return LogLevel::Error;
    return LogLevel::Info;
}

const char* level_letter(LogLevel level) {
    switch (level) {
        case LogLevel::Debug: return "D";
        case LogLevel::Info: return "I";
        case LogLevel::Warn: return "W";
        case LogLevel::Error: return "E";
    }
    return "?";
}

const char* level_word(LogLevel level) {
    switch (level) {
        case LogLevel::Debug: return "debug";
        case LogLevel::Info: return "info";
        case LogLevel::Warn: return "warn";
        case LogLevel::Error: return "error";
    }
    return "?";
}

}  // namespace

bool log_enabled(LogLevel level) {
    static const LogLevel threshold = threshold_from_env();
    return static_cast<int>(level) >= static_cast<int>(threshold);
}

void set_log_format(LogFormat format) { g_format.store(format); }

LogFormat log_format() { return g_format.load(); }

std::string utc_timestamp() {
    using namespace std::chrono;
    const auto now = system_clock::now();
    const std::time_t seconds = system_clock::to_time_t(now);
    const auto millis = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char buf[40];
    const std::size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &utc);
    std::snprintf(buf + n, sizeof(buf) - n, ".%03dZ", static_cast<int>(millis));
    return buf;
}

std::string json_quoted(std::string_view text) {
    std::string out = "\"";
    for (unsigned char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

void write_log_line(std::string line) {
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);
}

LogLine::LogLine(LogLevel level, const char* file, int line) : level_(level) {
    const char* base = std::strrchr(file, '/');
    source_ = std::string(base ? base + 1 : file) + ":" + std::to_string(line);
}

LogLine::~LogLine() {
    if (log_format() == LogFormat::Json) {
        write_log_line("{\"time\":\"" + utc_timestamp() + "\",\"level\":\"" + level_word(level_) +
                       "\",\"source\":" + json_quoted(source_) +
                       ",\"message\":" + json_quoted(message_.str()) + "}");
        return;
    }
    write_log_line(utc_timestamp() + " [" + level_letter(level_) + " " + source_ + "] " +
                   message_.str());
}

}  // namespace inferscale
