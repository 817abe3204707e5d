/* What the matmul kernels share: the tensor-core instruction, 16-byte loads with tails, the
 * asynchronous copies and matrix loads of shared memory, and the store of a result pair.
 *
 * Layout of every kernel: C[m][n] = sum over k of A[m][k] * W[n][k], all row-major (a linear
 * layer's activations, weight and output), 16-bit inputs and output, fp32 accumulation. */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "async_copy.cuh"
#include "cluster.cuh"
#include "convert.cuh"
#include "ktune/ktune.h"
#include "launch.cuh"

namespace ktune_matmul_impl {

using ktune_common::cp_async16;
using ktune_common::cp_async_commit;
using ktune_common::cp_async_wait;
using ktune_common::smem_addr;

/* Loads take 16 bytes at a time when every row of A and W starts 16-byte aligned; stores take
 * pairs when every row of C starts 4-byte aligned, and (wgmma) go through TMA when every row of C
 * starts 16-byte aligned. */
enum { VEC_LOADS = 1, PAIR_STORES = 2, TMA_STORES = 4 };

inline int pair_stores(const void *c, int64_t n)
{
    return n % 2 == 0 && (uintptr_t)c % 4 == 0 ? PAIR_STORES : 0;
}

template <typename T> inline int layout_flags(const void *a, const void *w, const void *c, int64_t n,
                                              int64_t k)
{
    int f = pair_stores(c, n);
    if (k % 8 == 0 && (uintptr_t)a % 16 == 0 && (uintptr_t)w % 16 == 0)
        f |= VEC_LOADS;
    return f;
}

/* d += a * b over a 16x8x16 tile (row-major A, column-major B), fp32 accumulators. */
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
    if constexpr (std::is_same<T, __nv_bfloat16>::value)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* A 16-byte load that streams past L1 (the weights: read once), asking L2 to fetch the whole
 * 256-byte block around it from memory (the next loads of the row are in it). */
__device__ __forceinline__ uint4 load_stream(const void *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* Elements kk .. kk+7 of a row of length k, zero past its end. vec: k % 8 == 0 and the row is
 * 16-byte aligned, so a group is either wholly inside or wholly past the end. */
template <bool STREAM, typename T>
__device__ __forceinline__ uint4 load8(const T *row, int64_t kk, int64_t k, bool vec)
{
    if (vec) {
        if (kk >= k)
            return make_uint4(0, 0, 0, 0);
        return STREAM ? load_stream(row + kk) : __ldg(reinterpret_cast<const uint4 *>(row + kk));
    }
    const uint16_t *r = reinterpret_cast<const uint16_t *>(row);
    uint32_t h[8];
#pragma unroll
    for (int i = 0; i < 8; i++)
        h[i] = kk + i < k ? r[kk + i] : 0u;
    return make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
}

/* The tile (tm, tn) of block pid of a grid of tiles_m x tiles_n tiles, in grouped order: columns
 * of GROUP_M tiles of m, so that blocks running at the same time share their tiles of A and W in
 * L2. */
constexpr int GROUP_M = 8;

__device__ __forceinline__ void grouped_tile(int pid, int tiles_m, int tiles_n, int &tm, int &tn)
{
    const int per_group = GROUP_M * tiles_n, first = pid / per_group * GROUP_M;
    const int size = min(tiles_m - first, GROUP_M);
    tm = first + (pid % per_group) % size;
    tn = (pid % per_group) / size;
}

/* Four 8x8 matrices of 16-bit elements from shared memory, one row address a lane. */
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p))
                 : "memory");
}

/* The WARPS warps of a block hold partial sums of the same TILES fragments (4 accumulators a lane
 * each; accumulator i of fragment t of lane l is element (t * 4 + i) * 32 + l): they meet in
 * shared memory, and each thread of the block then hands some elements' totals to
 * store(element, total). */
template <typename Acc, int WARPS, int TILES, typename Store>
__device__ __forceinline__ void warps_sum(const Acc (&d)[TILES][4], Store store)
{
    constexpr int PER_WARP = TILES * 4 * 32;
    __shared__ Acc sums[WARPS][PER_WARP];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int t = 0; t < TILES; t++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            sums[warp][(t * 4 + i) * 32 + lane] = d[t][i];
    __syncthreads();
    for (int e = threadIdx.x; e < PER_WARP; e += WARPS * 32) {
        Acc total = 0;
#pragma unroll
        for (int v = 0; v < WARPS; v++)
            total += sums[v][e];
        store(e, total);
    }
}

/* An fp32 result as the output's type. */
template <typename T> __device__ __forceinline__ T to_out(float v)
{
    return ktune_common::from_float<T>(v);
}

/* x and y as two 16-bit values, x in the low half (the lower address). */
template <typename T> __device__ __forceinline__ uint32_t pack2(float x, float y)
{
    const T v[2] = {to_out<T>(x), to_out<T>(y)};
    return *reinterpret_cast<const uint32_t *>(v);
}

/* C[row][col] = x and C[row][col + 1] = y, for the parts inside m x n. */
template <typename T>
__device__ __forceinline__ void store_pair(T *c, int64_t row, int64_t col, int64_t m, int64_t n,
                                           float x, float y, bool pairs)
{
    if (row >= m || col >= n)
        return;
    T *p = c + row * n + col;
    if (pairs && col + 1 < n) {
        *reinterpret_cast<uint32_t *>(p) = pack2<T>(x, y);
        return;
    }
    p[0] = to_out<T>(x);
    if (col + 1 < n)
        p[1] = to_out<T>(y);
}

/* Runs Launcher::run<T> for the dtype. fp32 inputs are not a matmul of this family. */
template <typename Launcher>
cudaError_t dispatch(const void *a, const void *w, void *c, int64_t m, int64_t n, int64_t k, int dtype,
                     cudaStream_t s)
{
    if (m < 1 || n < 1 || k < 1 || m > INT32_MAX || n > INT32_MAX)
        return cudaErrorInvalidValue;
    switch (dtype) {
    case KTUNE_F16:
        return Launcher::template run<__half>(a, w, c, m, n, k, s);
    case KTUNE_BF16:
        return Launcher::template run<__nv_bfloat16>(a, w, c, m, n, k, s);
    default:
        return cudaErrorInvalidValue;
    }
}

} // namespace ktune_matmul_impl
