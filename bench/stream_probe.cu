// How fast the weight-streaming patterns of the linear kernels can read a weight matrix from
// HBM, with no math: a ring of shared-memory stages per CTA (a producer warp fills, a consumer
// warp frees), one CTA per (128-row tile, k range), filled either by bulk copies of R rows x P
// contiguous bytes or by TMA boxes of the 128-byte swizzle (BR rows x 64 k, KB boxes of
// adjacent k a stage) under each L2 promotion; and a persistent CTA an SM streaming 64-row units
// of a k range (groups of 1-8 CTAs splitting k). Printed next to a plain vectorised read and
// cudaMemcpy, all in the same run. The shapes are Llama-3.1-8B's o, down and gate.
//
//   stream_probe            (no arguments; about a second on an H200)

#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstdio>
#include <vector>

#include "backends/cuda/tma.cuh"

namespace {

using namespace inferscale::backends::cuda;

constexpr int kRingBytes = 160 * 1024;
constexpr int kSmemBytes = kRingBytes + 1024 + 1024;  // ring, its alignment, barriers
constexpr int kTileRows = 128;
constexpr int kCopies = 4;  // matrices launches rotate over, so L2 never holds the next one

struct Ring {
    unsigned base, full, empty;
    int stages;
};

__device__ Ring init_ring(unsigned char* smem, int stage_bytes) {
    Ring r;
    r.base = (static_cast<unsigned>(__cvta_generic_to_shared(smem)) + 1023) & ~1023u;
    r.stages = kRingBytes / stage_bytes;
    r.full = r.base + kRingBytes;
    r.empty = r.full + 8 * r.stages;
    if (threadIdx.x == 0) {
        for (int s = 0; s < r.stages; ++s) {
            tma::barrier_init(r.full + 8 * s, 1);
            tma::barrier_init(r.empty + 8 * s, 1);
        }
        tma::fence_barrier_init();
    }
    __syncthreads();
    return r;
}

// Warp 1: waits for each stage and frees it.
__device__ void consume(const Ring& r, int iters) {
    for (int g = 0; g < iters; ++g) {
        const int slot = g % r.stages;
        tma::wait(r.full + 8 * slot, (g / r.stages) & 1);
        __syncwarp();
        if ((threadIdx.x & 31) == 0) tma::arrive(r.empty + 8 * slot);
    }
}

// Stage g: rows (g % groups) * R .. + R of the tile, bytes (g / groups) * P .. + P of the range.
template <int R, int P>
__global__ void __launch_bounds__(64, 1)
    bulk_kernel(const char* w, long row_bytes, int splits, int range_bytes) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const Ring r = init_ring(smem, R * P);
    constexpr int kGroups = kTileRows / R;
    const int iters = range_bytes / P * kGroups;
    if (threadIdx.x >= 32) return consume(r, iters);
    const int tile = blockIdx.x / splits, split = blockIdx.x % splits, lane = threadIdx.x;
    const char* base = w + static_cast<long>(tile) * kTileRows * row_bytes +
                       static_cast<long>(split) * range_bytes;
    for (int g = 0; g < iters; ++g) {
        const int slot = g % r.stages;
        if (g >= r.stages) tma::wait(r.empty + 8 * slot, (g / r.stages - 1) & 1);
        if (lane == 0) tma::arrive_expect(r.full + 8 * slot, R * P);
        __syncwarp();
        for (int row = lane; row < R; row += 32) {
            const char* src = base + static_cast<long>((g % kGroups) * R + row) * row_bytes +
                              static_cast<long>(g / kGroups) * P;
            tma::load_1d(r.base + slot * R * P + row * P, src, P, r.full + 8 * slot);
        }
    }
}

// Stage g: KB boxes of BR rows x 64 k at adjacent k, rows (g % groups) * BR of the tile.
template <int BR, int KB>
__global__ void __launch_bounds__(64, 1)
    tma_kernel(const __grid_constant__ CUtensorMap map, int splits, int range_kblocks) {
    extern __shared__ __align__(1024) unsigned char smem[];
    constexpr int kBoxBytes = BR * 128;
    const Ring r = init_ring(smem, kBoxBytes * KB);
    constexpr int kGroups = kTileRows / BR;
    const int iters = range_kblocks / KB * kGroups;
    if (threadIdx.x >= 32) return consume(r, iters);
    if (threadIdx.x != 0) return;
    const int tile = blockIdx.x / splits, split = blockIdx.x % splits;
    for (int g = 0; g < iters; ++g) {
        const int slot = g % r.stages;
        if (g >= r.stages) tma::wait(r.empty + 8 * slot, (g / r.stages - 1) & 1);
        tma::arrive_expect(r.full + 8 * slot, kBoxBytes * KB);
        const int kb = split * range_kblocks + (g / kGroups) * KB;
        const int row = tile * kTileRows + (g % kGroups) * BR;
        for (int j = 0; j < KB; ++j) {
            tma::load_2d(r.base + slot * kBoxBytes * KB + j * kBoxBytes, &map, (kb + j) * 64, row,
                         r.full + 8 * slot);
        }
    }
}

