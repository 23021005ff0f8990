#pragma once
// TemplateError: how a failure travels inside the interpreter. It is thrown while parsing or
// rendering and caught by Template (template.h), which returns it as a Result error; it never
// leaves this component. line 0 means "not known yet": the statement being run fills it in.

#include <string>

namespace inferscale::jinja {

struct TemplateError {
    std::string message;
    int line = 0;
};

[[noreturn]] inline void fail(std::string message, int line = 0) {
    throw TemplateError{std::move(message), line};
}

}  // namespace inferscale::jinja
