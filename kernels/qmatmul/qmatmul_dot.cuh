/* The dot variant: m of a few rows, bound by streaming W once, on CUDA cores (matmul's dot
 * kernel, matmul_dot.cuh, on 8-bit values).
 *
 * A warp takes one row of W at a time and reads it from start to end, 512 contiguous bytes an
 * instruction (16 values a lane, UNROLL loads in flight), multiplying each 16 values by the same
 * 16 of each of the m <= MROWS rows of A: int8 by dp4a into int32 sums (exact), fp8 e4m3
 * converted to fp32 and multiplied in fp32 (W's 16 values converted once for every row of A).
 * The lanes' sums meet by shuffles and lane 0 applies the epilogue. A block of WARPS warps owns
 * WARPS * WROWS consecutive rows of W, each warp WROWS of them in turn.
 *
 * k % 16 == 0 and 16-byte aligned A and W (the family's rules): a lane's 16 bytes are all inside
 * k or all beyond it. */
#pragma once

#include "../matmul/matmul_dot.cuh"
#include "qmatmul_common.cuh"

namespace ktune_qmatmul_impl {

/* Four e4m3 values (the first in the low byte) as fp32, through f16 pairs. */
__device__ __forceinline__ void e4m3x4_to_float(uint32_t v, float *f)
{
    uint32_t lo, hi;
    e4m3x4_to_f16(v, lo, hi);
    const float2 l = ktune_common::pair_to_float2<__half>(lo);
    const float2 h = ktune_common::pair_to_float2<__half>(hi);
    f[0] = l.x;
    f[1] = l.y;
    f[2] = h.x;
    f[3] = h.y;
}

/* The calling warp's sums of one row of W (k values at w) times rows 0 .. m - 1 of A (k values
 * apart, 1 <= m <= MROWS), in lane 0's sum[] (sums past m are not the caller's: those rows read
 * row m - 1, so that no branch stands between the loads). */
template <typename Q, int MROWS, int UNROLL>
__device__ __forceinline__ void qdot_row(const unsigned char *__restrict__ a,
                                         const unsigned char *__restrict__ w, int m, int64_t k,
                                         typename accumulator<Q>::type (&sum)[MROWS])
{
    constexpr bool INT8 = std::is_same<Q, int8_t>::value;
    const int lane = threadIdx.x & 31;
    const unsigned char *arow[MROWS];
#pragma unroll
    for (int r = 0; r < MROWS; r++) {
        sum[r] = 0;
        arow[r] = a + (int64_t)min(r, m - 1) * k;
    }
    for (int64_t kk = (int64_t)lane * 16; kk < k; kk += 512 * UNROLL) {
        uint4 wv[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            /* beyond k: a load of the row's start, replaced by zeros */
            const bool in = kk + 512 * u < k;
            const uint4 v = ktune_matmul_impl::load_stream(w + (in ? kk + 512 * u : 0));
            wv[u] = in ? v : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const bool in = kk + 512 * u < k;
            const uint32_t wp[4] = {wv[u].x, wv[u].y, wv[u].z, wv[u].w};
            float wf[INT8 ? 1 : 16];
            if constexpr (!INT8)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    e4m3x4_to_float(wp[j], wf + 4 * j);
#pragma unroll
            for (int r = 0; r < MROWS; r++) {
                const unsigned char *at = arow[r] + (in ? kk + 512 * u : 0);
                const uint4 v = __ldg(reinterpret_cast<const uint4 *>(at));
                const uint32_t ap[4] = {v.x, v.y, v.z, v.w};
                if constexpr (INT8) {
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        sum[r] = __dp4a((int)wp[j], (int)ap[j], sum[r]);
                } else {
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        float af[4];
                        e4m3x4_to_float(ap[j], af);
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            sum[r] = fmaf(wf[4 * j + e], af[e], sum[r]);
                    }
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

template <typename Q, typename O, int WARPS, int WROWS, int UNROLL, int MROWS>
__global__ void __launch_bounds__(WARPS * 32, ktune_matmul_impl::DOT_MIN_BLOCKS / WARPS)
    dot_kernel(const Q *__restrict__ a, const Q *__restrict__ w, O *__restrict__ c, int m, int n,
               int k, ktune_qmatmul_epilogue ep)
{
    using acc_t = typename accumulator<Q>::type;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t first = (int64_t)blockIdx.x * WARPS * WROWS;
    ktune_launch::wait_previous();
#pragma unroll 1
    for (int i = 0; i < WROWS; i++) {
        const int64_t row = first + (int64_t)i * WARPS + warp; /* a row of W: a column of C */
        if (row >= n)
            break;
        acc_t sum[MROWS];
        qdot_row<Q, MROWS, UNROLL>(reinterpret_cast<const unsigned char *>(a),
                                   reinterpret_cast<const unsigned char *>(w) + row * k, m, k, sum);
        if (lane == 0)
#pragma unroll
            for (int r = 0; r < MROWS; r++)
                store_one<O>(c, r, row, m, n, (float)sum[r], ep);
    }
    ktune_launch::release_next();
}

template <int WARPS, int WROWS, int UNROLL, int MROWS> struct dot_launcher {
    template <typename Q, typename O>
    static cudaError_t run(const void *a, const void *w, void *c, int64_t m, int64_t n, int64_t k,
                           const ktune_qmatmul_epilogue &ep, cudaStream_t s)
    {
        if (m > MROWS || (uintptr_t)a % 16 != 0 || (uintptr_t)w % 16 != 0)
            return cudaErrorInvalidValue;
        constexpr int64_t per_block = (int64_t)WARPS * WROWS;
        const int64_t blocks = (n + per_block - 1) / per_block;
        return ktune_launch::launch_overlapped(
            dot_kernel<Q, O, WARPS, WROWS, UNROLL, MROWS>, dim3((unsigned)blocks),
            dim3(WARPS * 32), dim3(1, 1, 1), 0, s, (const Q *)a, (const Q *)w, (O *)c, (int)m,
            (int)n, (int)k, ep);
    }
};

} // namespace ktune_qmatmul_impl
