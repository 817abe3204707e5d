/* Asynchronous copies global -> shared (cp.async, sm_80 and later): 16 bytes a thread, whole or
 * with a zero-filled tail, committed in groups and waited for by group; and bulk copies by the copy
 * engine (sm_90), which complete transaction barriers. */
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

namespace ktune_common {

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared (a shared-memory address, smem_addr's), asynchronously. */
__device__ __forceinline__ void cp_async16(uint32_t smem, const void *gmem)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem) : "memory");
}

/* The same; bytes < 16 fills the rest with zeros. */
__device__ __forceinline__ void cp_async16(uint32_t smem, const void *gmem, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem),
                 "r"(bytes)
                 : "memory");
}

/* 4 or 8 bytes global -> shared (both aligned to BYTES), through L1; src_bytes 0 fills zeros. */
template <int BYTES>
__device__ __forceinline__ void cp_async_small(uint32_t smem, const void *gmem, int src_bytes)
{
    static_assert(BYTES == 4 || BYTES == 8, "cp.async.ca copies 4, 8 or 16 bytes");
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem), "l"(gmem),
                 "n"(BYTES), "r"(src_bytes)
                 : "memory");
}

/* The same three with the destination as a pointer to shared memory. */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
    cp_async16(smem_addr(smem), gmem);
}

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int bytes)
{
    cp_async16(smem_addr(smem), gmem, bytes);
}

template <int BYTES>
__device__ __forceinline__ void cp_async_small(void *smem, const void *gmem, int src_bytes)
{
    cp_async_small<BYTES>(smem_addr(smem), gmem, src_bytes);
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Waits until at most N of the committed groups are in flight. */
template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void cp_async_wait_all()
{
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/* Transaction barriers (mbarrier, sm_80 and later) in shared memory, which bulk copies complete. */
__device__ __forceinline__ void barrier_init(uint64_t *bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
                 : "memory");
}

/* Makes initialized barriers visible to the asynchronous (TMA) proxy. */
__device__ __forceinline__ void barrier_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/* One arrival, announcing `bytes` more that TMA will deliver to complete the phase. */
__device__ __forceinline__ void barrier_expect(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void barrier_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

/* Waits until the phase of the given parity has completed. A fresh barrier is in phase 0, so
 * waiting for parity 1 returns at once. */
__device__ __forceinline__ void barrier_wait(uint64_t *bar, int parity)
{
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(smem_addr(bar)), "r"(parity)
                     : "memory");
    } while (!done);
}

/* barrier_wait for a thread with nothing else to do meanwhile (a producer waiting for a free
 * stage): each try may suspend the thread until the phase completes (at most a millisecond), where
 * a plain try returns within a few cycles, so that the waiting does not take issue slots from the
 * warps that share its scheduler. */
__device__ __forceinline__ void barrier_wait_idle(uint64_t *bar, int parity)
{
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(smem_addr(bar)), "r"(parity), "r"(1000000)
                     : "memory");
    } while (!done);
}

/* Orders this thread's earlier accesses to shared memory before later ones of the asynchronous
 * proxy (TMA: its stores reading what the thread wrote, bulk copies writing the same bytes). */
__device__ __forceinline__ void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* bytes (a multiple of 16) global -> shared by the copy engine (sm_90), both 16-byte aligned; the
 * copy completes `bytes` of the transaction barrier's current phase. */
__device__ __forceinline__ void bulk_copy_to_shared(void *smem, const void *gmem, uint32_t bytes,
                                                    uint64_t *bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
                 "[%3];\n" ::"r"(smem_addr(smem)),
                 "l"(gmem), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}

} // namespace ktune_common
