#pragma once
// CallParser: a model's output, piece by piece as it streams, split into content and tool
// calls of one format (tool.h). Content streams as it comes; once the output may be starting a
// call it is held back until the call is known, so a stream and the whole text give the same
// calls and the same content however the text is cut.
//
//  - A call marker (Hermes' <tool_call>, Mistral's [TOOL_CALLS]) may come after content; a
//    prefix of one at the end of a piece is held until the next piece shows what it is.
//  - An output whose first non-space text is JSON ('{' or '['), a ```json fence or
//    <|python_tag|> is held whole until the end and then read as calls (json_calls.h);
//    models of every format write their calls so (the Qwen2.5-Coder models write a fenced
//    object rather than <tool_call>).
//  - Hermes' blocks are calls as each one closes; an unclosed block at the end is read as if
//    closed.
//  - What does not read as calls is content, byte for byte; whitespace between content and a
//    call is dropped. With no call found, the content is the output unchanged.
//  - Given the request's function names, a call naming another function does not read as a
//    call (JSON that merely looks like one stays content).

#include <string>
#include <string_view>
#include <vector>

#include "toolcall/tool.h"

namespace inferscale::toolcall {

struct ParseDelta {
    std::string content;            // text to send as content now
    std::vector<ParsedCall> calls;  // calls completed by this piece, in order
};

class CallParser {
  public:
    // `names`: the functions calls may name; empty: any.
    explicit CallParser(Format format, std::vector<std::string> names = {})
        : format_(format), names_(std::move(names)) {}

    ParseDelta push(std::string_view text);
    // The end of the output: whatever was held is resolved.
    ParseDelta finish();
    // Calls found so far.
    std::size_t num_calls() const { return num_calls_; }

  private:
    enum class State { Start, Content, Block, JsonBody, MarkerBody };
    void advance(bool final, ParseDelta& out);
    void start(bool final, ParseDelta& out);
    void content(bool final, ParseDelta& out);
    void block(bool final, ParseDelta& out);
    void emit_content(std::string_view text, ParseDelta& out);
    void emit_call(ParsedCall call, ParseDelta& out);
    bool known(const ParsedCall& call) const;

    Format format_;
    std::vector<std::string> names_;
    State state_ = State::Start;
    std::string buf_;            // undecided text
    std::string pending_space_;  // whitespace emitted only if content follows
    bool after_call_ = false;    // whitespace right after a call is dropped
    std::size_t num_calls_ = 0;
};

struct ParsedOutput {
    std::string content;
    std::vector<ParsedCall> calls;
};

// The whole output at once: push then finish.
ParsedOutput parse_output(Format format, std::string_view text,
                          std::vector<std::string> names = {});

}  // namespace inferscale::toolcall
