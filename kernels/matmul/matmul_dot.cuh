/* The dot variant: m of a few rows, bound by streaming W once, on CUDA cores.
 *
 * A warp takes one row of W at a time and reads it from start to end, 512 contiguous bytes an
 * instruction (16 bytes a lane, UNROLL of them in flight), multiplying each 8 elements by the
 * same 8 of each of the m <= MROWS rows of A in fp32 (A, a few KB that every warp of the grid
 * reads, stays in L1 and L2); the lanes' sums meet by shuffles. A block of WARPS warps owns
 * WARPS * ROWS consecutive rows of W, one contiguous piece of memory, each warp ROWS of them in
 * turn. The tensor-core GEMV (matmul_gemv.cuh) reads 8 rows an instruction, 64 bytes of each, as
 * its fragments need; the memory serves one stream a warp faster than those many interleaved ones
 * (the README has the H100's figures). The multiplies cost about two instructions an element a
 * row of A, so the variant is for m up to 4. */
#pragma once

#include "matmul_common.cuh"

namespace ktune_matmul_impl {

using ktune_common::pair_to_float2;

/* The calling warp's dot products of one row of W (k elements at w) with rows 0 .. m - 1 of A
 * (row-major, k elements apart, 1 <= m <= MROWS), in lane 0's sum[] (the other lanes' hold
 * partial sums; sums past m are not the caller's). VEC: 16-byte loads (k % 8 == 0 and A and W
 * 16-byte aligned), else one element at a time; a template argument, so that the loop holds no
 * branch between the loads it issues together. */
template <typename T, int MROWS, int UNROLL, bool VEC>
__device__ __forceinline__ void dot_row_loads(const T *__restrict__ a, const T *__restrict__ w,
                                              int m, int64_t k, float (&sum)[MROWS])
{
    const int lane = threadIdx.x & 31;
    const T *arow[MROWS]; /* rows past m read row m - 1, whose sums the caller drops: no branch */
#pragma unroll
    for (int r = 0; r < MROWS; r++) {
        sum[r] = 0.f;
        arow[r] = a + (int64_t)min(r, m - 1) * k;
    }
    for (int64_t kk = (int64_t)lane * 8; kk < k; kk += 256 * UNROLL) {
        uint4 wv[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            wv[u] = load8<true>(w, kk + 256 * u, k, VEC); /* zeros past k */
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const uint32_t wp[4] = {wv[u].x, wv[u].y, wv[u].z, wv[u].w};
            float2 wf[4];
#pragma unroll
            for (int j = 0; j < 4; j++)
                wf[j] = pair_to_float2<T>(wp[j]);
#pragma unroll
            for (int r = 0; r < MROWS; r++) {
                const uint4 av = load8<false>(arow[r], kk + 256 * u, k, VEC);
                const uint32_t ap[4] = {av.x, av.y, av.z, av.w};
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float2 af = pair_to_float2<T>(ap[j]);
                    sum[r] = fmaf(wf[j].x, af.x, sum[r]);
                    sum[r] = fmaf(wf[j].y, af.y, sum[r]);
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < MROWS; r++)
#pragma unroll
        for (int d = 16; d > 0; d >>= 1)
            sum[r] += __shfl_down_sync(0xffffffffu, sum[r], d);
}

template <typename T, int MROWS, int UNROLL>
__device__ __forceinline__ void dot_row(const T *__restrict__ a, const T *__restrict__ w, int m,
                                        int64_t k, bool vec, float (&sum)[MROWS])
{
    if (vec)
        dot_row_loads<T, MROWS, UNROLL, true>(a, w, m, k, sum);
    else /* unaligned rows, rare: a load at a time, so that its registers do not bound the other */
        dot_row_loads<T, MROWS, 1, false>(a, w, m, k, sum);
}

/* A kernel's blocks kept resident a multiprocessor: DOT_MIN_BLOCKS / WARPS, 32 warps, so that
 * the compiler keeps to 64 registers a thread (left to itself it took up to twice as many, and
 * fewer warps held fewer loads in flight). */
constexpr int DOT_MIN_BLOCKS = 32;

template <typename T, int WARPS, int ROWS, int UNROLL, int MROWS>
__global__ void __launch_bounds__(WARPS * 32, DOT_MIN_BLOCKS / WARPS)
    dot_kernel(const T *__restrict__ a, const T *__restrict__ w, T *__restrict__ c, int m, int n,
               int64_t k, int flags)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t first = (int64_t)blockIdx.x * WARPS * ROWS;
    ktune_launch::wait_previous();
#pragma unroll 1
    for (int i = 0; i < ROWS; i++) {
        const int64_t row = first + (int64_t)i * WARPS + warp;
        if (row >= n)
            break;
        float sum[MROWS];
        dot_row<T, MROWS, UNROLL>(a, w + row * k, m, k, flags & VEC_LOADS, sum);
#pragma unroll
        for (int r = 0; r < MROWS; r++)
            if (lane == 0 && r < m)
                c[(int64_t)r * n + row] = to_out<T>(sum[r]);
    }
    ktune_launch::release_next();
}

template <int WARPS, int ROWS, int UNROLL, int MROWS> struct dot_launcher {
    template <typename T>
    static cudaError_t run(const void *a, const void *w, void *c, int64_t m, int64_t n, int64_t k,
                           cudaStream_t s)
    {
        if (m > MROWS)
            return cudaErrorInvalidValue;
        constexpr int64_t per_block = (int64_t)WARPS * ROWS;
        const int64_t blocks = (n + per_block - 1) / per_block;
        if (blocks > INT32_MAX)
            return cudaErrorInvalidValue;
        return ktune_launch::launch_overlapped(
            dot_kernel<T, WARPS, ROWS, UNROLL, MROWS>, dim3((unsigned)blocks), dim3(WARPS * 32),
            dim3(1, 1, 1), 0, s, (const T *)a, (const T *)w, (T *)c, (int)m, (int)n, k,
            layout_flags<T>(a, w, c, n, k));
    }
};

} // namespace ktune_matmul_impl
