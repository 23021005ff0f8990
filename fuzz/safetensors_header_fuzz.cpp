// Safetensors file: the JSON header, its tensor entries and their offsets into the data.

#include <cstddef>
#include <cstdint>

#include "memory_file.h"
#include "model/safetensors_loader.h"
#include "model/weight_store.h"

using namespace inferscale;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::MemoryFile file(data, size);
    model::WeightStore store;
    (void)model::load_safetensors_file(file.path(), store);
    return 0;
}
