/* Warp and block reductions, and the online (max, sum of exponentials) merge that softmax and
 * both attention families build on: a row's or a tile's partial (m, s), s = sum exp(x - m),
 * merged with another without a second pass. */
#pragma once

#include <cuda_runtime.h>
#include <math.h>

namespace ktune_common {

template <bool IS_MAX> __device__ __forceinline__ float combine(float a, float b)
{
    return IS_MAX ? fmaxf(a, b) : a + b;
}

template <bool IS_MAX> __device__ __forceinline__ float warp_reduce(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = combine<IS_MAX>(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Block-wide max or sum through 32 floats of shared memory; every warp reduces the warps'
 * partial results, so every thread gets the result. */
template <int THREADS, bool IS_MAX>
__device__ __forceinline__ float block_reduce(float v, float *smem)
{
    const float identity = IS_MAX ? -INFINITY : 0.f;
    const int lane = threadIdx.x & 31;
    v = warp_reduce<IS_MAX>(v);
    if (lane == 0)
        smem[threadIdx.x >> 5] = v;
    __syncthreads();
    v = warp_reduce<IS_MAX>(lane < THREADS / 32 ? smem[lane] : identity);
    __syncthreads(); /* read before the next reduction writes */
    return v;
}

/* (m, s) with s = sum exp(x - m): merging two partial results. */
__device__ __forceinline__ void online_merge(float &m, float &s, float m2, float s2)
{
    const float nm = fmaxf(m, m2);
    if (nm == -INFINITY)
        return;
    s = (m == -INFINITY ? 0.f : s * __expf(m - nm)) + (m2 == -INFINITY ? 0.f : s2 * __expf(m2 - nm));
    m = nm;
}

/* Block-wide merge of (m, s) pairs through 32 float2 of shared memory; every thread gets the
 * result. */
template <int THREADS> __device__ __forceinline__ void block_merge(float &m, float &s, float2 *smem)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        online_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    if (lane == 0)
        smem[threadIdx.x >> 5] = make_float2(m, s);
    __syncthreads();
    const float2 p = lane < THREADS / 32 ? smem[lane] : make_float2(-INFINITY, 0.f);
    m = p.x;
    s = p.y;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        online_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    __syncthreads(); /* read before the next reduction writes */
}

} // namespace ktune_common
