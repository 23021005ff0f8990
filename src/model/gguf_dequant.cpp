#include "model/gguf_dequant.h"

#include <cstring>

#include "base/check.h"
#include "tensor/dtype.h"
#include "tensor/quantized.h"

namespace inferscale::model {
namespace {

std::uint16_t load_u16(const std::uint8_t* p) {
    return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}

struct TypeRow {
    std::uint32_t id;
    const char* name;
    std::uint64_t block_elems;
    std::uint64_t block_bytes;
};

// ggml.h's type table (ids 4 and 5 were removed upstream).
constexpr TypeRow kTypes[] = {
    {0, "F32", 1, 4},        {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},     {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},     {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},  {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},  {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74}, {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},  {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},        {25, "I16", 1, 2},
    {26, "I32", 1, 4},       {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},  {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},  {39, "MXFP4", 32, 17},
};

// The DType of each block type we dequantize (every one, since the CPU backend multiplies them
// all in block form).
std::optional<tensor::DType> block_layout(std::uint32_t type) {
    switch (static_cast<GgmlType>(type)) {
        case GgmlType::Q8_0: return tensor::DType::Q8_0;
        case GgmlType::Q4_0: return tensor::DType::Q4_0;
        case GgmlType::Q4_1: return tensor::DType::Q4_1;
        case GgmlType::Q5_0: return tensor::DType::Q5_0;
        case GgmlType::Q5_1: return tensor::DType::Q5_1;
        case GgmlType::Q2_K: return tensor::DType::Q2_K;
        case GgmlType::Q3_K: return tensor::DType::Q3_K;
        case GgmlType::Q4_K: return tensor::DType::Q4_K;
        case GgmlType::Q5_K: return tensor::DType::Q5_K;
        case GgmlType::Q6_K: return tensor::DType::Q6_K;
        case GgmlType::IQ4_NL: return tensor::DType::IQ4_NL;
        case GgmlType::IQ4_XS: return tensor::DType::IQ4_XS;
        default: return std::nullopt;
    }
}

const TypeRow* find_type(std::uint32_t type) {
    for (const TypeRow& row : kTypes)
        if (row.id == type) return &row;
    return nullptr;
}

}  // namespace

GgmlTypeSize ggml_type_size(std::uint32_t type) {
    const TypeRow* row = find_type(type);
    return row == nullptr ? GgmlTypeSize{} : GgmlTypeSize{row->block_elems, row->block_bytes};
}

std::string ggml_type_name(std::uint32_t type) {
    const TypeRow* row = find_type(type);
    return row == nullptr ? "type " + std::to_string(type) : std::string(row->name);
}

bool ggml_type_supported(std::uint32_t type) {
    const auto t = static_cast<GgmlType>(type);
    return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 ||
           block_layout(type).has_value();
}

std::optional<tensor::DType> block_dtype(std::uint32_t type) { return block_layout(type); }

void dequantize_to_f32(std::uint32_t type, const std::uint8_t* src, float* dst, std::size_t n) {
    const GgmlTypeSize size = ggml_type_size(type);
    IS_CHECK(ggml_type_supported(type)) << ggml_type_name(type);
    IS_CHECK(n % size.block_elems == 0) << n << " elements of " << ggml_type_name(type);
    if (const std::optional<tensor::DType> block = block_layout(type)) {
        tensor::dequantize_blocks(*block, src, dst, n);
        return;
    }
    switch (static_cast<GgmlType>(type)) {
        case GgmlType::F32:
            std::memcpy(dst, src, n * sizeof(float));
            return;
        case GgmlType::F16:
            for (std::size_t i = 0; i < n; ++i) dst[i] = tensor::f16_to_f32(load_u16(src + 2 * i));
            return;
        case GgmlType::BF16:
            for (std::size_t i = 0; i < n; ++i) dst[i] = tensor::bf16_to_f32(load_u16(src + 2 * i));
            return;
        default:
            break;
    }
    IS_UNREACHABLE() << ggml_type_name(type);
}

}  // namespace inferscale::model
