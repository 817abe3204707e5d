/* What the families' workers share to prepare and check a candidate: how many input sets keep
 * the working set beyond L2, inputs from a hash, and a comparison with an fp32 reference that
 * counts the misses and keeps the first. */
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

namespace ktune_worker_check {

/* Input sets a family rotates through so that one round of them is at least 3x the L2, each
 * set_bytes big: at least 1, at most max_sets. */
inline int rotating_sets(int64_t set_bytes, int64_t l2_bytes, int max_sets)
{
    const int64_t want = (3 * l2_bytes + set_bytes - 1) / set_bytes;
    return (int)(want < 1 ? 1 : want > max_sets ? max_sets : want);
}

/* Buffers cut from one block of device memory (ktune_worker_arena's), each 256-byte aligned as
 * cudaMalloc's are. */
struct carver {
    char *at;
    static size_t round(size_t bytes) { return (bytes + 255) / 256 * 256; }
    void *take(size_t bytes)
    {
        void *p = at;
        at += round(bytes);
        return p;
    }
};

__device__ __forceinline__ uint32_t hash(uint64_t v)
{
    v ^= v >> 33;
    v *= 0xff51afd7ed558ccdULL;
    v ^= v >> 33;
    v *= 0xc4ceb9fe1a85ec53ULL;
    v ^= v >> 33;
    return (uint32_t)v;
}

/* bad[0] += the elements with |y - ref| > atol + rtol * |ref| (NaN included); bad[1] = the
 * first of them. */
template <typename T>
__global__ void compare(const T *y, const float *ref, int64_t n, float atol, float rtol,
                        unsigned long long *bad)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float got = static_cast<float>(y[i]), want = ref[i];
        if (!(fabsf(got - want) <= atol + rtol * fabsf(want))) {
            atomicAdd(&bad[0], 1ULL);
            atomicMin(&bad[1], (unsigned long long)i);
        }
    }
}

} // namespace ktune_worker_check
