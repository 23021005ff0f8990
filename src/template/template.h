#pragma once
// Template: a Jinja template parsed once and rendered many times, with the semantics of
// transformers' chat-template environment (Jinja2's sandbox with trim_blocks, lstrip_blocks,
// loop controls, {% generation %}, tojson, raise_exception, strftime_now). Copies share the
// parsed tree, which is immutable, so one Template may render from several threads.

#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "template/value.h"

namespace inferscale::jinja {

struct Stmt;

class Template {
  public:
    // Error "line N: ..." when the source does not parse or uses a statement, filter or test
    // this interpreter does not support.
    static Result<Template> parse(std::string_view source);

    // Error "line N: ..." when rendering fails (raise_exception, a type error, an undefined
    // value used as an object).
    Result<std::string> render(const ValueDict& context) const;

  private:
    std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
};

}  // namespace inferscale::jinja
