/* The decode variant: small m, bound by streaming W once.
 *
 * A block owns 16 * RTILES rows of W (columns of C) and all of m (up to 8 * MTILES rows of A);
 * its WARPS warps split k into 64-wide slabs (warp w: slabs w, w + WARPS, ...). A lane loads 16
 * bytes of W straight from global memory for each of its rows g and g + 8 of a 16-row tile, and
 * 16 bytes of the activation row g: over a slab, that is the A and B fragments of two m16n8k32
 * multiplies, k permuted the same way in both (lane t of a group holds k 16t .. 16t + 15 of the
 * slab, the first 8 for one multiply and the last 8 for the other). UNROLL slabs are loaded before
 * they are multiplied, so that each lane has UNROLL * RTILES * 32 bytes of W in flight. fp8 with
 * CONVERT: the fragments are converted to f16 here, W's once for all MTILES tiles of A, and
 * multiplied as f16 (exact products, fp32 sums); without, by e4m3 mma.sync, which the H100 runs as
 * f16 multiplies on fragments converted for every instruction. Which is faster depends on the
 * shape (the sweep chooses); int8 ignores CONVERT. The warps' sums meet in shared memory; the
 * epilogue scales, adds the bias and stores.
 *
 * k % 16 == 0 and 16-byte aligned A and W (the family's rules): a lane's 16 bytes are all inside
 * k or all beyond it. */
#pragma once

#include "../matmul/matmul_common.cuh"
#include "qmatmul_common.cuh"

