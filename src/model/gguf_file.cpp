#include "model/gguf_file.h"

#include <cstring>
#include <limits>
#include <set>

#include "model/gguf_dequant.h"

namespace inferscale::model {
namespace {

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxArrayDepth = 8;             // nested arrays deeper than this are not GGUF
constexpr std::uint32_t kMaxDims = 4;         // GGML_MAX_DIMS

std::size_t min_encoded_size(GgufType t) {
    switch (t) {
        case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
        case GgufType::U16: case GgufType::I16: return 2;
        case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
        case GgufType::U64: case GgufType::I64: case GgufType::F64: case GgufType::String: return 8;
        case GgufType::Array: return 12;
    }
    return 1;
}

}  // namespace

// Reads little-endian values with a bounds check on every access.
class GgufParser {
  public:
    explicit GgufParser(const MappedFile& file) : data_(file.data()), size_(file.size()) {}

    std::uint64_t pos() const { return pos_; }
    std::uint64_t remaining() const { return size_ - pos_; }

    template <class T>
    Result<T> read(const char* what) {
        if (remaining() < sizeof(T)) return truncated(what);
        T v{};
        for (std::size_t i = 0; i < sizeof(T); ++i)
            v = static_cast<T>(v | (static_cast<T>(data_[pos_ + i]) << (8 * i)));
        pos_ += sizeof(T);
        return v;
    }

    Result<std::string> read_string(const char* what) {
        std::uint64_t len = IS_TRY(read<std::uint64_t>(what));
        if (len > remaining())
            return make_error(std::string(what) + ": string length " + std::to_string(len) +
                              " runs past the end of the file");
        std::string s(reinterpret_cast<const char*>(data_ + pos_), len);
        pos_ += len;
        return s;
    }

    Result<GgufValue> read_value(GgufType type, const std::string& key, int depth);

    Error truncated(const char* what) const {
        return make_error(std::string("truncated file: ran out of bytes reading ") + what +
                          " at offset " + std::to_string(pos_));
    }

  private:
    Result<GgufType> read_type(const std::string& key) {
        std::uint32_t t = IS_TRY(read<std::uint32_t>("a value type"));
        if (t > static_cast<std::uint32_t>(GgufType::F64))
            return make_error("metadata '" + key + "' has unknown value type " + std::to_string(t));
        return static_cast<GgufType>(t);
    }
    Result<GgufValue> read_array(const std::string& key, int depth);

    const std::uint8_t* data_;
    std::uint64_t size_;
    std::uint64_t pos_ = 0;
};

Result<GgufValue> GgufParser::read_value(GgufType type, const std::string& key, int depth) {
    GgufValue v;
    v.type = type;
    const char* what = "a metadata value";
    switch (type) {
        case GgufType::U8: v.int_value = IS_TRY(read<std::uint8_t>(what)); break;
        case GgufType::I8:
            v.int_value = static_cast<std::int8_t>(IS_TRY(read<std::uint8_t>(what)));
            break;
        case GgufType::U16: v.int_value = IS_TRY(read<std::uint16_t>(what)); break;
        case GgufType::I16:
            v.int_value = static_cast<std::int16_t>(IS_TRY(read<std::uint16_t>(what)));
            break;
        case GgufType::U32: v.int_value = IS_TRY(read<std::uint32_t>(what)); break;
        case GgufType::I32:
            v.int_value = static_cast<std::int32_t>(IS_TRY(read<std::uint32_t>(what)));
            break;
        case GgufType::I64:
            v.int_value = static_cast<std::int64_t>(IS_TRY(read<std::uint64_t>(what)));
            break;
        case GgufType::U64: {
            std::uint64_t u = IS_TRY(read<std::uint64_t>(what));
            if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                return make_error("metadata '" + key + "' u64 value out of range");
            v.int_value = static_cast<std::int64_t>(u);
            break;
        }
        case GgufType::Bool: {
            std::uint8_t b = IS_TRY(read<std::uint8_t>(what));
            if (b > 1)
                return make_error("metadata '" + key + "' has invalid bool byte " +
                                  std::to_string(b));
            v.int_value = b;
            break;
        }
        case GgufType::F32: {
            std::uint32_t bits = IS_TRY(read<std::uint32_t>(what));
            float f;
            std::memcpy(&f, &bits, 4);
            v.float_value = f;
            break;
        }
        case GgufType::F64: {
            std::uint64_t bits = IS_TRY(read<std::uint64_t>(what));
            std::memcpy(&v.float_value, &bits, 8);
            break;
        }
        case GgufType::String: v.str = IS_TRY(read_string(what)); break;
        case GgufType::Array: return read_array(key, depth + 1);
    }
    return v;
}

Result<GgufValue> GgufParser::read_array(const std::string& key, int depth) {
    if (depth > kMaxArrayDepth) return make_error("metadata '" + key + "' nests arrays too deeply");
    GgufValue v;
    v.type = GgufType::Array;
    v.elem_type = IS_TRY(read_type(key));
    v.array_size = IS_TRY(read<std::uint64_t>("an array length"));
    // Every element takes at least min_encoded_size bytes, so a count the file cannot hold is
    // rejected before anything is reserved.
    if (v.array_size > remaining() / min_encoded_size(v.elem_type))
        return make_error("metadata '" + key + "' array of " + std::to_string(v.array_size) +
                          " elements runs past the end of the file");
    const std::size_t n = static_cast<std::size_t>(v.array_size);
    if (v.elem_type == GgufType::String) v.strings.reserve(n);
    else if (v.elem_type == GgufType::F32 || v.elem_type == GgufType::F64) v.floats.reserve(n);
    else if (v.elem_type != GgufType::Array) v.ints.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        GgufValue e = IS_TRY(read_value(v.elem_type, key, depth));
        if (v.elem_type == GgufType::String) v.strings.push_back(std::move(e.str));
        else if (e.is_float()) v.floats.push_back(e.float_value);
        else if (v.elem_type != GgufType::Array) v.ints.push_back(e.int_value);
    }
    return v;
}

