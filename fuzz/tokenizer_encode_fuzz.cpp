// Encoding arbitrary bytes with the bundled model's tokenizer (its GGUF vocabulary), then
// decoding the ids again, whole and streamed.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "model/gguf_file.h"
#include "model/gguf_loader.h"
#include "tokenizer/tokenizer.h"

using namespace inferscale;

namespace {

tokenizer::Tokenizer load_bundled() {
    auto gguf = model::GgufFile::open(INFERSCALE_BUNDLED_MODEL);
    if (!gguf.ok()) {
        std::fprintf(stderr, "%s\n", gguf.error().message.c_str());
        std::abort();
    }
    auto vocab = model::read_gguf_vocab(*gguf);
    auto tok = vocab.ok() ? tokenizer::Tokenizer::from_vocab(*vocab)
                          : Result<tokenizer::Tokenizer>(vocab.error());
    if (!tok.ok()) {
        std::fprintf(stderr, "%s\n", tok.error().message.c_str());
        std::abort();
    }
    return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const tokenizer::Tokenizer tok = load_bundled();
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto ids = tok.encode(text, true, true);
    (void)tok.encode(text, false, false);
    (void)tok.decode(ids);
    tokenizer::IncrementalDecoder stream(tok);
    for (std::int32_t id : ids) (void)stream.push(id);
    (void)stream.flush();
    return 0;
}
