/* The moe kernels' device-side tile schedulers: the tiles of every group of a grouped GEMM, found
 * from the group offsets on the device, so that a launch needs no host sync. Both read the groups
 * + 1 offsets clamped to [0, rows] and made nondecreasing (their running maximum), count each
 * group's tiles, ceil(rows of g / TILE_ROWS) x ceil(n / TILE_COLS), none for an empty group, and
 * order a group's tiles column by column (all row tiles of one column of W in a row), so that
 * blocks running at the same time share the group's rows of A and a column of W in L2.
 *
 * group_tiles<TILE_ROWS, TILE_COLS>, for persistent kernels that walk many tiles, is a Tiles
 * policy of ktune_matmul_impl::wgmma_kernel (see dense_tiles there), and the mma kernel walks it
 * the same way. prepare() (warp 0) keeps the offsets in shared memory and first[g], the tiles
 * before group g (first[groups] their total), both by warp scans over chunks of the groups, so
 * the work is groups / 32 steps a lane; at(tile) finds the tile's group by binary search over
 * first.
 *
 * group_locator<TILE_ROWS, TILE_COLS>, for kernels of one tile a block (decode, dot, wgemv), finds
 * a single tile in registers, each warp on its own: no shared memory and no barrier of the block
 * between the offsets' arrival and the block's first loads of W, which is what a block of a
 * bandwidth-bound launch waits for. */
#pragma once

#include "../matmul/matmul_wgmma.cuh"
#include "ktune/moe.h"

namespace ktune_moe_impl {

using ktune_matmul_impl::tile_place;

/* The tiles of R rows that r >= 1 rows take: ceil(r / R), written so that it cannot overflow for
 * any r up to INT32_MAX (hostile offsets are clamped to the rows, which may be that many). */
template <int R> __device__ __forceinline__ int row_tiles(int r) { return (r - 1) / R + 1; }

template <int TILE_ROWS, int TILE_COLS> struct group_tiles {
    struct params {
        const int32_t *offsets; /* groups + 1, on the device */
        int groups, rows, n;
    };
    static constexpr size_t SMEM = 2 * (KTUNE_MOE_MAX_GROUPS + 1) * sizeof(int);
    params p;
    int *off;   /* groups + 1 offsets, clamped and nondecreasing */
    int *first; /* groups + 1: the tiles before each group, then the total */
    int tiles_n;

    __device__ __forceinline__ group_tiles(const params &where, void *smem)
        : p(where), off(static_cast<int *>(smem)), first(off + KTUNE_MOE_MAX_GROUPS + 1),
          tiles_n((where.n + TILE_COLS - 1) / TILE_COLS)
    {
    }

    __device__ __forceinline__ int group_count(int g) const
    {
        const int r = off[g + 1] - off[g];
        return r > 0 ? row_tiles<TILE_ROWS>(r) * tiles_n : 0;
    }

    __device__ void prepare() const
    {
        if (threadIdx.x >= 32)
            return;
        const int lane = threadIdx.x, groups = p.groups, per = (groups + 32) / 32;
        /* the offsets, clamped, read in strides of the warp so that up to 128 of them are in
         * flight at once (the first tile's loads wait for them); then their running maximum */
        for (int base = 0; base <= groups; base += 128) {
            int v[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int i = base + 32 * j + lane;
                v[j] = i <= groups ? __ldg(p.offsets + i) : 0;
            }
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int i = base + 32 * j + lane;
                if (i <= groups)
                    off[i] = min(max(v[j], 0), p.rows);
            }
        }
        __syncwarp();
        const int lo = min(lane * per, groups + 1), hi = min(lo + per, groups + 1);
        int most = 0;
        for (int i = lo; i < hi; i++)
            most = max(most, off[i]);
        for (int d = 1; d < 32; d <<= 1) {
            const int o = __shfl_up_sync(0xffffffffu, most, d);
            if (lane >= d)
                most = max(most, o);
        }
        int run = __shfl_up_sync(0xffffffffu, most, 1);
        if (lane == 0)
            run = 0;
        for (int i = lo; i < hi; i++) {
            run = max(run, off[i]);
            off[i] = run;
        }
        __syncwarp();
        /* each group's tiles, then the sum of those before it */
        const int glo = min(lane * per, groups), ghi = min(glo + per, groups);
        int sum = 0;
        for (int g = glo; g < ghi; g++)
            sum += group_count(g);
        int upto = sum;
        for (int d = 1; d < 32; d <<= 1) {
            const int o = __shfl_up_sync(0xffffffffu, upto, d);
            if (lane >= d)
                upto += o;
        }
        int base = upto - sum;
        for (int g = glo; g < ghi; g++) {
            first[g] = base;
            base += group_count(g);
        }
        if (lane == 31)
            first[groups] = upto;
    }

    __device__ __forceinline__ int count() const { return first[p.groups]; }

