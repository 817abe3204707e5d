/* What the families' workers share to prepare and check a candidate: how many input sets keep
 * the working set beyond L2, buffers carved from the arena, inputs filled from a hash, and a
 * comparison with an fp32 reference that counts the misses and keeps the first. */
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "convert.cuh"

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

/* Fills `count` elements of each input set (blockIdx.y; sets `stride` elements apart from x)
 * uniformly in [lo, hi) from a hash of the set's seed, seed + seed_step * set: the same inputs on
 * every run and machine. */
template <typename T>
__global__ void fill_uniform(T *x, int64_t count, int64_t stride, uint64_t seed,
                             uint64_t seed_step, float lo, float hi)
{
    T *xs = x + blockIdx.y * stride;
    const uint64_t set_seed = seed + seed_step * blockIdx.y;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x)
        xs[i] = ktune_common::from_float<T>(
            lo + (hi - lo) * (hash(set_seed * 0x9e3779b97f4a7c15ULL + i) / 4294967296.0f));
}

/* Enqueues fill_uniform over `sets` sets, about 1024 blocks in all, in the default stream. */
template <typename T>
void fill_sets(T *x, int64_t count, int64_t stride, int sets, uint64_t seed, uint64_t seed_step,
               float lo, float hi)
{
    const dim3 grid(1024 / sets > 1 ? 1024 / sets : 1, sets);
    fill_uniform<T><<<grid, 256>>>(x, count, stride, seed, seed_step, lo, hi);
}

/* Counts y[i] in bad[0] when |y[i] - want| > atol + rtol * |want| and as far from alt (NaN
 * included), and keeps the first such i in bad[1]. */
template <typename T>
__device__ __forceinline__ void compare_one(T y, float want, float alt, int64_t i, float atol,
                                            float rtol, unsigned long long *bad)
{
    const float got = static_cast<float>(y);
    if (!(fabsf(got - want) <= atol + rtol * fabsf(want)) &&
        !(fabsf(got - alt) <= atol + rtol * fabsf(alt))) {
        atomicAdd(&bad[0], 1ULL);
        atomicMin(&bad[1], (unsigned long long)i);
    }
}

/* Elements a thread of compare reads at once. */
constexpr int compare_vector = 8;

/* bad[0] += the elements with |y - ref| > atol + rtol * |ref| (NaN included), and as far from
 * alt where alt is not null (a second answer as right as ref); bad[1] = the first of them. y, ref
 * and alt 32-byte aligned (cudaMalloc's and the carver's are): a thread reads 8 elements of each
 * at once, in 16- or 32-byte loads (one element a load took 55 us against 45 for 2^24 bf16
 * elements, 174 against 141 for 2^26, on an H100, where a copy of as many bytes takes 38 and
 * 136). */
template <typename T>
__global__ void compare(const T *y, const float *ref, const float *alt, int64_t n, float atol,
                        float rtol, unsigned long long *bad)
{
    constexpr int v = compare_vector;
    struct alignas(v * sizeof(T)) outs {
        T e[v];
    };
    struct alignas(32) refs {
        float e[v];
    };
    const int64_t stride = (int64_t)gridDim.x * blockDim.x, chunks = n / v;
    const int64_t first = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    for (int64_t c = first; c < chunks; c += stride) {
        const outs got = reinterpret_cast<const outs *>(y)[c];
        const refs want = reinterpret_cast<const refs *>(ref)[c];
        const refs other = alt ? reinterpret_cast<const refs *>(alt)[c] : want;
#pragma unroll
        for (int j = 0; j < v; j++)
            compare_one(got.e[j], want.e[j], other.e[j], c * v + j, atol, rtol, bad);
    }
    for (int64_t i = chunks * v + first; i < n; i += stride)
        compare_one(y[i], ref[i], alt ? alt[i] : ref[i], i, atol, rtol, bad);
}

/* Enqueues compare with as many blocks of 256 threads as its elements need, 1024 at most: a check
 * of a small output then costs little beside its launch. */
template <typename T>
cudaError_t compare_launch(const T *y, const float *ref, int64_t n, float atol, float rtol,
                           unsigned long long *bad, cudaStream_t stream, const float *alt = nullptr)
{
    const int64_t per_block = compare_vector * 256, want = (n + per_block - 1) / per_block;
    const unsigned blocks = (unsigned)(want < 1 ? 1 : want > 1024 ? 1024 : want);
    compare<T><<<blocks, 256, 0, stream>>>(y, ref, alt, n, atol, rtol, bad);
    return cudaGetLastError();
}

} // namespace ktune_worker_check
