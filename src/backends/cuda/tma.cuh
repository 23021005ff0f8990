#pragma once
// Hopper tensor-memory-accelerator copies and the shared-memory barriers that track them. One
// thread asks the TMA unit for a contiguous run of bytes (cp.async.bulk) or a whole 2D box of a
// tensor (cp.async.bulk.tensor) and the bytes' arrival completes a transaction count on an
// mbarrier that consumers wait on, so filling a ring stage costs one instruction instead of a
// copy per thread.

#include <cuda.h>

#include <cstdint>

namespace inferscale::backends::cuda::tma {

__device__ __forceinline__ void barrier_init(unsigned bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals)
                 : "memory");
}
// Makes barrier_init visible to the async proxy (the TMA unit) and the cluster.
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival that also expects `bytes` of transactions before the phase completes.
__device__ __forceinline__ void arrive_expect(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Returns once the barrier's phase with this parity has completed.
__device__ __forceinline__ void wait(unsigned bar, unsigned parity) {
    unsigned done = 0;
    do {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (done == 0);
}

// `bytes` (a multiple of 16) from global `src` into shared memory at `dst`, both 16-byte
// aligned; the bytes count against `bar`.
__device__ __forceinline__ void load_1d(unsigned dst, const void* src, unsigned bytes,
                                        unsigned bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
        ::"r"(dst), "l"(reinterpret_cast<std::uint64_t>(src)), "r"(bytes), "r"(bar)
        : "memory");
}

// The box of `map` at element coordinates (inner, outer) into shared memory at `dst`; its
// bytes count against `bar`. Out-of-range elements arrive as zeros.
__device__ __forceinline__ void load_2d(unsigned dst, const CUtensorMap* map, int inner,
                                        int outer, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
        "[%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
        "l"(reinterpret_cast<std::uint64_t>(map)), "r"(inner), "r"(outer), "r"(bar)
        : "memory");
}

}  // namespace inferscale::backends::cuda::tma
