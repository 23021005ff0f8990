#pragma once
// GgufFile: a parsed GGUF container (versions 2 and 3): metadata key/values, tensor infos and
// the tensor data region of a memory-mapped file. Parsing checks every length and count against
// the bytes actually present before allocating, so a truncated or hostile file is an Error,
// never a crash or a huge allocation. Format: github.com/ggml-org/ggml docs/gguf.md.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "base/result.h"

namespace inferscale::model {

enum class GgufType : std::uint32_t {
    U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
    String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};

std::string_view gguf_type_name(GgufType t);

// One metadata value. Scalars fill exactly one of int_value / float_value / str; arrays fill
// elem_type and one of ints / floats / strings (nested arrays keep only their length).
struct GgufValue {
    GgufType type = GgufType::U8;
    std::int64_t int_value = 0;  // all integer types and Bool (u64 above INT64_MAX is rejected)
    double float_value = 0;      // F32, F64
    std::string str;
    GgufType elem_type = GgufType::U8;
    std::uint64_t array_size = 0;
    std::vector<std::int64_t> ints;
    std::vector<double> floats;
    std::vector<std::string> strings;

    bool is_integer() const;  // any integer type or Bool
    bool is_float() const { return type == GgufType::F32 || type == GgufType::F64; }
};

struct GgufTensorInfo {
    std::string name;
    std::vector<std::int64_t> ne;  // GGUF order: ne[0] is the fastest-varying dimension
    std::uint32_t type = 0;        // ggml_type
    std::uint64_t offset = 0;      // from the start of the data region
    std::uint64_t nbytes = 0;      // checked to lie within the data region
    std::int64_t numel() const;
};

class GgufFile {
  public:
    // Maps and parses `path`. Tensor types other than those gguf_dequant supports still parse
    // when their size is known; unknown type ids are an Error.
    static Result<GgufFile> open(const std::string& path);

    std::uint32_t version() const { return version_; }
    std::uint64_t alignment() const { return alignment_; }
    const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
    const MappedFile& file() const { return file_; }
    // Moves the mapping out (e.g. into a WeightStore); tensor_data() must not be used afterwards.
    MappedFile release_file() { return std::move(file_); }
    const std::uint8_t* tensor_data(const GgufTensorInfo& t) const {
        return file_.data() + data_start_ + t.offset;
    }
    std::uint64_t data_start() const { return data_start_; }

    // nullptr when absent.
    const GgufValue* find(std::string_view key) const;
    // Typed getters: an Error naming the key when absent or of the wrong type.
    Result<std::int64_t> get_int(std::string_view key) const;
    Result<double> get_float(std::string_view key) const;  // accepts integer values too
    Result<std::string> get_string(std::string_view key) const;
    Result<bool> get_bool(std::string_view key) const;

  private:
    Status parse();

    MappedFile file_;
    std::uint32_t version_ = 0;
    std::uint64_t alignment_ = 32;
    std::uint64_t data_start_ = 0;
    std::map<std::string, GgufValue, std::less<>> metadata_;
    std::vector<GgufTensorInfo> tensors_;

    friend class GgufParser;
};

}  // namespace inferscale::model
