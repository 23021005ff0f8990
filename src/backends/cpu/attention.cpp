// Paged KV writes and causal GQA attention over page tables. One work item is one
// (query token, query head) pair, so decode (one token, many heads) and prefill (many tokens)
// both spread over the cores. Softmax runs online, one page at a time, so no score buffer
// proportional to the context is needed. FP8 pages are widened a row at a time and then take
// the f32 path's arithmetic, so they give the bits of f32 pages holding the widened values.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/cpu_kernels.h"
#include "base/check.h"
#include "tensor/dtype.h"

namespace inferscale::backends::cpu {
namespace {

constexpr std::int64_t kMaxHeadDim = 512;
constexpr std::int64_t kMaxBlockSize = 256;

inline float dot(const float* a, const float* b, std::int64_t d) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (std::int64_t i = 0; i < d; ++i) s += a[i] * b[i];
    return s;
}

const std::array<float, 256>& e4m3_values() {
    static const std::array<float, 256> table = [] {
        std::array<float, 256> t{};
        for (int b = 0; b < 256; ++b) t[b] = tensor::e4m3_to_f32(static_cast<std::uint8_t>(b));
        return t;
    }();
    return table;
}

// One head's K or V row as floats: in place for f32 pages, widened into `buf` for FP8.
inline const float* head_row(const void* plane, const float* scales, std::int64_t offset,
                             std::int64_t head, std::int64_t d, float* buf) {
    if (scales == nullptr) return static_cast<const float*>(plane) + offset;
    widen_e4m3(static_cast<const std::uint8_t*>(plane) + offset, scales[head], d, buf);
    return buf;
}

}  // namespace

void widen_e4m3(const std::uint8_t* src, float scale, std::int64_t n, float* dst) {
    const std::array<float, 256>& values = e4m3_values();
    for (std::int64_t i = 0; i < n; ++i) dst[i] = values[src[i]] * scale;
}

void narrow_e4m3(const float* src, float scale, std::int64_t n, std::uint8_t* dst) {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = tensor::f32_to_e4m3(src[i] / scale);
}

void write_kv(const float* k, const float* v, std::int64_t n, const std::int32_t* slots,
              const PagedKvView& pages) {
    const std::int64_t d = pages.head_dim, row = pages.kv_heads * d;
    const std::int64_t num_slots = pages.num_blocks * pages.block_size;
    for (std::int64_t t = 0; t < n; ++t) {
        if (slots[t] == -1) continue;  // a padding row (replayable decode batches)
        IS_CHECK(slots[t] >= 0 && slots[t] < num_slots) << "slot " << slots[t];
        if (!pages.fp8()) {
            std::memcpy(pages.k_f32() + slots[t] * row, k + t * row, row * sizeof(float));
            std::memcpy(pages.v_f32() + slots[t] * row, v + t * row, row * sizeof(float));
            continue;
        }
        auto* kd = static_cast<std::uint8_t*>(pages.k) + slots[t] * row;
        auto* vd = static_cast<std::uint8_t*>(pages.v) + slots[t] * row;
        for (std::int64_t h = 0; h < pages.kv_heads; ++h) {
            narrow_e4m3(k + t * row + h * d, pages.k_scale[h], d, kd + h * d);
            narrow_e4m3(v + t * row + h * d, pages.v_scale[h], d, vd + h * d);
        }
    }
}