std::string_view gguf_type_name(GgufType t) {
    switch (t) {
        case GgufType::U8: return "u8";
        case GgufType::I8: return "i8";
        case GgufType::U16: return "u16";
        case GgufType::I16: return "i16";
        case GgufType::U32: return "u32";
        case GgufType::I32: return "i32";
        case GgufType::F32: return "f32";
        case GgufType::Bool: return "bool";
        case GgufType::String: return "string";
        case GgufType::Array: return "array";
        case GgufType::U64: return "u64";
        case GgufType::I64: return "i64";
        case GgufType::F64: return "f64";
    }
    return "?";
}

bool GgufValue::is_integer() const {
    switch (type) {
        case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16:
        case GgufType::U32: case GgufType::I32: case GgufType::U64: case GgufType::I64:
        case GgufType::Bool:
            return true;
        default:
            return false;
    }
}

std::int64_t GgufTensorInfo::numel() const {
    std::int64_t n = 1;
    for (std::int64_t d : ne) n *= d;
    return n;
}

namespace {

// Reads one tensor info and checks its shape and type; offsets are checked by the caller once
// the data region is known.
Result<GgufTensorInfo> read_tensor_info(GgufParser& p, std::uint64_t file_size) {
    GgufTensorInfo t;
    t.name = IS_TRY(p.read_string("a tensor name"));
    std::uint32_t n_dims = IS_TRY(p.read<std::uint32_t>("a tensor rank"));
    if (n_dims == 0 || n_dims > kMaxDims)
        return make_error("tensor '" + t.name + "' has " + std::to_string(n_dims) +
                          " dimensions (1 to 4 supported)");
    // Every type spends at least one bit per element, so numel is bounded by 8x the file size.
    std::uint64_t numel = 1;
    for (std::uint32_t i = 0; i < n_dims; ++i) {
        std::uint64_t d = IS_TRY(p.read<std::uint64_t>("a tensor dimension"));
        if (d > (1ull << 62) || (d != 0 && numel > (file_size * 8 + 8) / d))
            return make_error("tensor '" + t.name + "' has absurd dimensions");
        numel *= d;
        t.ne.push_back(static_cast<std::int64_t>(d));
    }
    t.type = IS_TRY(p.read<std::uint32_t>("a tensor type"));
    t.offset = IS_TRY(p.read<std::uint64_t>("a tensor offset"));
    const GgmlTypeSize size = ggml_type_size(t.type);
    if (size.block_elems == 0)
        return make_error("tensor '" + t.name + "' has unknown ggml type " +
                          std::to_string(t.type));
    if (static_cast<std::uint64_t>(t.ne[0]) % size.block_elems != 0)
        return make_error("tensor '" + t.name + "': first dimension " + std::to_string(t.ne[0]) +
                          " is not a multiple of the " + ggml_type_name(t.type) + " block size");
    t.nbytes = numel / size.block_elems * size.block_bytes;
    return t;
}

}  // namespace

Result<GgufFile> GgufFile::open(const std::string& path) {
    GgufFile g;
    g.file_ = IS_TRY(MappedFile::open(path));
    Status parsed = g.parse();
    if (!parsed.ok()) return make_error(path + ": " + parsed.error().message);
    return g;
}

