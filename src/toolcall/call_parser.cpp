#include "toolcall/call_parser.h"

#include <algorithm>
#include <optional>

#include "toolcall/json_calls.h"

namespace inferscale::toolcall {
namespace {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// The marker that opens a call after content, or empty.
std::string_view content_marker(Format format) {
    if (format == Format::Hermes) return kHermesOpen;
    if (format == Format::Mistral) return kMistralMarker;
    return {};
}

// How long a suffix of `text` is a proper prefix of `marker` (the part to hold back).
std::size_t partial_marker(std::string_view text, std::string_view marker) {
    if (marker.empty()) return 0;
    for (std::size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
        if (marker.starts_with(text.substr(text.size() - n))) return n;
    return 0;
}

enum class Start { Json, Content, Unknown };

// Whether output whose first non-space text is `r` opens a JSON call body.
Start classify_start(Format format, std::string_view r) {
    const std::string_view marker = content_marker(format);
    if (!marker.empty()) {
        if (r.starts_with(marker)) return Start::Content;  // the marker path reads it
        if (marker.starts_with(r)) return Start::Unknown;
    }
    if (r.front() == '{' || r.front() == '[') return Start::Json;
    if (r.starts_with(kPythonTag)) return Start::Json;
    if (kPythonTag.starts_with(r)) return Start::Unknown;
    constexpr std::string_view kFence = "```";
    if (kFence.starts_with(r)) return Start::Unknown;
    if (!r.starts_with(kFence)) return Start::Content;
    // ``` then a language word, space, and the first character of the body.
    std::size_t i = kFence.size();
    while (i < r.size() && is_letter(r[i])) ++i;
    const std::string_view lang = r.substr(kFence.size(), i - kFence.size());
    if (i == r.size())
        return std::string_view("json").starts_with(lang) ? Start::Unknown : Start::Content;
    if (!lang.empty() && lang != "json") return Start::Content;
    while (i < r.size() && is_json_space(r[i])) ++i;
    if (i == r.size()) return Start::Unknown;
    return r[i] == '{' || r[i] == '[' ? Start::Json : Start::Content;
}

}  // namespace

ParseDelta CallParser::push(std::string_view text) {
    ParseDelta out;
    buf_ += text;
    advance(false, out);
    return out;
}

ParseDelta CallParser::finish() {
    ParseDelta out;
    advance(true, out);
    if (num_calls_ == 0) out.content += pending_space_;
    pending_space_.clear();
    return out;
}

void CallParser::advance(bool final, ParseDelta& out) {
    for (;;) {
        const State before = state_;
        const std::size_t size = buf_.size();
        switch (state_) {
            case State::Start:
                start(final, out);
                break;
            case State::Content:
                content(final, out);
                break;
            case State::Block:
                block(final, out);
                break;
            case State::JsonBody:
            case State::MarkerBody: {
                if (!final) return;
                auto parsed = parse_json_calls(format_, buf_);
                if (parsed && !std::all_of(parsed->calls.begin(), parsed->calls.end(),
                                           [&](const ParsedCall& c) { return known(c); }))
                    parsed.reset();
                if (parsed) {
                    emit_content(parsed->content, out);
                    for (ParsedCall& c : parsed->calls) emit_call(std::move(c), out);
                } else {
                    emit_content((state_ == State::MarkerBody ? std::string(kMistralMarker)
                                                              : std::string()) +
                                     buf_,
                                 out);
                }
                buf_.clear();
                state_ = State::Content;
                break;
            }
        }
        if (state_ == before && buf_.size() == size) return;  // waits for more text
    }
}

void CallParser::start(bool final, ParseDelta& out) {
    std::size_t i = 0;
    while (i < buf_.size() && is_json_space(buf_[i])) ++i;
    pending_space_ += buf_.substr(0, i);
    buf_.erase(0, i);
    if (buf_.empty()) return;
    Start kind = classify_start(format_, buf_);
    if (kind == Start::Unknown && final) kind = Start::Content;
    if (kind == Start::Unknown) return;
    state_ = kind == Start::Json ? State::JsonBody : State::Content;
    if (kind == Start::Json && num_calls_ == 0) {
        buf_.insert(0, pending_space_);  // content as it came if the body is not calls
        pending_space_.clear();
    }
    (void)out;
}

void CallParser::content(bool final, ParseDelta& out) {
    const std::string_view marker = content_marker(format_);
    const std::size_t at = marker.empty() ? std::string::npos : buf_.find(marker);
    if (at != std::string::npos) {
        emit_content(std::string_view(buf_).substr(0, at), out);
        buf_.erase(0, at + marker.size());
        state_ = format_ == Format::Hermes ? State::Block : State::MarkerBody;
        return;
    }
    const std::size_t hold = final ? 0 : partial_marker(buf_, marker);
    if (buf_.size() == hold) return;
    emit_content(std::string_view(buf_).substr(0, buf_.size() - hold), out);
    buf_.erase(0, buf_.size() - hold);
}

void CallParser::block(bool final, ParseDelta& out) {
    const std::size_t close = buf_.find(kHermesClose);
    if (close == std::string::npos && !final) return;
    const std::string_view body =
        std::string_view(buf_).substr(0, close == std::string::npos ? buf_.size() : close);
    if (auto call = parse_call_object(body); call && known(*call)) {
        emit_call(std::move(*call), out);
    } else {
        std::string raw = std::string(kHermesOpen) + std::string(body);
        if (close != std::string::npos) raw += kHermesClose;
        emit_content(raw, out);
    }
    buf_.erase(0, close == std::string::npos ? buf_.size() : close + kHermesClose.size());
    state_ = State::Content;
}

void CallParser::emit_content(std::string_view text, ParseDelta& out) {
    std::size_t end = text.size();
    while (end > 0 && is_json_space(text[end - 1])) --end;
    if (end == 0) {  // whitespace only: kept for whatever comes next
        if (!after_call_) pending_space_ += text;
        return;
    }
    std::size_t begin = 0;
    if (after_call_)
        while (begin < end && is_json_space(text[begin])) ++begin;
    after_call_ = false;
    out.content += pending_space_;
    out.content += text.substr(begin, end - begin);
    pending_space_ = std::string(text.substr(end));
}

void CallParser::emit_call(ParsedCall call, ParseDelta& out) {
    pending_space_.clear();
    after_call_ = true;
    ++num_calls_;
    out.calls.push_back(std::move(call));
}

bool CallParser::known(const ParsedCall& call) const {
    return names_.empty() || std::find(names_.begin(), names_.end(), call.name) != names_.end();
}

ParsedOutput parse_output(Format format, std::string_view text, std::vector<std::string> names) {
    CallParser parser(format, std::move(names));
    ParseDelta a = parser.push(text);
    ParseDelta b = parser.finish();
    ParsedOutput out{std::move(a.content), std::move(a.calls)};
    out.content += b.content;
    for (ParsedCall& c : b.calls) out.calls.push_back(std::move(c));
    return out;
}

}  // namespace inferscale::toolcall
