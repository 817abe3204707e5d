/* The mma variant: a tensor-core grouped GEMM on mma.sync for any architecture (sm_80 on).
 *
 * Persistent blocks walk the group tiles (moe_schedule.cuh) of BM rows of a group by BN columns;
 * a tile is matmul's mma tile (matmul_mma.cuh: a cp.async ring of swizzled shared memory,
 * ldmatrix fragments, m16n8k16), its rows of A bounded by the group's end and its rows of W those
 * of the group's expert. */
#pragma once

#include "../matmul/matmul_mma.cuh"
#include "moe_common.cuh"

namespace ktune_moe_impl {

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES>
__global__ void __launch_bounds__(WM *WN * 32)
    mma_kernel(const T *__restrict__ a, const T *__restrict__ w, T *__restrict__ c,
               const typename group_tiles<BM, BN>::params where, int64_t k, int flags)
{
    using P = ktune_matmul_impl::mma_policy<T>;
    constexpr size_t RING = ktune_matmul_impl::mma_smem_bytes<BM, BN, BK, STAGES, 1>();
    extern __shared__ __align__(128) unsigned char smem[];
    const group_tiles<BM, BN> order(where, smem + RING);
    order.prepare();
    __syncthreads();
    const int tiles = order.count(), n = where.n;
    const int64_t ktiles = (k + BK - 1) / BK;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const tile_place at = order.at(tile);
        float acc[BM / WM / 16][BN / WN / 8][4] = {};
        ktune_matmul_impl::mma_accumulate<P, BM, BN, BK, WM, WN, STAGES>(
            a, w + (int64_t)(at.w_row0 - at.col0) * k, at.row0, at.row_end, at.col0, n, k, 0,
            ktiles, flags & ktune_matmul_impl::VEC_LOADS, smem, acc);
        ktune_matmul_impl::mma_store<P, BM, BN, WM, WN>(typename P::out{c}, at.row0, at.row_end,
                                                        at.col0, n, flags, acc);
        __syncthreads(); /* the next tile's first loads reuse the ring */
    }
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES> struct mma_launcher {
    template <typename T> static cudaError_t run(const problem &pb, cudaStream_t s)
    {
        using tiles_t = group_tiles<BM, BN>;
        const int64_t bound = tiles_bound(pb.rows, pb.n, pb.groups, BM, BN);
        if (bound < 0)
            return cudaErrorInvalidValue;
        constexpr auto kernel = mma_kernel<T, BM, BN, BK, WM, WN, STAGES>;
        constexpr size_t smem =
            ktune_matmul_impl::mma_smem_bytes<BM, BN, BK, STAGES, 1>() + tiles_t::SMEM;
        unsigned grid;
        cudaError_t e = ktune_launch::persistent_grid<kernel>(dim3(WM * WN * 32), dim3(1, 1, 1),
                                                              smem, bound, &grid);
        if (e != cudaSuccess)
            return e;
        const typename tiles_t::params where = {pb.offsets, (int)pb.groups, (int)pb.rows,
                                                (int)pb.n};
        return ktune_launch::launch(
            kernel, dim3(grid), dim3(WM * WN * 32), dim3(1, 1, 1), smem, s, (const T *)pb.a,
            (const T *)pb.w, (T *)pb.c, where, pb.k,
            ktune_matmul_impl::layout_flags<T>(pb.a, pb.w, pb.c, pb.n, pb.k));
    }
};

} // namespace ktune_moe_impl
