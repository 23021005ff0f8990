// The encoder ops (BERT-style sentence encoders): LayerNorm with bias, exact GELU, and
// bidirectional attention over packed sequences. Inputs and outputs in the activation dtype
// (bf16 or f32), all arithmetic in f32 with one rounding per output. The encoder runs short
// sequences (sentences: tens of tokens, at most a few hundred) of a small model, so these are
// plain kernels: one block per row for the norm, one block per (query row, head) for attention
// with the row's scores in shared memory.

#include <cmath>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kNormThreads = 128;
constexpr int kGeluThreads = 256;
constexpr int kAttentionThreads = 128;

__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int num_warps = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float m = -INFINITY;
    for (int w = 0; w < num_warps; ++w) m = fmaxf(m, scratch[w]);
    return m;
}

// Each thread writes only the elements it read, so out may alias x.
template <class T, class W>
__global__ void layer_norm_kernel(const T* x, const W* weight, const W* bias, float eps,
                                  std::int64_t hidden, T* out) {
    __shared__ float scratch[32];
    allow_next_launch();
    wait_for_inputs();
    const T* row = x + blockIdx.x * hidden;
    T* dst = out + blockIdx.x * hidden;
    float sum = 0.0f;
    for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) sum += to_f32(row[i]);
    const float mean = block_sum(sum, scratch) / static_cast<float>(hidden);
    float var = 0.0f;
    for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
        const float d = to_f32(row[i]) - mean;
        var += d * d;
    }
    const float inv = rsqrtf(block_sum(var, scratch) / static_cast<float>(hidden) + eps);
    for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
        dst[i] = from_f32<T>((to_f32(row[i]) - mean) * inv * to_f32(weight[i]) + to_f32(bias[i]));
    }
}

template <class T>
__global__ void gelu_kernel(T* x, std::int64_t count) {
    allow_next_launch();
    wait_for_inputs();
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < count; i += stride) {
        const float v = to_f32(x[i]);
        x[i] = from_f32<T>(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
    }
}

// Block (t, h): query row t, head h, against every row of t's sequence. Shared memory: the
// query row [d], the scores [max_len], per-group partial outputs [groups, d].
template <class T>
__global__ void sequence_attention_kernel(const T* q, const T* k, const T* v,
                                          const std::int32_t* seq_indptr, int num_seqs, int heads,
                                          int head_dim, int max_len, float scale, T* out) {
    extern __shared__ float smem[];
    __shared__ float scratch[32];
    allow_next_launch();
    wait_for_inputs();
    const int t = blockIdx.x, h = blockIdx.y;
    // The sequence holding row t: the last s with seq_indptr[s] <= t.
    int lo = 0, hi = num_seqs - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (seq_indptr[mid] <= t) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    const int begin = seq_indptr[lo], len = seq_indptr[lo + 1] - begin;
    if (len > max_len || t < begin || t >= begin + len) __trap();
    const std::int64_t row = static_cast<std::int64_t>(heads) * head_dim;
    float* qs = smem;                   // [head_dim]
    float* scores = smem + head_dim;    // [max_len]
    float* partial = scores + max_len;  // [groups, head_dim]
    for (int e = threadIdx.x; e < head_dim; e += blockDim.x)
        qs[e] = to_f32(q[t * row + h * head_dim + e]);
    __syncthreads();
    float local_max = -INFINITY;
    for (int j = threadIdx.x; j < len; j += blockDim.x) {
        const T* kj = k + (begin + j) * row + h * head_dim;
        float dot = 0.0f;
        for (int e = 0; e < head_dim; ++e) dot += qs[e] * to_f32(kj[e]);
        scores[j] = dot * scale;
        local_max = fmaxf(local_max, scores[j]);
    }
    const float m = block_max(local_max, scratch);
    float local_sum = 0.0f;
    for (int j = threadIdx.x; j < len; j += blockDim.x) {
        scores[j] = expf(scores[j] - m);
        local_sum += scores[j];
    }
    const float inv_total = 1.0f / block_sum(local_sum, scratch);  // its barriers publish scores
    const int groups = blockDim.x / head_dim;
    const int g = threadIdx.x / head_dim, e = threadIdx.x % head_dim;
    if (g < groups) {
        float acc = 0.0f;
        for (int j = g; j < len; j += groups)
            acc += scores[j] * to_f32(v[(begin + j) * row + h * head_dim + e]);
        partial[g * head_dim + e] = acc;
    }
    __syncthreads();
    if (threadIdx.x < head_dim) {
        float acc = 0.0f;
        for (int p = 0; p < groups; ++p) acc += partial[p * head_dim + threadIdx.x];
        out[t * row + h * head_dim + threadIdx.x] = from_f32<T>(acc * inv_total);
    }
}