// A persistent CTA an SM: the CTAs form groups of `splits`, rank r of a group reads the r-th
// k range of every 64-row unit its group owns (units dealt out evenly over the groups), one box
// of 64 rows x 64 k a stage. The x-resident linear's weight stream without its math.
__global__ void __launch_bounds__(64, 1)
    units_kernel(const __grid_constant__ CUtensorMap map, int splits, int groups, int units,
                 int kblocks) {
    extern __shared__ __align__(1024) unsigned char smem[];
    constexpr int kBoxBytes = 64 * 128;
    const Ring r = init_ring(smem, kBoxBytes);
    const int group = blockIdx.x / splits, rank = blockIdx.x % splits;
    const int u_begin = units * group / groups, u_end = units * (group + 1) / groups;
    const int kb0 = kblocks * rank / splits, nkb = kblocks * (rank + 1) / splits - kb0;
    const int iters = (u_end - u_begin) * nkb;
    if (threadIdx.x >= 32) return consume(r, iters);
    if (threadIdx.x != 0) return;
    for (int g = 0; g < iters; ++g) {
        const int slot = g % r.stages;
        if (g >= r.stages) tma::wait(r.empty + 8 * slot, (g / r.stages - 1) & 1);
        tma::arrive_expect(r.full + 8 * slot, kBoxBytes);
        tma::load_2d(r.base + slot * kBoxBytes, &map, (kb0 + g % nkb) * 64,
                     (u_begin + g / nkb) * 64, r.full + 8 * slot);
    }
}

// Every thread reads 16-byte words grid-stride; the xor keeps the loads alive.
__global__ void read_kernel(const uint4* p, long n, unsigned* sink) {
    unsigned acc = 0;
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long>(gridDim.x) * blockDim.x) {
        const uint4 v = p[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) *sink = acc;
}

bool check(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    std::fprintf(stderr, "stream_probe: %s: %s\n", what, cudaGetErrorString(e));
    return false;
}

// TB/s of `bytes` a launch, over 40 timed launches after 8 untimed ones.
template <class Launch>
double rate(Launch&& launch, double bytes) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < 8; ++i) launch(i % kCopies);
    constexpr int kTimed = 40;
    cudaEventRecord(a);
    for (int i = 0; i < kTimed; ++i) launch(i % kCopies);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    if (!check(cudaGetLastError(), "launch")) return 0.0;
    return bytes / (ms / kTimed * 1e-3) / 1e12;
}

// The driver's tensor-map encoder, looked up once.
PFN_cuTensorMapEncodeTiled_v12000 encoder() {
    static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found{};
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found);
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }();
    return encode;
}

struct Shape {
    const char* name;
    int rows, in, splits;
};

struct Matrices {
    std::vector<char*> w;
    long row_bytes, bytes;
};

void probe_bulk(const Shape& s, const Matrices& m, unsigned* sink) {
    const int ctas = s.rows / kTileRows * s.splits, range = s.in * 2 / s.splits;
    std::printf("  plain read kernel          %.3f TB/s\n",
                rate([&](int c) {
                    read_kernel<<<132 * 4, 512>>>(reinterpret_cast<const uint4*>(m.w[c]),
                                                  m.bytes / 16, sink);
                }, m.bytes));
    auto bulk = [&](auto kernel, int rows, int piece) {
        if (range % piece != 0) return;
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        std::printf("  bulk %3d rows x %4d B      %.3f TB/s\n", rows, piece, rate([&](int c) {
            kernel<<<ctas, 64, kSmemBytes>>>(m.w[c], m.row_bytes, s.splits, range);
        }, m.bytes));
    };
    bulk(bulk_kernel<128, 128>, 128, 128);
    bulk(bulk_kernel<32, 512>, 32, 512);
    bulk(bulk_kernel<16, 1024>, 16, 1024);
    bulk(bulk_kernel<8, 2048>, 8, 2048);
    bulk(bulk_kernel<4, 4096>, 4, 4096);
}

