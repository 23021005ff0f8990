// GGUF container: header, metadata, tensor table and the tokenizer vocabulary it carries.

#include <cstddef>
#include <cstdint>

#include "memory_file.h"
#include "model/gguf_file.h"
#include "model/gguf_loader.h"

using namespace inferscale;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::MemoryFile file(data, size);
    auto gguf = model::GgufFile::open(file.path());
    if (!gguf.ok()) return 0;
    (void)gguf->get_string("general.architecture");
    (void)gguf->get_int("general.alignment");
    std::uint64_t sum = 0;
    for (const model::GgufTensorInfo& t : gguf->tensors()) {
        if (t.nbytes > 0) sum += gguf->tensor_data(t)[t.nbytes - 1];
    }
    (void)sum;
    (void)model::read_gguf_vocab(*gguf);
    return 0;
}
