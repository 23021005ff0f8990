#pragma once
// Result<T>: the value of an operation that can fail for an expected reason (bad input, missing
// file). Bugs use IS_CHECK instead. Nothing throws across a component boundary.

#include <string>
#include <utility>
#include <variant>

#include "base/check.h"

namespace inferscale {

// What kind of failure an Error is, for callers that answer differently (an HTTP status).
enum class ErrorKind {
    Failed,           // anything else
    InvalidArgument,  // the caller's input is wrong
    NotFound,         // a named thing (user, fact, model) does not exist
    Unavailable,      // out of capacity now; retrying later may succeed
};

struct Error {
    std::string message;
    ErrorKind kind = ErrorKind::Failed;
};

template <class T>
class [[nodiscard]] Result {
  public:
    Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
    Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & { IS_CHECK(ok()) << error_message_or_empty(); return std::get<0>(v_); }
    const T& value() const& { IS_CHECK(ok()) << error_message_or_empty(); return std::get<0>(v_); }
    T&& value() && {
        IS_CHECK(ok()) << error_message_or_empty();
        return std::get<0>(std::move(v_));
    }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    const Error& error() const& { IS_CHECK(!ok()); return std::get<1>(v_); }
    Error&& error() && { IS_CHECK(!ok()); return std::get<1>(std::move(v_)); }

  private:
    std::string error_message_or_empty() const { return ok() ? "" : std::get<1>(v_).message; }
    std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
  public:
    Result() = default;
    Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

    bool ok() const { return ok_; }
    explicit operator bool() const { return ok_; }
    const Error& error() const& { IS_CHECK(!ok_); return error_; }
    Error&& error() && { IS_CHECK(!ok_); return std::move(error_); }

  private:
    Error error_;
    bool ok_ = true;
};

using Status = Result<void>;

inline Error make_error(std::string message) { return Error{std::move(message)}; }
inline Error make_error(ErrorKind kind, std::string message) {
    return Error{std::move(message), kind};
}

}  // namespace inferscale

// Evaluates a Result expression; on failure returns its Error from the enclosing function,
// otherwise yields the value (GNU statement expression, supported by gcc, clang and nvcc hosts).
#define IS_TRY(expr)                                               \
    ({                                                             \
        auto is_try_result_ = (expr);                              \
        if (!is_try_result_.ok())                                  \
            return ::inferscale::Error(std::move(is_try_result_).error()); \
        std::move(is_try_result_).value();                         \
    })

// For Result<void>: returns the Error from the enclosing function on failure.
#define IS_RETURN_IF_ERROR(expr)                                   \
    do {                                                           \
        auto is_status_ = (expr);                                  \
        if (!is_status_.ok()) return ::inferscale::Error(std::move(is_status_).error()); \
    } while (0)
