/* The wgmma variant (sm_90a): matmul's warp-specialized persistent GEMM (matmul_wgmma.cuh: a TMA
 * producer warpgroup, wgmma consumer warpgroups on a ring of swizzled shared memory, stores
 * through TMA) walking the group tiles (moe_schedule.cuh) instead of one matrix's.
 *
 * A is one TMA map of rows x k: a tile's box starts at its group's row and may reach into the
 * next group's rows, whose products are never stored. W is one map of (groups x n) x k: a tile
 * reads rows g * n + its columns, past n into the next expert only where n is not a multiple of
 * BN (again never stored). A 64-row piece of C wholly inside its group is stored by TMA; a piece
 * that crosses the group's end is stored from registers, so that it never writes the next
 * group's rows. */
#pragma once

#include "moe_mma.cuh"

namespace ktune_moe_impl {

template <int BM, int BN, int CONSUMERS, int STAGES> struct wgmma_launcher {
    template <typename T> static cudaError_t run(const problem &pb, cudaStream_t s)
    {
        using namespace ktune_matmul_impl;
        if (!KTUNE_SM90A) /* the kernel has no code in this build */
            return cudaErrorNotSupported;
        using tiles_t = group_tiles<BM, BN>;
        const int64_t bound = tiles_bound(pb.rows, pb.n, pb.groups, BM, BN);
        if (bound < 0)
            return cudaErrorInvalidValue;
        CUtensorMap map_a, map_w, map_c;
        if (!tensor_map<T>(&map_a, pb.a, pb.rows, pb.k, BM) ||
            !tensor_map<T>(&map_w, pb.w, pb.groups * pb.n, pb.k, BN))
            return ktune_moe_impl::mma_launcher<128, 128, 32, 2, 2, 4>::run<T>(pb, s);
        const int flags = with_tma_stores<T>(layout_flags<T>(pb.a, pb.w, pb.c, pb.n, pb.k), &map_c,
                                             pb.c, pb.rows, pb.n, 64, map_a);
        constexpr auto kernel = wgmma_kernel<T, BM, BN, CONSUMERS, STAGES, tiles_t>;
        const dim3 block((CONSUMERS + 1) * 128);
        constexpr size_t smem = wgmma_smem_bytes<BM, BN, CONSUMERS, STAGES>() + tiles_t::SMEM;
        const typename tiles_t::params where = {pb.offsets, (int)pb.groups, (int)pb.rows,
                                                (int)pb.n};
        return ktune_launch::launch_persistent<kernel>(block, smem, bound, s, map_a, map_w, map_c,
                                                       (T *)pb.c, where, (int)pb.rows, (int)pb.n,
                                                       (int)pb.k, flags);
    }
};

} // namespace ktune_moe_impl