    __device__ __forceinline__ tile_place at(int tile) const
    {
        int lo = 0, hi = p.groups; /* the last group whose tiles start at or before tile */
        while (hi - lo > 1) {
            const int mid = (lo + hi) / 2;
            if (first[mid] <= tile)
                lo = mid;
            else
                hi = mid;
        }
        const int g = lo, tiles_m = row_tiles<TILE_ROWS>(off[g + 1] - off[g]); /* g holds tile */
        const int local = tile - first[g], tm = local % tiles_m, tn = local / tiles_m;
        return {off[g] + tm * TILE_ROWS, off[g + 1], g * p.n + tn * TILE_COLS, tn * TILE_COLS};
    }
};

/* One tile a block: locate(tile, at) gives where tile lies in group_tiles' order, or false past the
 * tiles, from the offsets in global memory. Called by every thread of a warp (it shuffles); each
 * warp reads the offsets itself, 128 a round with a load a lane in flight for each 32, and takes
 * their running maximum and the prefix sum of the groups' tiles by shuffles, 32 groups at a time,
 * stopping at the tile's group. */
template <int TILE_ROWS, int TILE_COLS> struct group_locator {
    using params = typename group_tiles<TILE_ROWS, TILE_COLS>::params;
    static constexpr size_t SMEM = 0;
    params p;
    __device__ __forceinline__ group_locator(const params &where, void *) : p(where) {}
    __device__ __forceinline__ void prepare() const {}

    __device__ __forceinline__ bool locate(int tile, tile_place &at) const
    {
        constexpr unsigned ALL = 0xffffffffu;
        constexpr int CHUNKS = 4;
        const int lane = threadIdx.x & 31, tiles_n = (p.n + TILE_COLS - 1) / TILE_COLS;
        int most = 0, before = 0; /* the offsets' maximum and the tiles of the groups so far */
        for (int base = 0; base < p.groups; base += 32 * CHUNKS) {
            /* offset base + 32 j + lane, clamped; [CHUNKS], lane 0's: the next round's first */
            int off[CHUNKS + 1];
#pragma unroll
            for (int j = 0; j <= CHUNKS; j++) {
                const int i = base + 32 * j + lane;
                off[j] = i <= p.groups && (j < CHUNKS || lane == 0)
                             ? min(max(__ldg(p.offsets + i), 0), p.rows)
                             : p.rows;
            }
            /* a chunk at a time, so that a tile of the first chunks is found without the
             * shuffles of the others */
#pragma unroll
            for (int j = 0; j < CHUNKS; j++) {
                int start = off[j]; /* the running maximum up to this group's first offset */
#pragma unroll
                for (int d = 1; d < 32; d <<= 1) {
                    const int o = __shfl_up_sync(ALL, start, d);
                    if (lane >= d)
                        start = max(start, o);
                }
                start = max(start, most);
                most = __shfl_sync(ALL, start, 31);
                int end = __shfl_down_sync(ALL, start, 1);
                const int next_first = __shfl_sync(ALL, off[j + 1], 0);
                if (lane == 31)
                    end = max(next_first, most);
                const int g = base + 32 * j + lane, r = g < p.groups ? end - start : 0;
                const int tiles = r > 0 ? row_tiles<TILE_ROWS>(r) * tiles_n : 0;
                int upto = tiles; /* the tiles up to this group's end */
#pragma unroll
                for (int d = 1; d < 32; d <<= 1) {
                    const int o = __shfl_up_sync(ALL, upto, d);
                    if (lane >= d)
                        upto += o;
                }
                upto += before;
                before = __shfl_sync(ALL, upto, 31);
                const unsigned hit = __ballot_sync(ALL, upto > tile);
                if (hit) { /* the first group whose tiles reach past tile */
                    const int src = __ffs(hit) - 1;
                    const int lo = __shfl_sync(ALL, start, src), hi = __shfl_sync(ALL, end, src);
                    const int first = __shfl_sync(ALL, upto - tiles, src);
                    const int tiles_m = row_tiles<TILE_ROWS>(hi - lo), local = tile - first;
                    const int tm = local % tiles_m, tn = local / tiles_m;
                    at = {lo + tm * TILE_ROWS, hi, (base + 32 * j + src) * p.n + tn * TILE_COLS,
                          tn * TILE_COLS};
                    return true;
                }
            }
        }
        return false;
    }
};

/* An upper bound of the tiles of rows rows in groups groups, -1 where it is beyond int (a kernel
 * counts tiles in int). At most t = min(rows, groups) groups hold rows, and the row tiles of
 * group g are ceil(r_g / R) <= (r_g + R - 1) / R, so all of them are at most (rows + t (R - 1))
 * / R, rounded down since their count is whole: exact for one row tile a group (decode), where
 * the grid is the bound. */
inline int64_t tiles_bound(int64_t rows, int64_t n, int64_t groups, int tile_rows, int tile_cols)
{
    const int64_t touched = groups < rows ? groups : rows;
    const int64_t bound =
        (rows + touched * (tile_rows - 1)) / tile_rows * ((n + tile_cols - 1) / tile_cols);
    return bound > INT32_MAX ? -1 : bound;
}

} // namespace ktune_moe_impl