// One tensor map per copy of the matrix, in boxes of box_rows x 64 k, 128-byte swizzle.
std::vector<CUtensorMap> box_maps(const Shape& s, const Matrices& m, int box_rows,
                                  CUtensorMapL2promotion promotion) {
    std::vector<CUtensorMap> maps(kCopies);
    for (int c = 0; c < kCopies; ++c) {
        const cuuint64_t dims[2] = {static_cast<cuuint64_t>(s.in),
                                    static_cast<cuuint64_t>(s.rows)};
        const cuuint64_t strides[1] = {static_cast<cuuint64_t>(m.row_bytes)};
        const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
        const cuuint32_t element_strides[2] = {1, 1};
        encoder()(&maps[c], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, m.w[c], dims, strides, box,
                  element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    }
    return maps;
}

void probe_tma(const Shape& s, const Matrices& m) {
    const int ctas = s.rows / kTileRows * s.splits, range_kblocks = s.in / 64 / s.splits;
    const struct {
        CUtensorMapL2promotion value;
        const char* name;
    } promotions[] = {{CU_TENSOR_MAP_L2_PROMOTION_NONE, "none"},
                      {CU_TENSOR_MAP_L2_PROMOTION_L2_128B, "128B"},
                      {CU_TENSOR_MAP_L2_PROMOTION_L2_256B, "256B"}};
    for (const auto& promotion : promotions) {
        auto tma = [&](auto kernel, int box_rows, int boxes) {
            if (range_kblocks % boxes != 0) return;
            const std::vector<CUtensorMap> maps = box_maps(s, m, box_rows, promotion.value);
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 kSmemBytes);
            std::printf("  tma %3d rows x %d boxes, L2 promotion %-4s  %.3f TB/s\n", box_rows,
                        boxes, promotion.name, rate([&](int c) {
                kernel<<<ctas, 64, kSmemBytes>>>(maps[c], s.splits, range_kblocks);
            }, m.bytes));
        };
        tma(tma_kernel<128, 1>, 128, 1);
        tma(tma_kernel<128, 2>, 128, 2);
        tma(tma_kernel<64, 4>, 64, 4);
        tma(tma_kernel<32, 8>, 32, 8);
    }
}

// units_kernel at 1, 2, 4 and 8 CTAs a group (the grid one CTA an SM).
void probe_units(const Shape& s, const Matrices& m, int sms) {
    const std::vector<CUtensorMap> maps = box_maps(s, m, 64, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
    cudaFuncSetAttribute(units_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    for (int splits : {1, 2, 4, 8}) {
        const int groups = sms / splits;
        std::printf("  persistent 64-row units, %d CTAs a group x %d groups  %.3f TB/s\n", splits,
                    groups, rate([&](int c) {
            units_kernel<<<groups * splits, 64, kSmemBytes>>>(maps[c], splits, groups,
                                                               s.rows / 64, s.in / 64);
        }, m.bytes));
    }
}

}  // namespace

int main() {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    unsigned* sink = nullptr;
    if (!check(cudaMalloc(&sink, sizeof(unsigned)), "cudaMalloc")) return 1;
    const Shape shapes[] = {{"o [4096 x 4096], 4 k splits", 4096, 4096, 4},
                            {"down [4096 x 14336], 4 k splits", 4096, 14336, 4},
                            {"gate [14336 x 4096], 1 k split", 14336, 4096, 1},
                            {"gate [14336 x 4096], 2 k splits", 14336, 4096, 2}};
    for (const Shape& s : shapes) {
        Matrices m{std::vector<char*>(kCopies), s.in * 2L, s.rows * s.in * 2L};
        for (char*& w : m.w) {
            if (!check(cudaMalloc(&w, m.bytes), "cudaMalloc")) return 1;
            cudaMemset(w, 1, m.bytes);
        }
        std::printf("== %s: %.1f MB, %d CTAs, %ld B of each row a CTA\n", s.name, m.bytes / 1e6,
                    s.rows / kTileRows * s.splits, m.row_bytes / s.splits);
        probe_bulk(s, m, sink);
        probe_tma(s, m);
        probe_units(s, m, sms);
        for (char* w : m.w) cudaFree(w);
    }
    constexpr long kCopyBytes = 1L << 30;
    char *a = nullptr, *b = nullptr;
    if (!check(cudaMalloc(&a, kCopyBytes), "cudaMalloc") ||
        !check(cudaMalloc(&b, kCopyBytes), "cudaMalloc")) {
        return 1;
    }
    std::printf("cudaMemcpy device to device, 1 GiB: %.3f TB/s (read + write)\n",
                2 * rate([&](int) {
                    cudaMemcpyAsync(b, a, kCopyBytes, cudaMemcpyDeviceToDevice);
                }, kCopyBytes));
    return 0;
}
