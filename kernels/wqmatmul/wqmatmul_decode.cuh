/* The decode variant: a few rows of activations (m <= TM <= 4), on CUDA cores, bound by streaming
 * the packed weight once.
 *
 * A warp owns ROWS rows of the weight (columns of C); its lanes take the rows' units in turn
 * (lane l: units l, l + 32, ...: a warp reads 32 consecutive units of a row at once), UNROLL units
 * a lane loaded before any is used. A unit is dequantized into 16 pairs and multiplied by the same
 * 32 k of each row of A: in fp32 (ACC32), or as 16-bit pairs summed over the unit and added to the
 * fp32 sums once a unit (f16 only: its 11-bit sums of 32 products stay within the check's
 * tolerance; bf16's 8-bit ones would not). The lanes' sums meet by shuffles. */
#pragma once

#include "../matmul/matmul_common.cuh"
#include "wqmatmul_common.cuh"

namespace ktune_wqmatmul_impl {

using ktune_common::pair_to_float2;

template <typename T, int B, int TM, int ROWS, int WARPS, int UNROLL, int ACC32>
__global__ void __launch_bounds__(WARPS * 32)
    decode_kernel(const T *__restrict__ a, qweight_view<T> w, T *__restrict__ c, int m, int n,
                  int k)
{
    static_assert(ACC32 || std::is_same<T, __half>::value, "16-bit sums for f16 only");
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t row0 = ((int64_t)blockIdx.x * WARPS + warp) * ROWS;
    if (row0 >= n)
        return;
    qweight_row<T> rows[ROWS]; /* past n: the last row, computed and not stored */
#pragma unroll
    for (int r = 0; r < ROWS; r++)
        rows[r] = row_of<B>(w, min(row0 + r, (int64_t)n - 1));
    float acc[ROWS][TM] = {};
    const int units = (int)w.units;
    for (int u0 = lane; u0 < units; u0 += 32 * UNROLL) {
        uint32_t q[UNROLL][ROWS][B];
        raw_scale<T> sc[UNROLL][ROWS];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int uu = min(u0 + 32 * u, units - 1); /* past k: loaded, not used */
#pragma unroll
            for (int r = 0; r < ROWS; r++) {
                load_unit<B>(w, rows[r], uu, q[u][r]);
                sc[u][r] = load_scale<B>(w, rows[r], uu);
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int uu = u0 + 32 * u;
            if (uu >= units)
                break;
            uint4 x[TM][4];
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int v = 0; v < 4; v++)
                    x[i][v] = i < m ? __ldg(reinterpret_cast<const uint4 *>(a + (int64_t)i * k + 32 * uu) + v)
                                    : make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int r = 0; r < ROWS; r++) {
                uint32_t p[16];
                dequant_unit<B, T>(q[u][r], scale_of(sc[u][r]), p);
#pragma unroll
                for (int i = 0; i < TM; i++) {
                    const uint32_t *xa = reinterpret_cast<const uint32_t *>(x[i]);
                    if constexpr (ACC32) {
#pragma unroll
                        for (int j = 0; j < 16; j++) {
                            const float2 wf = pair_to_float2<T>(p[j]), af = pair_to_float2<T>(xa[j]);
                            acc[r][i] = fmaf(wf.x, af.x, fmaf(wf.y, af.y, acc[r][i]));
                        }
                    } else {
                        uint32_t h = 0;
#pragma unroll
                        for (int j = 0; j < 16; j++)
                            h = bits_of<T>(
                                __hfma2(as_pair<T>(p[j]), as_pair<T>(xa[j]), as_pair<T>(h)));
                        const float2 f = pair_to_float2<T>(h);
                        acc[r][i] += f.x + f.y;
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS; r++)
#pragma unroll
        for (int i = 0; i < TM; i++) {
            float v = acc[r][i];
#pragma unroll
            for (int o = 16; o > 0; o /= 2)
                v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == (r * TM + i) % 32 && i < m && row0 + r < n)
                c[(int64_t)i * n + row0 + r] = ktune_common::from_float<T>(v);
        }
}

template <int TM, int ROWS, int WARPS, int UNROLL, int ACC32> struct decode_launcher {
    template <typename T, int B>
    static cudaError_t run(const void *a, const ktune_qweight &w, void *c, int64_t m, int64_t n,
                           int64_t k, cudaStream_t s)
    {
        if (m > TM)
            return cudaErrorInvalidValue;
        if constexpr (!ACC32 && !std::is_same<T, __half>::value)
            return cudaErrorInvalidValue; /* the space allows 16-bit sums for f16 only */
        else {
            const int64_t blocks = (n + WARPS * ROWS - 1) / (WARPS * ROWS);
            return ktune_launch::launch(decode_kernel<T, B, TM, ROWS, WARPS, UNROLL, ACC32>,
                                        dim3((unsigned)blocks), dim3(WARPS * 32), dim3(1, 1, 1), 0,
                                        s, (const T *)a, view_of<T>(w, n, k), (T *)c, (int)m,
                                        (int)n, (int)k);
        }
    }
};

} // namespace ktune_wqmatmul_impl
