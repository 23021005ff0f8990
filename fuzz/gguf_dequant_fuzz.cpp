// Block dequantization of every supported ggml type: the first byte picks the type, the rest
// is block data (whole blocks only, as the loader hands over).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/gguf_dequant.h"

using namespace inferscale::model;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const GgmlType kTypes[] = {
        GgmlType::F32,  GgmlType::F16,  GgmlType::Q4_0,   GgmlType::Q4_1,   GgmlType::Q5_0,
        GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K,   GgmlType::Q3_K,   GgmlType::Q4_K,
        GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::BF16,
    };
    if (size < 1) return 0;
    const auto type = static_cast<std::uint32_t>(kTypes[data[0] % std::size(kTypes)]);
    const GgmlTypeSize block = ggml_type_size(type);
    const std::size_t blocks = (size - 1) / block.block_bytes;
    if (blocks == 0) return 0;
    std::vector<std::uint8_t> src(data + 1, data + 1 + blocks * block.block_bytes);
    std::vector<float> dst(blocks * block.block_elems);
    dequantize_to_f32(type, src.data(), dst.data(), dst.size());
    return 0;
}
