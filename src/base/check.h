#pragma once
// IS_CHECK(cond) << "context": aborts with file:line when a programming invariant is broken.
// Expected failures (bad input, missing files) are Result values, never checks.

#include <sstream>

namespace inferscale {

class CheckFailure {
  public:
    CheckFailure(const char* file, int line, const char* condition);
    [[noreturn]] ~CheckFailure();
    std::ostream& stream() { return message_; }

  private:
    std::ostringstream message_;
};

}  // namespace inferscale

#define IS_CHECK(cond) \
    if (cond) {        \
    } else             \
        ::inferscale::CheckFailure(__FILE__, __LINE__, #cond).stream()

#define IS_CHECK_EQ(a, b) IS_CHECK((a) == (b)) << (a) << " vs " << (b) << " "
#define IS_UNREACHABLE() ::inferscale::CheckFailure(__FILE__, __LINE__, "unreachable").stream()
