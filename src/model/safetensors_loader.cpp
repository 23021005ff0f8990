#include "model/safetensors_loader.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <sys/stat.h>
#include <vector>

#include <nlohmann/json.hpp>

namespace inferscale::model {
namespace {

using nlohmann::json;

// The format's own limit on the JSON header; larger means a corrupt length field.
constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;

struct Entry {
    std::string name;
    tensor::Tensor t;  // data not yet set
    std::uint64_t begin = 0;
};

bool file_exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Result<tensor::DType> parse_dtype(const std::string& s, const std::string& name) {
    if (s == "F32") return tensor::DType::F32;
    if (s == "F16") return tensor::DType::F16;
    if (s == "BF16") return tensor::DType::BF16;
    return make_error("tensor '" + name + "' has unsupported dtype '" + s +
                      "' (supported: F32, F16, BF16)");
}

// Validates one header entry against the data region of `data_len` bytes.
Result<Entry> parse_entry(const std::string& name, const json& info, std::uint64_t data_len) {
    if (!info.is_object())
        return make_error("tensor '" + name + "': header entry is not an object");
    auto dtype_it = info.find("dtype");
    auto shape_it = info.find("shape");
    auto offs_it = info.find("data_offsets");
    if (dtype_it == info.end() || !dtype_it->is_string())
        return make_error("tensor '" + name + "': missing or non-string 'dtype'");
    if (shape_it == info.end() || !shape_it->is_array())
        return make_error("tensor '" + name + "': missing or non-list 'shape'");
    if (offs_it == info.end() || !offs_it->is_array() || offs_it->size() != 2 ||
        !(*offs_it)[0].is_number_unsigned() || !(*offs_it)[1].is_number_unsigned())
        return make_error("tensor '" + name +
                          "': 'data_offsets' must be two non-negative integers");

    Entry e;
    e.name = name;
    e.t.dtype = IS_TRY(parse_dtype(dtype_it->get<std::string>(), name));
    if (shape_it->size() > 4)
        return make_error("tensor '" + name + "' has rank " + std::to_string(shape_it->size()) +
                          " (at most 4 supported)");
    e.t.rank = static_cast<int>(shape_it->size());
    // numel * dtype_size must not overflow: every dim is bounded by the data length.
    std::uint64_t bytes = tensor::dtype_size(e.t.dtype);
    for (int i = 0; i < e.t.rank; ++i) {
        const json& d = (*shape_it)[static_cast<std::size_t>(i)];
        if (!d.is_number_unsigned())
            return make_error("tensor '" + name + "': shape entries must be non-negative integers");
        std::uint64_t dim = d.get<std::uint64_t>();
        if (dim > (1ull << 62) || (dim != 0 && bytes > data_len / dim))
            return make_error("tensor '" + name + "': shape is larger than the file");
        bytes *= dim;
        e.t.shape[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(dim);
    }
    std::uint64_t begin = (*offs_it)[0].get<std::uint64_t>();
    std::uint64_t end = (*offs_it)[1].get<std::uint64_t>();
    if (begin > end || end > data_len)
        return make_error("tensor '" + name + "': data_offsets [" + std::to_string(begin) + ", " +
                          std::to_string(end) + "] outside the data region of " +
                          std::to_string(data_len) + " bytes");
    if (end - begin != bytes)
        return make_error("tensor '" + name + "': data_offsets span " +
                          std::to_string(end - begin) + " bytes but shape and dtype need " +
                          std::to_string(bytes));
    e.begin = begin;
    return e;
}

// Errors are returned without the path; callers prefix it.
Result<std::size_t> load_file_impl(MappedFile file, WeightStore& store,
                                   std::set<std::string>* names_out,
                                   const std::set<std::string>& ignore = {}) {
    const std::uint64_t size = file.size();
    if (size < 8) return make_error("too small to be a safetensors file (" +
                                    std::to_string(size) + " bytes)");
    std::uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file.data()[i];
    if (header_len > kMaxHeaderBytes || header_len > size - 8)
        return make_error("header length " + std::to_string(header_len) +
                          " exceeds the file size " + std::to_string(size) + " (truncated?)");
    const char* header = reinterpret_cast<const char*>(file.data()) + 8;
    json doc = json::parse(header, header + header_len, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return make_error("header is not valid JSON");
    if (!doc.is_object()) return make_error("header is not a JSON object");

    const std::uint64_t data_start = 8 + header_len;
    const std::uint64_t data_len = size - data_start;
    std::vector<Entry> entries;
    for (auto it = doc.begin(); it != doc.end(); ++it) {
        if (it.key() == "__metadata__" || ignore.count(it.key()) != 0) continue;
        if (store.find(it.key()) != nullptr)
            return make_error("tensor '" + it.key() + "' appears in more than one file");
        entries.push_back(IS_TRY(parse_entry(it.key(), it.value(), data_len)));
    }

    const MappedFile& kept = store.keep_file(std::move(file));
    const std::uint8_t* data = kept.data() + data_start;
    for (Entry& e : entries) {
        const std::uint8_t* src = data + e.begin;
        const std::size_t nbytes = e.t.nbytes();
        if (reinterpret_cast<std::uintptr_t>(src) % tensor::dtype_size(e.t.dtype) == 0) {
            e.t.data = const_cast<std::uint8_t*>(src);  // read-only map; weights are never written
        } else {
            // The format does not promise alignment; copy rather than hand out misaligned views.
            void* dst = store.allocate(nbytes);
            std::memcpy(dst, src, nbytes);
            e.t.data = dst;
        }
        if (names_out != nullptr) names_out->insert(e.name);
        store.add(std::move(e.name), e.t);
    }
    return entries.size();
}

Result<std::size_t> load_sharded(const std::string& dir, const std::string& index_path,
                                 WeightStore& store, const SafetensorsProgress& progress) {
    std::string text = IS_TRY(read_text_file(index_path));
    json index = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded() || !index.is_object())
        return make_error(index_path + ": not a valid JSON object");
    auto map_it = index.find("weight_map");
    if (map_it == index.end() || !map_it->is_object())
        return make_error(index_path + ": missing or non-object 'weight_map'");

    std::map<std::string, std::vector<std::string>> shards;  // file -> tensors it should hold
    for (auto it = map_it->begin(); it != map_it->end(); ++it) {
        if (!it.value().is_string())
            return make_error(index_path + ": weight_map entry '" + it.key() + "' is not a string");
        std::string shard = it.value().get<std::string>();
        // Shards live next to the index; a path component could point anywhere.
        if (shard.empty() || shard.find('/') != std::string::npos || shard == "..")
            return make_error(index_path + ": invalid shard file name '" + shard + "'");
        shards[shard].push_back(it.key());
    }
    if (shards.empty()) return make_error(index_path + ": weight_map is empty");

    const std::size_t total = map_it->size();
    std::size_t done = 0;
    for (const auto& [shard, expected] : shards) {
        const std::string path = dir + "/" + shard;
        std::set<std::string> names;
        MappedFile file = IS_TRY(MappedFile::open(path));  // its Error names the path
        auto added = load_file_impl(std::move(file), store, &names);
        if (!added.ok()) return make_error(path + ": " + added.error().message);
        for (const std::string& name : expected) {
            if (names.count(name) == 0)
                return make_error(path + ": tensor '" + name + "' listed in " + index_path +
                                  " is not in this shard");
        }
        done += *added;
        if (progress) progress(std::min(done, total), total);
    }
    return done;
}

}  // namespace

Result<std::size_t> load_safetensors_file(const std::string& path, WeightStore& store) {
    return load_safetensors_file(path, store, {});
}

Result<std::size_t> load_safetensors_file(const std::string& path, WeightStore& store,
                                          const std::set<std::string>& ignore) {
    MappedFile file = IS_TRY(MappedFile::open(path));  // its Error names the path
    auto added = load_file_impl(std::move(file), store, nullptr, ignore);
    if (!added.ok()) return make_error(path + ": " + added.error().message);
    return added;
}

Result<std::size_t> load_safetensors_dir(const std::string& dir, WeightStore& store,
                                         const SafetensorsProgress& progress) {
    const std::string index_path = dir + "/model.safetensors.index.json";
    if (file_exists(index_path)) return load_sharded(dir, index_path, store, progress);
    const std::string single = dir + "/model.safetensors";
    if (!file_exists(single))
        return make_error(dir + ": no model.safetensors or model.safetensors.index.json");
    std::size_t n = IS_TRY(load_safetensors_file(single, store));
    if (progress) progress(n, n);
    return n;
}

}  // namespace inferscale::model
