// GBNF grammars: parse (rules, literals, classes, repetition), check, and match a short text.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar/grammar.h"

using namespace inferscale::grammar;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto grammar = Grammar::from_gbnf(std::string_view(reinterpret_cast<const char*>(data), size));
    if (grammar.ok()) (void)(*grammar)->accepts("yes: {\"a\": [1, 2]}\n");
    return 0;
}
