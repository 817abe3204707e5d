/* What the qmatmul kernels share: the epilogue (scales and bias), the 8-bit tensor-core
 * instruction of mma.sync, and the dispatch on the quantized and output types.
 *
 * Layout of every kernel: C[m][n] = (sum over k of A[m][k] * W[n][k]) * a_scale * w_scale
 * (+ bias[n]), A and W row-major 8-bit (a linear layer's quantized activations and weight, both
 * int8 with int32 sums, exact, or both fp8 e4m3 with fp32 sums), C row-major bf16 or f16. */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "convert.cuh"
#include "ktune/qmatmul.h"
#include "launch.cuh"

namespace ktune_qmatmul_impl {

/* The sum of products of the quantized type: int32 for int8 (exact), fp32 for fp8. */
template <typename Q> struct accumulator {
    using type = float;
};
template <> struct accumulator<int8_t> {
    using type = int32_t;
};

/* The epilogue's value of a sum at (row, col) of C, in fp32: scaled by the row's (or the
 * tensor's) scale of A and the column's (or the tensor's) scale of W, plus the column's bias. */
template <typename O>
__device__ __forceinline__ float epilogue_value(float sum, const ktune_qmatmul_epilogue &ep,
                                                int64_t row, int64_t col)
{
    float v = sum * ep.a_scale[ep.a_scale_per_token ? row : 0] *
              ep.w_scale[ep.w_scale_per_channel ? col : 0];
    if (ep.bias)
        v += ktune_common::to_float<O>(static_cast<const O *>(ep.bias)[col]);
    return v;
}

/* C[row][col] = the epilogue's value of sum, inside m x n. */
template <typename O>
__device__ __forceinline__ void store_one(O *c, int64_t row, int64_t col, int64_t m, int64_t n,
                                          float sum, const ktune_qmatmul_epilogue &ep)
{
    if (row < m && col < n)
        c[row * n + col] = ktune_common::from_float<O>(epilogue_value<O>(sum, ep, row, col));
}

/* Four e4m3 values (a fragment register, the first in the low byte) as two f16 pairs: lo the
 * first two values, hi the last two. */
__device__ __forceinline__ void e4m3x4_to_f16(uint32_t v, uint32_t &lo, uint32_t &hi)
{
    const __half2_raw l = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(v & 0xffff), __NV_E4M3);
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(v >> 16), __NV_E4M3);
    lo = (uint32_t)l.x | (uint32_t)l.y << 16;
    hi = (uint32_t)h.x | (uint32_t)h.y << 16;
}

/* Whether this build's code for the running architecture has the fp8 instructions (sm_89 on). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define KTUNE_QMMA_FP8 1
#endif

/* d += a * b over a 16x8x32 tile of 8-bit values (row-major A, column-major B): int8 into int32
 * accumulators, fp8 e4m3 into fp32. Fragments as PTX's m16n8k32: a thread (group g = lane / 4,
 * t = lane % 4) holds A rows g and g + 8, k 4t .. 4t + 3 (a[0], a[1]) and 16 + 4t .. (a[2],
 * a[3]); B column g, k 4t .. (b[0]) and 16 + 4t .. (b[1]); D rows g (d[0], d[1]) and g + 8
 * (d[2], d[3]), columns 2t and 2t + 1. */
__device__ __forceinline__ void mma_16832(int32_t (&d)[4], const uint32_t (&a)[4],
                                          const uint32_t (&b)[2])
{
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void mma_16832(float (&d)[4], const uint32_t (&a)[4],
                                          const uint32_t (&b)[2])
{
#ifdef KTUNE_QMMA_FP8
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    (void)d, (void)a, (void)b; /* never launched: the launchers refuse fp8 below sm_89 */
#endif
}

/* Whether the current device runs fp8 tensor-core instructions (compute capability 8.9 on). */
inline bool device_has_fp8()
{
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return false;
    return major * 10 + minor >= 89;
}

} // namespace ktune_qmatmul_impl
