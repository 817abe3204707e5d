/* The gemv variant: small m, bound by the bandwidth of streaming W once.
 *
 * The tensor cores compute C^T = W A^T: a warp owns ROWS rows of W (16 a tile) and all of m (8 a
 * tile, MTILES tiles). Each lane loads 16 contiguous bytes of a W row straight into registers
 * and uses them as its part of the mma A fragment: a sum over k does not depend on the order of
 * k, so the lane's 8 elements stand for the fragment's k positions of two 16-wide steps, and the
 * activation fragment is loaded in the same order. No shared memory on the way in; UNROLL groups
 * of 32 k a warp are in flight at once.
 *
 * k is split over the WARPS warps of a block (interleaved groups), then over the SPLIT blocks of
 * a cluster (contiguous ranges); the partial sums meet in shared memory, then across the cluster
 * through distributed shared memory, and each block of the cluster writes a share of the rows. */
#pragma once

#include "matmul_common.cuh"

namespace ktune_matmul_impl {

/* A warp's sums of C^T = W A^T over its groups of 32 k (groups g_begin + warp, + WARPS, ... below
 * g_end): rows n0 .. n0 + ROWS - 1 of W (those below n), rows 0 .. m - 1 of A (m <= MTILES * 8).
 * acc[nt][mt] holds C^T rows nt * 16 + g (+ 8), columns mt * 8 + 2t (+ 1), g = lane / 4, t = lane
 * % 4. */
template <typename T, int ROWS, int WARPS, int UNROLL, int MTILES>
__device__ __forceinline__ void gemv_accumulate(const T *__restrict__ a, const T *__restrict__ w,
                                                int m, int n0, int n, int64_t k,
                                                int64_t g_begin, int64_t g_end, bool vec,
                                                float (&acc)[ROWS / 16][MTILES][4])
{
    constexpr int NT = ROWS / 16;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const T *wrow[NT][2];
    bool wok[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = n0 + nt * 16 + h * 8 + g;
            wok[nt][h] = r < n;
            wrow[nt][h] = w + (int64_t)(r < n ? r : n - 1) * k;
        }
    const T *arow[MTILES];
    bool aok[MTILES];
#pragma unroll
    for (int mt = 0; mt < MTILES; mt++) {
        const int r = mt * 8 + g;
        aok[mt] = r < m;
        arow[mt] = a + (int64_t)(r < m ? r : m - 1) * k;
    }
    for (int64_t g0 = g_begin + warp; g0 < g_end; g0 += (int64_t)WARPS * UNROLL) {
        uint4 wv[UNROLL][NT][2], av[UNROLL][MTILES];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int64_t grp = g0 + (int64_t)u * WARPS;
            const int64_t kk = grp < g_end ? grp * 32 + t * 8 : k; /* past the end: zeros */
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    wv[u][nt][h] = load8<true>(wrow[nt][h], wok[nt][h] ? kk : k, k, vec);
#pragma unroll
            for (int mt = 0; mt < MTILES; mt++)
                av[u][mt] = load8<false>(arow[mt], aok[mt] ? kk : k, k, vec);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int mt = 0; mt < MTILES; mt++) {
                    const uint4 &lo = wv[u][nt][0], &hi = wv[u][nt][1], &x = av[u][mt];
                    const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y}, b0[2] = {x.x, x.y};
                    const uint32_t a1[4] = {lo.z, hi.z, lo.w, hi.w}, b1[2] = {x.z, x.w};
                    mma_16816<T>(acc[nt][mt], a0, b0);
                    mma_16816<T>(acc[nt][mt], a1, b1);
                }
    }
}

/* The block's tile of C^T (ROWS x MTILES * 8 floats, stored [column][row]) into part: each warp's
 * acc (gemv_accumulate) through red (WARPS tiles), summed over the warps. The caller syncs the
 * block before reading part. */
