/* Asynchronous copies global -> shared (cp.async, sm_80 and later): 16 bytes a thread, whole or
 * with a zero-filled tail, committed in groups and waited for by group. */
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

namespace ktune_common {

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, asynchronously. */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem)), "l"(gmem)
                 : "memory");
}

/* The same; bytes < 16 fills the rest with zeros. */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)),
                 "l"(gmem), "r"(bytes)
                 : "memory");
}

/* 4 or 8 bytes global -> shared (both aligned to BYTES), through L1; src_bytes 0 fills zeros. */
template <int BYTES> __device__ __forceinline__ void cp_async_small(void *smem, const void *gmem, int src_bytes)
{
    static_assert(BYTES == 4 || BYTES == 8, "cp.async.ca copies 4, 8 or 16 bytes");
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_addr(smem)),
                 "l"(gmem), "n"(BYTES), "r"(src_bytes)
                 : "memory");
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

} // namespace ktune_common