Status GgufFile::parse() {
    GgufParser p(file_);
    if (file_.size() < 4) return make_error("too small to be a GGUF file");
    if (IS_TRY(p.read<std::uint32_t>("the magic")) != kMagic)
        return make_error("not a GGUF file (bad magic)");
    version_ = IS_TRY(p.read<std::uint32_t>("the version"));
    if (version_ != 2 && version_ != 3)
        return make_error("unsupported GGUF version " + std::to_string(version_) +
                          " (2 and 3 supported)");
    const std::uint64_t n_tensors = IS_TRY(p.read<std::uint64_t>("the tensor count"));
    const std::uint64_t n_kv = IS_TRY(p.read<std::uint64_t>("the metadata count"));
    // A key/value takes at least 13 bytes and a tensor info at least 28.
    if (n_kv > p.remaining() / 13 || n_tensors > p.remaining() / 28)
        return make_error("truncated or corrupt header: " + std::to_string(n_kv) +
                          " metadata entries and " + std::to_string(n_tensors) +
                          " tensors cannot fit in the file");

    for (std::uint64_t i = 0; i < n_kv; ++i) {
        std::string key = IS_TRY(p.read_string("a metadata key"));
        const std::uint32_t type_id = IS_TRY(p.read<std::uint32_t>("a metadata type"));
        if (type_id > static_cast<std::uint32_t>(GgufType::F64))
            return make_error("metadata '" + key + "' has unknown value type " +
                              std::to_string(type_id));
        GgufValue value = IS_TRY(p.read_value(static_cast<GgufType>(type_id), key, 0));
        if (!metadata_.emplace(key, std::move(value)).second)
            return make_error("duplicate metadata key '" + key + "'");
    }
    if (const GgufValue* a = find("general.alignment")) {
        if (!a->is_integer() || a->int_value <= 0 || (a->int_value & (a->int_value - 1)) != 0)
            return make_error("general.alignment must be a positive power of two");
        alignment_ = static_cast<std::uint64_t>(a->int_value);
    }

    std::set<std::string, std::less<>> names;
    tensors_.reserve(static_cast<std::size_t>(n_tensors));
    for (std::uint64_t i = 0; i < n_tensors; ++i) {
        GgufTensorInfo info = IS_TRY(read_tensor_info(p, file_.size()));
        if (!names.insert(info.name).second)
            return make_error("duplicate tensor '" + info.name + "'");
        tensors_.push_back(std::move(info));
    }

    data_start_ = (p.pos() + alignment_ - 1) / alignment_ * alignment_;
    if (data_start_ > file_.size() && !tensors_.empty())
        return make_error("truncated file: no tensor data after the header");
    const std::uint64_t data_len = file_.size() > data_start_ ? file_.size() - data_start_ : 0;
    for (const GgufTensorInfo& t : tensors_) {
        if (t.offset % alignment_ != 0)
            return make_error("tensor '" + t.name + "' offset " + std::to_string(t.offset) +
                              " is not aligned to " + std::to_string(alignment_));
        if (t.offset > data_len || t.nbytes > data_len - t.offset)
            return make_error("truncated file: tensor '" + t.name + "' needs bytes [" +
                              std::to_string(t.offset) + ", " +
                              std::to_string(t.offset + t.nbytes) + ") of a data region of " +
                              std::to_string(data_len));
    }
    return {};
}

const GgufValue* GgufFile::find(std::string_view key) const {
    auto it = metadata_.find(key);
    return it == metadata_.end() ? nullptr : &it->second;
}

Result<std::int64_t> GgufFile::get_int(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return make_error("missing metadata '" + std::string(key) + "'");
    if (!v->is_integer())
        return make_error("metadata '" + std::string(key) + "' must be an integer, got " +
                          std::string(gguf_type_name(v->type)));
    return v->int_value;
}

Result<double> GgufFile::get_float(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return make_error("missing metadata '" + std::string(key) + "'");
    if (v->is_float()) return v->float_value;
    if (v->is_integer() && v->type != GgufType::Bool) return static_cast<double>(v->int_value);
    return make_error("metadata '" + std::string(key) + "' must be a number, got " +
                      std::string(gguf_type_name(v->type)));
}

Result<std::string> GgufFile::get_string(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return make_error("missing metadata '" + std::string(key) + "'");
    if (v->type != GgufType::String)
        return make_error("metadata '" + std::string(key) + "' must be a string, got " +
                          std::string(gguf_type_name(v->type)));
    return v->str;
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return make_error("missing metadata '" + std::string(key) + "'");
    if (v->type != GgufType::Bool)
        return make_error("metadata '" + std::string(key) + "' must be a bool, got " +
                          std::string(gguf_type_name(v->type)));
    return v->int_value != 0;
}

}  // namespace inferscale::model
