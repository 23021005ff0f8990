#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace inferscale {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
    message_ << file << ":" << line << ": check failed: " << condition << " ";
}

CheckFailure::~CheckFailure() {
    std::fprintf(stderr, "%s\n", message_.str().c_str());
    std::fflush(stderr);
    std::abort();
}

}  // namespace inferscale