AttentionItem locate_item(const AttentionMeta& meta, std::int64_t item, std::int64_t heads,
                          std::int64_t kv_heads, std::int64_t head_dim, std::int64_t block_size) {
    const std::int64_t t = item / heads, h = item % heads;
    // The sequence whose query range holds token t.
    const std::int32_t* it = std::upper_bound(meta.qo_indptr, meta.qo_indptr + meta.num_seqs + 1,
                                              static_cast<std::int32_t>(t));
    const std::int64_t s = (it - meta.qo_indptr) - 1;
    const std::int64_t q_len = meta.qo_indptr[s + 1] - meta.qo_indptr[s];
    const std::int64_t num_pages = meta.indptr[s + 1] - meta.indptr[s];
    const std::int64_t kv_len = (num_pages - 1) * block_size + meta.last_page_len[s];
    IS_CHECK(num_pages > 0 && kv_len >= q_len) << "seq " << s << " kv " << kv_len;
    AttentionItem a;
    a.row = t;
    a.head = h;
    a.page_ids = meta.indices + meta.indptr[s];
    a.q_len = q_len;
    // Causal: this query is KV index kv_len - q_len + (t - start) and sees up to itself.
    a.visible = kv_len - q_len + (t - meta.qo_indptr[s]) + 1;
    a.first = meta.window > 0 ? std::max<std::int64_t>(0, a.visible - meta.window) : 0;
    a.kv_offset = (h / (heads / kv_heads)) * head_dim;
    return a;
}

void paged_attention(const float* q, std::int64_t n, std::int64_t heads, const PagedKvView& pages,
                     const AttentionMeta& meta, float* out) {
    const std::int64_t d = pages.head_dim, bs = pages.block_size, kvh = pages.kv_heads;
    IS_CHECK(d <= kMaxHeadDim && bs <= kMaxBlockSize) << "head_dim " << d << " block " << bs;
    IS_CHECK(heads % kvh == 0) << heads << " heads, " << kvh << " kv heads";
    IS_CHECK_EQ(meta.qo_indptr[meta.num_seqs], n);
    const std::int64_t token_stride = kvh * d;  // one token's row inside a page
    const std::int64_t items = n * heads;

#pragma omp parallel for schedule(dynamic, 2)
    for (std::int64_t item = 0; item < items; ++item) {
        const AttentionItem a = locate_item(meta, item, heads, kvh, d, bs);
        const std::int64_t visible = a.visible;
        const std::int32_t* page_ids = a.page_ids;
        const float* qv = q + item * d;
        const std::int64_t kv_off = a.kv_offset;

        const std::int64_t kv_head = kv_off / d;
        float acc[kMaxHeadDim];
        float row_buf[kMaxHeadDim];
        float scores[kMaxBlockSize];
        std::fill(acc, acc + d, 0.0f);
        float running_max = -std::numeric_limits<float>::infinity();
        float denom = 0.0f;
        for (std::int64_t p = a.first / bs; p * bs < visible; ++p) {
            const std::int64_t block = page_ids[p];
            IS_CHECK(block >= 0 && block < pages.num_blocks) << "block " << block;
            const std::int64_t skip = std::max<std::int64_t>(0, a.first - p * bs);
            const std::int64_t count = std::min(bs, visible - p * bs) - skip;
            const std::int64_t base = (block * bs + skip) * token_stride + kv_off;
            float page_max = -std::numeric_limits<float>::infinity();
            for (std::int64_t j = 0; j < count; ++j) {
                const float* kr =
                    head_row(pages.k, pages.k_scale, base + j * token_stride, kv_head, d, row_buf);
                scores[j] = dot(qv, kr, d) * meta.scale;
                page_max = std::max(page_max, scores[j]);
            }
            const float new_max = std::max(running_max, page_max);
            const float correction = std::exp(running_max - new_max);
            denom *= correction;
            for (std::int64_t i = 0; i < d; ++i) acc[i] *= correction;
            for (std::int64_t j = 0; j < count; ++j) {
                const float w = std::exp(scores[j] - new_max);
                denom += w;
                const float* vr =
                    head_row(pages.v, pages.v_scale, base + j * token_stride, kv_head, d, row_buf);
#pragma omp simd
                for (std::int64_t i = 0; i < d; ++i) acc[i] += w * vr[i];
            }
            running_max = new_max;
        }
        float* o = out + item * d;
        const float inv = 1.0f / denom;
        for (std::int64_t i = 0; i < d; ++i) o[i] = acc[i] * inv;
    }
}

}  // namespace inferscale::backends::cpu
