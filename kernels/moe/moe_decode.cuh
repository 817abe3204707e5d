/* The decode variant: few rows an expert, bound by streaming each touched expert's weight once.
 *
 * A block (or a cluster of SPLIT blocks) takes one of the group tiles (moe_schedule.cuh) of
 * MTILES * 8 rows of a group by ROWS rows of its expert's W; empty groups have no tiles, so an
 * untouched expert is never read. The grid is the launcher's bound of the tiles (exact with one
 * row tile a group, the variant's case): blocks past the tiles the offsets give leave at once.
 * Each warp finds the block's tile itself (group_locator), so that its loads of W start as soon
 * as the offsets arrive.
 * Not persistent: a block holding one tile needs no registers for a loop over tiles, so as many
 * blocks stay resident as matmul's GEMV of the same tile, and the GPU starts the next block where
 * one ends rather than a block starting its second tile only after draining its first.
 * A tile is matmul's GEMV (matmul_gemv.cuh): tensor cores on C^T = W A^T with the weight's
 * fragments loaded straight from global memory past L1, k split over the WARPS warps of the block
 * (UNROLL groups of 32 k a warp in flight), the warps' sums added in shared memory. With SPLIT > 1
 * a cluster of SPLIT blocks takes each tile, each block a contiguous share of k, and the blocks'
 * sums meet through distributed shared memory, each block storing a share of the tile: few
 * touched experts still keep every SM streaming. */
#pragma once

#include "../matmul/matmul_gemv.cuh"
#include "moe_common.cuh"

namespace ktune_moe_impl {

template <typename T, int ROWS, int WARPS, int UNROLL, int MTILES, int SPLIT>
__global__ void __launch_bounds__(WARPS * 32)
    decode_kernel(const T *__restrict__ a, const T *__restrict__ w, T *__restrict__ c,
                  const typename group_locator<MTILES * 8, ROWS>::params where, int64_t k,
                  int flags)
{
    constexpr int TILE = ROWS * MTILES * 8; /* floats of a tile of C^T, stored [row of C][col] */
    __shared__ float red[(WARPS + 1) * TILE];
    const group_locator<MTILES * 8, ROWS> order(where, nullptr);
    const int n = where.n;
    const int split = SPLIT > 1 ? (int)ktune_cluster::rank() : 0;
    const int64_t kgroups = (k + 31) / 32;
    const int64_t g_begin = kgroups * split / SPLIT, g_end = kgroups * (split + 1) / SPLIT;
    const int begin = TILE * split / SPLIT, end = TILE * (split + 1) / SPLIT;
    float *const part = red + WARPS * TILE;
    ktune_launch::wait_previous();
    /* clusters are SPLIT consecutive blocks, which share a tile and leave together */
    tile_place at;
    if (!order.locate((int)blockIdx.x / SPLIT, at))
        return;
    const int m = min(at.row_end - at.row0, MTILES * 8);
    float acc[ROWS / 16][MTILES][4] = {};
    ktune_matmul_impl::gemv_accumulate<T, ROWS, WARPS, UNROLL, MTILES>(
        a + (int64_t)at.row0 * k, w + (int64_t)(at.w_row0 - at.col0) * k, m, at.col0, n, k,
        g_begin, g_end, flags & ktune_matmul_impl::VEC_LOADS, acc);
    ktune_launch::release_next();
    ktune_matmul_impl::gemv_reduce<ROWS, WARPS, MTILES>(acc, red, part);
    ktune_cluster::sync_split<SPLIT>();
    for (int i = begin + threadIdx.x; i < end; i += WARPS * 32) {
        const int row = i / ROWS, col = at.col0 + i % ROWS;
        const float sum = ktune_cluster::sum_split<SPLIT>(part, i);
        if (row < m && col < n)
            c[(int64_t)(at.row0 + row) * n + col] = ktune_matmul_impl::to_out<T>(sum);
    }
    /* the others' shared memory stays until every block of the cluster has read it */
    ktune_cluster::sync_split<SPLIT>();
}

template <int ROWS, int WARPS, int UNROLL, int MTILES, int SPLIT> struct decode_launcher {
    template <typename T> static cudaError_t run(const problem &pb, cudaStream_t s)
    {
        using tiles_t = group_locator<MTILES * 8, ROWS>;
        const int64_t bound = tiles_bound(pb.rows, pb.n, pb.groups, MTILES * 8, ROWS);
        if (bound < 0)
            return cudaErrorInvalidValue;
        constexpr auto kernel = decode_kernel<T, ROWS, WARPS, UNROLL, MTILES, SPLIT>;
        if (bound * SPLIT > INT32_MAX)
            return cudaErrorInvalidValue;
        const typename tiles_t::params where = {pb.offsets, (int)pb.groups, (int)pb.rows,
                                                (int)pb.n};
        return ktune_launch::launch_overlapped(
            kernel, dim3((unsigned)(bound * SPLIT)), dim3(WARPS * 32), dim3(SPLIT, 1, 1), 0, s,
            (const T *)pb.a, (const T *)pb.w, (T *)pb.c, where, pb.k,
            ktune_matmul_impl::layout_flags<T>(pb.a, pb.w, pb.c, pb.n, pb.k));
    }
};

} // namespace ktune_moe_impl
