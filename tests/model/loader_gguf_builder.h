#pragma once
// GgufBuilder: writes small GGUF v3 files byte by byte, so the loader tests can make valid
// files and then break exactly one thing in them.

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace inferscale::model::test {

class GgufBuilder {
  public:
    struct Kv {
        std::string key;
        std::uint32_t type;
        std::string payload;  // encoded value
    };
    struct TensorSpec {
        std::string name;
        std::vector<std::uint64_t> ne;
        std::uint32_t type;
        std::string data;
        std::int64_t offset_override = -1;
    };

    static void put_u32(std::string& o, std::uint32_t v) {
        for (int i = 0; i < 4; ++i) o.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    }
    static void put_u64(std::string& o, std::uint64_t v) {
        for (int i = 0; i < 8; ++i) o.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    }
    static void put_str(std::string& o, const std::string& s) {
        put_u64(o, s.size());
        o += s;
    }

    void add_u32(const std::string& key, std::uint32_t v) {
        std::string p;
        put_u32(p, v);
        kvs.push_back({key, 4, p});
    }
    void add_f32(const std::string& key, float v) {
        std::uint32_t bits;
        std::memcpy(&bits, &v, 4);
        std::string p;
        put_u32(p, bits);
        kvs.push_back({key, 6, p});
    }
    void add_string(const std::string& key, const std::string& v) {
        std::string p;
        put_str(p, v);
        kvs.push_back({key, 8, p});
    }
    void add_raw(const std::string& key, std::uint32_t type, std::string payload) {
        kvs.push_back({key, type, std::move(payload)});
    }
    void erase_kv(const std::string& key) {
        std::erase_if(kvs, [&](const Kv& kv) { return kv.key == key; });
    }
    void erase_tensor(const std::string& name) {
        std::erase_if(tensors, [&](const TensorSpec& t) { return t.name == name; });
    }
    // An F32 tensor filled with small distinct values.
    void add_f32_tensor(const std::string& name, std::vector<std::uint64_t> ne) {
        std::uint64_t n = 1;
        for (auto d : ne) n *= d;
        std::string data(n * 4, '\0');
        for (std::uint64_t i = 0; i < n; ++i) {
            float f = static_cast<float>(i % 13) * 0.125f;
            std::memcpy(&data[i * 4], &f, 4);
        }
        tensors.push_back({name, std::move(ne), 0, std::move(data)});
    }

    std::string build(std::uint32_t version = 3, std::uint64_t alignment = 32) const {
        std::string o = "GGUF";
        put_u32(o, version);
        put_u64(o, tensors.size());
        put_u64(o, kvs.size());
        for (const Kv& kv : kvs) {
            put_str(o, kv.key);
            put_u32(o, kv.type);
            o += kv.payload;
        }
        std::string data;
        for (const TensorSpec& t : tensors) {
            while (data.size() % alignment != 0) data.push_back('\0');
            put_str(o, t.name);
            put_u32(o, static_cast<std::uint32_t>(t.ne.size()));
            for (auto d : t.ne) put_u64(o, d);
            put_u32(o, t.type);
            put_u64(o, t.offset_override >= 0 ? static_cast<std::uint64_t>(t.offset_override)
                                              : data.size());
            data += t.data;
        }
        while (o.size() % alignment != 0) o.push_back('\0');
        return o + data;
    }

    std::vector<Kv> kvs;
    std::vector<TensorSpec> tensors;
};

// A valid, tied, 1-layer llama with hidden 32, 2 heads, 1 kv head, vocab 8, all F32.
inline GgufBuilder minimal_llama() {
    GgufBuilder b;
    b.add_string("general.architecture", "llama");
    b.add_u32("llama.block_count", 1);
    b.add_u32("llama.context_length", 64);
    b.add_u32("llama.embedding_length", 32);
    b.add_u32("llama.feed_forward_length", 32);
    b.add_u32("llama.attention.head_count", 2);
    b.add_u32("llama.attention.head_count_kv", 1);
    b.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    b.add_f32_tensor("token_embd.weight", {32, 8});
    b.add_f32_tensor("blk.0.attn_norm.weight", {32});
    b.add_f32_tensor("blk.0.attn_q.weight", {32, 32});
    b.add_f32_tensor("blk.0.attn_k.weight", {32, 16});
    b.add_f32_tensor("blk.0.attn_v.weight", {32, 16});
    b.add_f32_tensor("blk.0.attn_output.weight", {32, 32});
    b.add_f32_tensor("blk.0.ffn_norm.weight", {32});
    b.add_f32_tensor("blk.0.ffn_gate.weight", {32, 32});
    b.add_f32_tensor("blk.0.ffn_up.weight", {32, 32});
    b.add_f32_tensor("blk.0.ffn_down.weight", {32, 32});
    b.add_f32_tensor("output_norm.weight", {32});
    return b;
}

}  // namespace inferscale::model::test