namespace ktune_qmatmul_impl {

/* m16n8k32's A fragment of e4m3 (a[4]) as the A fragments of two m16n8k16 f16 multiplies, k
 * permuted: the first takes a[0] and a[1] (values 0, 1 as its k 2t, 2t + 1 and 2, 3 as 8 + 2t,
 * 9 + 2t), the second a[2] and a[3]. e4m3_b_to_f16 permutes B's k the same way. */
__device__ __forceinline__ void e4m3_a_to_f16(const uint32_t (&a)[4], uint32_t (&h)[2][4])
{
    e4m3x4_to_f16(a[0], h[0][0], h[0][2]);
    e4m3x4_to_f16(a[1], h[0][1], h[0][3]);
    e4m3x4_to_f16(a[2], h[1][0], h[1][2]);
    e4m3x4_to_f16(a[3], h[1][1], h[1][3]);
}

__device__ __forceinline__ void e4m3_b_to_f16(const uint32_t (&b)[2], uint32_t (&h)[2][2])
{
    e4m3x4_to_f16(b[0], h[0][0], h[0][1]);
    e4m3x4_to_f16(b[1], h[1][0], h[1][1]);
}

template <typename Q, typename O, int WARPS, int UNROLL, int MTILES, int RTILES, int CONVERT>
__global__ void __launch_bounds__(WARPS * 32)
    decode_kernel(const Q *__restrict__ a, const Q *__restrict__ w, O *__restrict__ c, int m, int n,
                  int k, ktune_qmatmul_epilogue ep)
{
    using acc_t = typename accumulator<Q>::type;
    static_assert(WARPS >= 2, "the warps' sums meet in shared memory");
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int64_t row0 = (int64_t)blockIdx.x * 16 * RTILES; /* the block's first row of W */
    const int slabs = (k + 63) / 64;
    acc_t d[RTILES][MTILES][4] = {};
    ktune_launch::wait_previous();

    /* the rows of W and A this lane reads (clamped inside; out-of-range ones load zeros) */
    const unsigned char *wrow[RTILES][2];
    bool wok[RTILES][2];
#pragma unroll
    for (int r = 0; r < RTILES; r++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int64_t row = row0 + 16 * r + g + 8 * h;
            wok[r][h] = row < n;
            wrow[r][h] = reinterpret_cast<const unsigned char *>(w) + (wok[r][h] ? row : 0) * k;
        }
    const unsigned char *arow[MTILES];
    bool aok[MTILES];
#pragma unroll
    for (int mt = 0; mt < MTILES; mt++) {
        const int row = 8 * mt + g;
        aok[mt] = row < m;
        arow[mt] = reinterpret_cast<const unsigned char *>(a) + (int64_t)(aok[mt] ? row : 0) * k;
    }

    for (int s0 = warp; s0 < slabs; s0 += WARPS * UNROLL) {
        uint4 wv[UNROLL][RTILES][2], av[UNROLL][MTILES];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            /* beyond k or the matrix: a load of the row's start, replaced by zeros (no branch
             * around the loads, which keeps them all in flight) */
            const int64_t kk = (int64_t)(s0 + u * WARPS) * 64 + 16 * t;
            const bool in = kk < k;
            const int64_t at = in ? kk : 0;
#pragma unroll
            for (int r = 0; r < RTILES; r++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const uint4 v = ktune_matmul_impl::load_stream(wrow[r][h] + at);
                    wv[u][r][h] = in && wok[r][h] ? v : make_uint4(0, 0, 0, 0);
                }
#pragma unroll
            for (int mt = 0; mt < MTILES; mt++) {
                const uint4 v = *reinterpret_cast<const uint4 *>(arow[mt] + at);
                av[u][mt] = in && aok[mt] ? v : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
            for (int r = 0; r < RTILES; r++) {
                const uint4 lo = wv[u][r][0], hi = wv[u][r][1];
                const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y}, a1[4] = {lo.z, hi.z, lo.w, hi.w};
                if constexpr (!std::is_same<Q, int8_t>::value && CONVERT) {
                    uint32_t h0[2][4], h1[2][4];
                    e4m3_a_to_f16(a0, h0);
                    e4m3_a_to_f16(a1, h1);
#pragma unroll
                    for (int mt = 0; mt < MTILES; mt++) {
                        const uint4 x = av[u][mt];
                        const uint32_t b0[2] = {x.x, x.y}, b1[2] = {x.z, x.w};
                        uint32_t g0[2][2], g1[2][2];
                        e4m3_b_to_f16(b0, g0);
                        e4m3_b_to_f16(b1, g1);
#pragma unroll
                        for (int half = 0; half < 2; half++) {
                            ktune_matmul_impl::mma_16816<__half>(d[r][mt], h0[half], g0[half]);
                            ktune_matmul_impl::mma_16816<__half>(d[r][mt], h1[half], g1[half]);
                        }
                    }
                } else {
#pragma unroll
                    for (int mt = 0; mt < MTILES; mt++) {
                        const uint4 x = av[u][mt];
                        const uint32_t b0[2] = {x.x, x.y}, b1[2] = {x.z, x.w};
                        mma_16832(d[r][mt], a0, b0);
                        mma_16832(d[r][mt], a1, b1);
                    }
                }
            }
    }

    ktune_launch::release_next();
    /* the warps' sums meet in shared memory, then each thread of the block finishes some:
     * element e is fragment register i of tile (r, mt) of lane l */
    ktune_matmul_impl::warps_sum<acc_t, WARPS, RTILES * MTILES>(
        reinterpret_cast<const acc_t(&)[RTILES * MTILES][4]>(d), [&](int e, acc_t total) {
            const int l = e % 32, i = e / 32 % 4, tile = e / 128, r = tile / MTILES, mt = tile % MTILES;
            const int64_t col = row0 + 16 * r + l / 4 + 8 * (i / 2); /* a row of W: a column of C */
            const int64_t row = 8 * mt + 2 * (l % 4) + i % 2;          /* a row of A and C */
            store_one<O>(c, row, col, m, n, (float)total, ep);
        });
}

template <int WARPS, int UNROLL, int MTILES, int RTILES, int CONVERT> struct decode_launcher {
    template <typename Q, typename O>
    static cudaError_t run(const void *a, const void *w, void *c, int64_t m, int64_t n, int64_t k,
                           const ktune_qmatmul_epilogue &ep, cudaStream_t s)
    {
        if (m > 8 * MTILES || (uintptr_t)a % 16 != 0 || (uintptr_t)w % 16 != 0)
            return cudaErrorInvalidValue;
        if (!std::is_same<Q, int8_t>::value && !device_has_fp8())
            return cudaErrorNotSupported;
        const int64_t blocks = (n + 16 * RTILES - 1) / (16 * RTILES);
        return ktune_launch::launch_overlapped(
            decode_kernel<Q, O, WARPS, UNROLL, MTILES, RTILES, CONVERT>, dim3((unsigned)blocks),
            dim3(WARPS * 32), dim3(1, 1, 1), 0, s, (const Q *)a, (const Q *)w, (O *)c, (int)m,
            (int)n, (int)k, ep);
    }
};

} // namespace ktune_qmatmul_impl
