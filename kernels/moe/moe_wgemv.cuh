/* The wgemv variant (sm_90a): few rows an expert on wgmma, matmul's wgemv kernel
 * (matmul_wgemv.cuh) on the group tiles (moe_schedule.cuh) instead of one matrix's.
 *
 * A block (or a cluster of SPLIT blocks splitting k) takes one tile: BN rows of a group (wgmma's
 * N) by BM rows of its expert's W (the 64-row operand), W streamed by TMA through the ring. The
 * grid is the bound of the tiles (exact with one row tile a group); each warp finds the block's
 * tile from the offsets (group_locator), blocks past the tiles leave, and untouched experts are
 * never read. A is one TMA map of rows x k: a tile's box starts at its group's first row and may
 * reach into the next group's rows, whose products are never stored; W is one map of (groups x
 * n) x k, read past an expert's n only where n is not a multiple of BM (never stored either). */
#pragma once

#include "../matmul/matmul_wgemv.cuh"
#include "moe_decode.cuh"

namespace ktune_moe_impl {

template <int BM, int BN, int STAGES, int SPLIT> struct wgemv_launcher {
    template <typename T> static cudaError_t run(const problem &pb, cudaStream_t s)
    {
        using namespace ktune_matmul_impl;
        if (!KTUNE_SM90A) /* the kernel has no code in this build */
            return cudaErrorNotSupported;
        using tiles_t = group_locator<BN, BM>;
        const int64_t bound = tiles_bound(pb.rows, pb.n, pb.groups, BN, BM);
        if (bound < 0 || bound * SPLIT > INT32_MAX)
            return cudaErrorInvalidValue;
        CUtensorMap map_w, map_a;
        if (!tensor_map<T>(&map_w, pb.w, pb.groups * pb.n, pb.k, BM) ||
            !tensor_map<T>(&map_a, pb.a, pb.rows, pb.k, BN))
            return decode_launcher<16, 8, 4, 1, 1>::run<T>(pb, s);
        constexpr auto kernel = wgemv_kernel<T, BM, BN, STAGES, SPLIT, tiles_t>;
        constexpr size_t smem = wgemv_smem_bytes<BM, BN, STAGES>() + tiles_t::SMEM;
        const typename tiles_t::params where = {pb.offsets, (int)pb.groups, (int)pb.rows,
                                                (int)pb.n};
        return ktune_launch::launch(kernel, dim3((unsigned)bound, SPLIT), dim3(160),
                                    dim3(1, SPLIT, 1), smem, s, map_w, map_a, (T *)pb.c, where,
                                    (int)pb.n, (int)pb.k);
    }
};

} // namespace ktune_moe_impl
