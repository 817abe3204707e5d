/* The prefill and base variants: up to 8 * MTILES rows of activations (16 for prefill, 32 for
 * base), on tensor cores, bound by streaming the packed weight once.
 *
 * The weight is the multiply's A operand (16 of its rows a tile, the n of C) and the activations
 * its B (8 rows a tile, the m of C): C^T = W A^T, so that a tile of m = 8 wastes little of the
 * multiply at small m. A block owns 16 * RTILES rows of W and all of m; its WARPS warps split k
 * into slabs of 128 (4 units; warp v: slabs v, v + WARPS, ...). Lane (g, t) of a warp loads unit t
 * of the slab of W's rows g and g + 8 of each 16-row tile and the same 32 k of activation row g of
 * each 8-row tile: its 16 pairs are the k of eight m16n8k16 multiplies, 4 values each (the same
 * permutation of k in both operands). UNROLL slabs of W and their scales are loaded before any
 * is multiplied, the activations of a slab while the one before is multiplied. The sums are
 * fp32, or (ACC32 0, f16 only) f16 over a slab and fp32 across slabs. With fp32 sums and groups of
 * whole slabs (a multiple of 128: the 16 k of a multiply share each row's scale), the launcher
 * runs the kernel with POST: W is dequantized to q - zero alone and a slab's sums, multiplied
 * afresh, are scaled by the row's scale and added to the totals (four fma a tile and slab for one
 * multiply a pair of W saved). The warps' sums meet in shared memory; the block stores C. */
#pragma once

#include "../matmul/matmul_common.cuh"
#include "wqmatmul_common.cuh"

