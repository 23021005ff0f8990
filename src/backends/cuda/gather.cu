// Row gathers: the token embedding lookup (with a dtype conversion), gather_rows (a raw byte
// copy of whole rows, used for the logit rows and for capturing K/V rows) and split_columns
// (a stacked linear's output row cut into its targets' rows). One block per row; rows are short
// enough (a few K elements) that one block streams a row at full width.

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kThreads = 256;

template <class TIn, class TOut>
__global__ void embedding_kernel(const TIn* table, std::int64_t vocab, std::int64_t hidden,
                                 const std::int32_t* ids, TOut* out) {
    allow_next_launch();
    wait_for_inputs();
    const std::int64_t row = blockIdx.x;
    const std::int32_t id = ids[row];
    if (id < 0 || id >= vocab) __trap();  // out-of-range token id: a bug upstream
    const TIn* src = table + id * hidden;
    TOut* dst = out + row * hidden;
    for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x)
        dst[i] = from_f32<TOut>(to_f32(src[i]));
}

// Word is the widest unit that divides the row and both base pointers' alignment.
template <class Word>
__global__ void gather_rows_kernel(const Word* x, std::int64_t n, std::int64_t row_words,
                                   const std::int32_t* rows, Word* out) {
    allow_next_launch();
    wait_for_inputs();
    const std::int64_t i = blockIdx.x;
    const std::int32_t r = rows[i];
    if (r < 0 || r >= n) __trap();  // row outside x: a bug upstream
    const Word* src = x + r * row_words;
    Word* dst = out + i * row_words;
    for (std::int64_t j = threadIdx.x; j < row_words; j += blockDim.x) dst[j] = src[j];
}

__global__ void split_columns_kernel(const uint4* x, std::int64_t row_words, ColumnParts parts) {
    allow_next_launch();
    wait_for_inputs();
    const std::int64_t row = blockIdx.x;
    const uint4* src = x + row * row_words;
    for (int j = 0; j < parts.count; ++j) {
        const std::int64_t words = parts.bytes[j] / 16;
        uint4* dst = static_cast<uint4*>(parts.dst[j]) + row * words;
        for (std::int64_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
        src += words;
    }
}

template <class TIn>
void embedding_from(const TIn* table, std::int64_t vocab, std::int64_t hidden,
                    const std::int32_t* ids, std::int64_t n, void* out, DType out_dtype,
                    cudaStream_t stream) {
    const auto grid = static_cast<unsigned>(n);
    if (out_dtype == DType::BF16) {
        launch_dependent(embedding_kernel<TIn, bf16>, grid, kThreads, 0, stream, table, vocab,
                         hidden, ids, static_cast<bf16*>(out));
    } else {
        IS_CHECK(out_dtype == DType::F32) << "embedding out " << tensor::dtype_name(out_dtype);
        launch_dependent(embedding_kernel<TIn, float>, grid, kThreads, 0, stream, table, vocab,
                         hidden, ids, static_cast<float*>(out));
    }
}

bool aligned_to(const void* p, std::uintptr_t bytes) {
    return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

}  // namespace

void launch_embedding(const void* table, DType table_dtype, std::int64_t vocab,
                      std::int64_t hidden, const std::int32_t* ids, std::int64_t n, void* out,
                      DType out_dtype, cudaStream_t stream) {
    if (n == 0) return;
    IS_CHECK(n <= 0x7fffffff) << "embedding rows " << n;
    if (table_dtype == DType::BF16) {
        embedding_from(static_cast<const bf16*>(table), vocab, hidden, ids, n, out, out_dtype,
                       stream);
    } else {
        IS_CHECK(table_dtype == DType::F32)
            << "embedding table " << tensor::dtype_name(table_dtype);
        embedding_from(static_cast<const float*>(table), vocab, hidden, ids, n, out, out_dtype,
                       stream);
    }
}

void launch_gather_rows(const void* x, std::int64_t n, std::int64_t row_bytes,
                        const std::int32_t* rows, std::int64_t m, void* out, cudaStream_t stream) {
    if (m == 0 || row_bytes == 0) return;
    IS_CHECK(m <= 0x7fffffff) << "gather rows " << m;
    const auto grid = static_cast<unsigned>(m);
    const auto fits = [&](std::int64_t w) {
        return row_bytes % w == 0 && aligned_to(x, w) && aligned_to(out, w);
    };
    if (fits(16)) {
        launch_dependent(gather_rows_kernel<uint4>, grid, kThreads, 0, stream,
                         static_cast<const uint4*>(x), n, row_bytes / 16, rows,
                         static_cast<uint4*>(out));
    } else if (fits(4)) {
        launch_dependent(gather_rows_kernel<std::uint32_t>, grid, kThreads, 0, stream,
                         static_cast<const std::uint32_t*>(x), n, row_bytes / 4, rows,
                         static_cast<std::uint32_t*>(out));
    } else {
        IS_CHECK(fits(2)) << "gather rows of " << row_bytes << " bytes";
        launch_dependent(gather_rows_kernel<std::uint16_t>, grid, kThreads, 0, stream,
                         static_cast<const std::uint16_t*>(x), n, row_bytes / 2, rows,
                         static_cast<std::uint16_t*>(out));
    }
    IS_CUDA_CHECK_LAUNCH();
}

void launch_split_columns(const void* x, std::int64_t n, const ColumnParts& parts,
                          cudaStream_t stream) {
    if (n == 0) return;
    IS_CHECK(n <= 0x7fffffff && parts.count >= 1 && parts.count <= kMaxColumnParts)
        << "split columns: " << n << " rows, " << parts.count << " parts";
    std::int64_t row_bytes = 0;
    for (int j = 0; j < parts.count; ++j) {
        IS_CHECK(parts.bytes[j] % 16 == 0 && aligned_to(parts.dst[j], 16))
            << "split columns part " << j << " of " << parts.bytes[j] << " bytes";
        row_bytes += parts.bytes[j];
    }
    IS_CHECK(aligned_to(x, 16)) << "split columns source";
    launch_dependent(split_columns_kernel, static_cast<unsigned>(n), kThreads, 0, stream,
                     static_cast<const uint4*>(x), row_bytes / 16, parts);
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace inferscale::backends::cuda