template <int ROWS, int WARPS, int MTILES>
__device__ __forceinline__ void gemv_reduce(const float (&acc)[ROWS / 16][MTILES][4], float *red,
                                            float *part)
{
    constexpr int TILE = ROWS * MTILES * 8;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    float *mine = red + warp * TILE;
#pragma unroll
    for (int nt = 0; nt < ROWS / 16; nt++)
#pragma unroll
        for (int mt = 0; mt < MTILES; mt++) {
            const int r = nt * 16 + g, col = mt * 8 + 2 * t;
            mine[col * ROWS + r] = acc[nt][mt][0];
            mine[(col + 1) * ROWS + r] = acc[nt][mt][1];
            mine[col * ROWS + r + 8] = acc[nt][mt][2];
            mine[(col + 1) * ROWS + r + 8] = acc[nt][mt][3];
        }
    __syncthreads();
    for (int i = threadIdx.x; i < TILE; i += WARPS * 32) {
        float s = 0;
#pragma unroll
        for (int q = 0; q < WARPS; q++)
            s += red[q * TILE + i];
        part[i] = s;
    }
}

template <typename T, int ROWS, int WARPS, int UNROLL, int SPLIT, int MTILES>
__global__ void __launch_bounds__(WARPS * 32)
    gemv_kernel(const T *__restrict__ a, const T *__restrict__ w, T *__restrict__ c, int m, int n,
                int64_t k, int flags)
{
    constexpr int MC = MTILES * 8;   /* columns of the C^T tile */
    constexpr int TILE = ROWS * MC;  /* floats of one block's tile, stored [m][n] */
    __shared__ float red[(WARPS + 1) * TILE];
    const int n0 = blockIdx.x * ROWS;
    const int split = SPLIT > 1 ? (int)ktune_cluster::rank() : 0;
    const int64_t groups = (k + 31) / 32;
    ktune_launch::wait_previous();
    const int64_t g_begin = groups * split / SPLIT, g_end = groups * (split + 1) / SPLIT;

    float acc[ROWS / 16][MTILES][4] = {};
    gemv_accumulate<T, ROWS, WARPS, UNROLL, MTILES>(a, w, m, n0, n, k, g_begin, g_end,
                                                    flags & VEC_LOADS, acc);
    ktune_launch::release_next();
    float *part = red + WARPS * TILE;
    gemv_reduce<ROWS, WARPS, MTILES>(acc, red, part);
    const int begin = TILE * split / SPLIT, end = TILE * (split + 1) / SPLIT;
    if constexpr (SPLIT > 1) {
        ktune_cluster::sync();
        for (int i = begin + threadIdx.x; i < end; i += WARPS * 32) {
            const float s = ktune_cluster::sum_split<SPLIT>(part, i);
            const int col = i / ROWS, r = i % ROWS;
            if (col < m && n0 + r < n)
                c[(int64_t)col * n + n0 + r] = to_out<T>(s);
        }
        ktune_cluster::sync(); /* the others' shared memory stays until every block has read it */
    } else {
        __syncthreads();
        for (int i = begin + threadIdx.x; i < end; i += WARPS * 32) {
            const int col = i / ROWS, r = i % ROWS;
            if (col < m && n0 + r < n)
                c[(int64_t)col * n + n0 + r] = to_out<T>(part[i]);
        }
    }
}

template <int ROWS, int WARPS, int UNROLL, int SPLIT, int MTILES> struct gemv_launcher {
    template <typename T>
    static cudaError_t run(const void *a, const void *w, void *c, int64_t m, int64_t n, int64_t k,
                           cudaStream_t s)
    {
        if (m > MTILES * 8)
            return cudaErrorInvalidValue;
        const dim3 grid((unsigned)((n + ROWS - 1) / ROWS), SPLIT);
        return ktune_launch::launch_overlapped(
            gemv_kernel<T, ROWS, WARPS, UNROLL, SPLIT, MTILES>, grid, dim3(WARPS * 32),
            dim3(1, SPLIT, 1), 0, s, (const T *)a, (const T *)w, (T *)c, (int)m, (int)n, k,
            layout_flags<T>(a, w, c, n, k));
    }
};

} // namespace ktune_matmul_impl
