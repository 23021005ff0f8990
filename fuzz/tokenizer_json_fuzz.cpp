// tokenizer.json loading; a tokenizer that loads also encodes and decodes a fixed text.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tokenizer/tokenizer.h"

using namespace inferscale::tokenizer;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto tok = Tokenizer::from_json(std::string_view(reinterpret_cast<const char*>(data), size));
    if (!tok.ok()) return 0;
    const auto ids = tok->encode("Hello world, 123 <|im_end|> \xe2\x96\x81x\xff");
    (void)tok->decode(ids);
    return 0;
}
