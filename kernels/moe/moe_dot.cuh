/* The dot variant: a row or a few of each touched expert, bound by streaming each touched
 * expert's weight once, on CUDA cores: matmul's dot kernel (matmul_dot.cuh) on the group tiles.
 *
 * A block takes one tile of at most MROWS rows of a group by WARPS * ROWS consecutive rows of its
 * expert's W (found by group_locator from the offsets, each warp on its own); each warp reads
 * ROWS of those rows of W in turn, each from start to end, and multiplies it by the tile's rows
 * of A. The grid is the bound of the tiles (exact where a group's rows fit one tile, the
 * variant's case); blocks past the tiles leave at once, and untouched experts are never read. */
#pragma once

#include "../matmul/matmul_dot.cuh"
#include "moe_common.cuh"

namespace ktune_moe_impl {

template <typename T, int WARPS, int ROWS, int UNROLL, int MROWS>
__global__ void __launch_bounds__(WARPS * 32, ktune_matmul_impl::DOT_MIN_BLOCKS / WARPS)
    dot_kernel(const T *__restrict__ a, const T *__restrict__ w, T *__restrict__ c,
               const typename group_locator<MROWS, WARPS * ROWS>::params where, int64_t k,
               int flags)
{
    const group_locator<MROWS, WARPS * ROWS> order(where, nullptr);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n = where.n;
    ktune_launch::wait_previous();
    tile_place at;
    if (!order.locate((int)blockIdx.x, at))
        return;
    const int m = min(at.row_end - at.row0, MROWS);
    const T *const rows_a = a + (int64_t)at.row0 * k;
    const T *const expert = w + (int64_t)(at.w_row0 - at.col0) * k; /* its row 0 */
#pragma unroll 1
    for (int i = 0; i < ROWS; i++) {
        const int col = at.col0 + i * WARPS + warp;
        if (col >= n)
            break;
        float sum[MROWS];
        ktune_matmul_impl::dot_row<T, MROWS, UNROLL>(rows_a, expert + (int64_t)col * k, m, k,
                                                     flags & ktune_matmul_impl::VEC_LOADS, sum);
#pragma unroll
        for (int r = 0; r < MROWS; r++)
            if (lane == 0 && r < m)
                c[(int64_t)(at.row0 + r) * n + col] = ktune_matmul_impl::to_out<T>(sum[r]);
    }
    ktune_launch::release_next();
}

template <int WARPS, int ROWS, int UNROLL, int MROWS> struct dot_launcher {
    template <typename T> static cudaError_t run(const problem &pb, cudaStream_t s)
    {
        using tiles_t = group_locator<MROWS, WARPS * ROWS>;
        const int64_t bound = tiles_bound(pb.rows, pb.n, pb.groups, MROWS, WARPS * ROWS);
        if (bound < 0)
            return cudaErrorInvalidValue;
        const typename tiles_t::params where = {pb.offsets, (int)pb.groups, (int)pb.rows,
                                                (int)pb.n};
        return ktune_launch::launch_overlapped(
            dot_kernel<T, WARPS, ROWS, UNROLL, MROWS>, dim3((unsigned)bound), dim3(WARPS * 32),
            dim3(1, 1, 1), 0, s, (const T *)pb.a, (const T *)pb.w, (T *)pb.c, where, pb.k,
            ktune_matmul_impl::layout_flags<T>(pb.a, pb.w, pb.c, pb.n, pb.k));
    }
};

} // namespace ktune_moe_impl