template <class T>
void layer_norm_typed(const T* x, const void* weight, const void* bias, DType weight_dtype,
                      float eps, std::int64_t n, std::int64_t hidden, T* out, cudaStream_t stream) {
    const auto grid = static_cast<unsigned>(n);
    if (weight_dtype == DType::BF16) {
        launch_dependent(layer_norm_kernel<T, bf16>, grid, kNormThreads, 0, stream, x,
                         static_cast<const bf16*>(weight), static_cast<const bf16*>(bias), eps,
                         hidden, out);
    } else {
        IS_CHECK(weight_dtype == DType::F32)
            << "layer_norm weight " << tensor::dtype_name(weight_dtype);
        launch_dependent(layer_norm_kernel<T, float>, grid, kNormThreads, 0, stream, x,
                         static_cast<const float*>(weight), static_cast<const float*>(bias), eps,
                         hidden, out);
    }
}

}  // namespace

void launch_layer_norm(const void* x, DType dtype, const void* weight, const void* bias,
                       DType weight_dtype, float eps, std::int64_t n, std::int64_t hidden,
                       void* out, cudaStream_t stream) {
    if (n == 0) return;
    IS_CHECK(n <= 0x7fffffff) << "layer_norm rows " << n;
    if (dtype == DType::BF16) {
        layer_norm_typed(static_cast<const bf16*>(x), weight, bias, weight_dtype, eps, n, hidden,
                         static_cast<bf16*>(out), stream);
    } else {
        IS_CHECK(dtype == DType::F32) << "layer_norm dtype " << tensor::dtype_name(dtype);
        layer_norm_typed(static_cast<const float*>(x), weight, bias, weight_dtype, eps, n, hidden,
                         static_cast<float*>(out), stream);
    }
}

void launch_gelu(void* x, DType dtype, std::int64_t count, cudaStream_t stream) {
    if (count == 0) return;
    const unsigned grid = grid_for(count, kGeluThreads);
    if (dtype == DType::BF16) {
        launch_dependent(gelu_kernel<bf16>, grid, kGeluThreads, 0, stream, static_cast<bf16*>(x),
                         count);
    } else {
        IS_CHECK(dtype == DType::F32) << "gelu dtype " << tensor::dtype_name(dtype);
        launch_dependent(gelu_kernel<float>, grid, kGeluThreads, 0, stream, static_cast<float*>(x),
                         count);
    }
}

void launch_sequence_attention(const void* q, const void* k, const void* v, DType dtype,
                               std::int64_t n, int heads, int head_dim,
                               const std::int32_t* seq_indptr, int num_seqs, int max_seq_len,
                               float scale, void* out, cudaStream_t stream) {
    if (n == 0) return;
    IS_CHECK(head_dim > 0 && head_dim <= kAttentionThreads)
        << "sequence_attention head_dim " << head_dim;
    IS_CHECK(n <= 0x7fffffff && heads <= 65535 && num_seqs > 0) << "sequence_attention shape";
    const std::size_t smem =
        (static_cast<std::size_t>(head_dim) + max_seq_len + kAttentionThreads) * sizeof(float);
    IS_CHECK(smem <= 48 * 1024) << "sequence_attention: sequences of " << max_seq_len
                                << " rows exceed shared memory";
    const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(heads));
    if (dtype == DType::BF16) {
        launch_dependent(sequence_attention_kernel<bf16>, grid, kAttentionThreads, smem, stream,
                         static_cast<const bf16*>(q), static_cast<const bf16*>(k),
                         static_cast<const bf16*>(v), seq_indptr, num_seqs, heads, head_dim,
                         max_seq_len, scale, static_cast<bf16*>(out));
    } else {
        IS_CHECK(dtype == DType::F32) << "sequence_attention dtype " << tensor::dtype_name(dtype);
        launch_dependent(sequence_attention_kernel<float>, grid, kAttentionThreads, smem, stream,
                         static_cast<const float*>(q), static_cast<const float*>(k),
                         static_cast<const float*>(v), seq_indptr, num_seqs, heads, head_dim,
                         max_seq_len, scale, static_cast<float*>(out));
    }
}

}  // namespace inferscale::backends::cuda