namespace ktune_wqmatmul_impl {

/* d += a * b over a 16x8x16 tile of f16 with f16 sums (d: two pairs). */
__device__ __forceinline__ void mma_16816_h(uint32_t (&d)[2], const uint32_t (&a)[4],
                                            const uint32_t (&b)[2])
{
    asm("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, "
        "{%0,%1};\n"
        : "+r"(d[0]), "+r"(d[1])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* The eight m16n8k16 multiplies of a unit: w's 16 pairs of rows g and g + 8 of a tile (p) by the
 * same 32 k of activation row g (xa), step j taking pairs 2 j and 2 j + 1 of each: mma(fa, fb). */
template <typename Mma>
__device__ __forceinline__ void unit_multiplies(const uint32_t (&p)[2][16], const uint32_t *xa,
                                                Mma &&mma)
{
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const uint32_t fa[4] = {p[0][2 * j], p[1][2 * j], p[0][2 * j + 1], p[1][2 * j + 1]};
        const uint32_t fb[2] = {xa[2 * j], xa[2 * j + 1]};
        mma(fa, fb);
    }
}

/* The warps' sums of a block's 16 * RTILES rows of w by 8 * MTILES rows of a meet in shared
 * memory, then each thread of the block finishes some and stores them in C (element e is
 * accumulator i of tile (r, mt) of lane l). */
template <typename T, int WARPS, int RTILES, int MTILES>
__device__ __forceinline__ void store_sums(float (&d)[RTILES][MTILES][4], T *c, int64_t row0,
                                           int m, int n)
{
    ktune_matmul_impl::warps_sum<float, WARPS, RTILES * MTILES>(
        reinterpret_cast<const float(&)[RTILES * MTILES][4]>(d), [&](int e, float total) {
            const int l = e % 32, i = e / 32 % 4, tile = e / 128, r = tile / MTILES,
                      mt = tile % MTILES;
            const int64_t col = row0 + 16 * r + l / 4 + 8 * (i / 2); /* a row of W: a column of C */
            const int64_t row = 8 * mt + 2 * (l % 4) + i % 2;          /* a row of A and C */
            if (row < m && col < n)
                c[row * n + col] = ktune_common::from_float<T>(total);
        });
}

template <typename T, int B, int WARPS, int UNROLL, int MTILES, int RTILES, int ACC32, bool POST>
__global__ void __launch_bounds__(WARPS * 32)
    small_kernel(const T *__restrict__ a, qweight_view<T> w, T *__restrict__ c, int m, int n, int k)
{
    static_assert(ACC32 || std::is_same<T, __half>::value, "16-bit sums for f16 only");
    static_assert(WARPS >= 2, "the warps' sums meet in shared memory");
    static_assert(!POST || ACC32, "a slab's sums scaled in fp32");
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int64_t row0 = (int64_t)blockIdx.x * 16 * RTILES; /* the block's first row of W */
    const int units = (int)w.units, slabs = (units + 3) / 4;
    float d[RTILES][MTILES][4] = {};

    qweight_row<T> wrow[RTILES][2]; /* past n: the last row, computed and not stored */
#pragma unroll
    for (int r = 0; r < RTILES; r++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            wrow[r][h] = row_of<B>(w, min(row0 + 16 * r + g + 8 * h, (int64_t)n - 1));
    const T *arow[MTILES];
    bool aok[MTILES];
#pragma unroll
    for (int mt = 0; mt < MTILES; mt++) {
        const int row = 8 * mt + g;
        aok[mt] = row < m;
        arow[mt] = a + (int64_t)(aok[mt] ? row : 0) * k;
    }

    for (int s0 = warp; s0 < slabs; s0 += WARPS * UNROLL) {
        uint32_t q[UNROLL][RTILES][2][B];
        raw_scale<T> sc[UNROLL][RTILES][2];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            /* past k: unit 0's weight against zero activations (no branch around the loads,
             * which keeps them all in flight) */
            const int uu = (s0 + u * WARPS) * 4 + t, at = uu < units ? uu : 0;
#pragma unroll
            for (int r = 0; r < RTILES; r++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    load_unit<B>(w, wrow[r][h], at, q[u][r][h]);
                    sc[u][r][h] = load_scale<B>(w, wrow[r][h], at);
                }
        }
        /* the activations of a slab: loaded while the one before is multiplied */
        auto load_x = [&](int u, uint4 (&x)[MTILES][4]) {
            const int uu = (s0 + u * WARPS) * 4 + t;
            const bool in = uu < units;
#pragma unroll
            for (int mt = 0; mt < MTILES; mt++)
#pragma unroll
                for (int v = 0; v < 4; v++)
                    x[mt][v] = in && aok[mt]
                                   ? __ldg(reinterpret_cast<const uint4 *>(arow[mt] + 32 * uu) + v)
                                   : make_uint4(0, 0, 0, 0);
        };
        uint4 x[2][MTILES][4];
        load_x(0, x[0]);
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            if (u + 1 < UNROLL)
                load_x(u + 1, x[(u + 1) % 2]);
#pragma unroll
            for (int r = 0; r < RTILES; r++) {
                uint32_t p[2][16];
                float s[2]; /* POST: rows g and g + 8's scales */
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const unit_scale<T> us = scale_of(sc[u][r][h]);
                    dequant_unit<B, T, !POST>(q[u][r][h], us, p[h]);
                    s[h] = us.s;
                }
#pragma unroll
                for (int mt = 0; mt < MTILES; mt++) {
                    const uint32_t *xa = reinterpret_cast<const uint32_t *>(x[u % 2][mt]);
                    uint32_t h16[2] = {0, 0};
                    float slab[4] = {0, 0, 0, 0};
                    unit_multiplies(p, xa, [&](const uint32_t(&fa)[4], const uint32_t(&fb)[2]) {
                        if constexpr (POST)
                            ktune_matmul_impl::mma_16816<T>(slab, fa, fb);
                        else if constexpr (ACC32)
                            ktune_matmul_impl::mma_16816<T>(d[r][mt], fa, fb);
                        else
                            mma_16816_h(h16, fa, fb);
                    });
                    if constexpr (POST) {
#pragma unroll
                        for (int i = 0; i < 4; i++)
                            d[r][mt][i] = fmaf(s[i / 2], slab[i], d[r][mt][i]);
                    }
                    if constexpr (!ACC32) {
                        const float2 lo = __half22float2(*reinterpret_cast<const __half2 *>(&h16[0]));
                        const float2 hi = __half22float2(*reinterpret_cast<const __half2 *>(&h16[1]));
                        d[r][mt][0] += lo.x, d[r][mt][1] += lo.y, d[r][mt][2] += hi.x, d[r][mt][3] += hi.y;
                    }
                }
            }
        }
    }

    store_sums<T, WARPS>(d, c, row0, m, n);
}

template <int WARPS, int UNROLL, int MTILES, int RTILES, int ACC32> struct small_launcher {
    template <typename T, int B>
    static cudaError_t run(const void *a, const ktune_qweight &w, void *c, int64_t m, int64_t n,
                           int64_t k, cudaStream_t s)
    {
        if (m > 8 * MTILES)
            return cudaErrorInvalidValue;
        if constexpr (!ACC32 && !std::is_same<T, __half>::value)
            return cudaErrorInvalidValue; /* the space allows 16-bit sums for f16 only */
        else {
            const int64_t blocks = (n + 16 * RTILES - 1) / (16 * RTILES);
            const qweight_view<T> v = view_of<T>(w, n, k);
            const auto kernel =
                ACC32 && slab_sums_scaled(w.group)
                    ? small_kernel<T, B, WARPS, UNROLL, MTILES, RTILES, ACC32, ACC32 != 0>
                    : small_kernel<T, B, WARPS, UNROLL, MTILES, RTILES, ACC32, false>;
            return ktune_launch::launch(kernel, dim3((unsigned)blocks), dim3(WARPS * 32),
                                        dim3(1, 1, 1), 0, s, (const T *)a, v, (T *)c, (int)m,
                                        (int)n, (int)k);
        }
    }
};

} // namespace ktune_wqmatmul_impl
