/* The thread-block cluster operations the kernels use, for every architecture a build targets.
 *
 * Clusters exist from sm_90 on. Code compiled for an older architecture still instantiates a
 * kernel's cluster shapes (every config is compiled for every architecture of the build), but the
 * spaces' constraints (cc >= 90 for a cluster of more than one block) never launch them there:
 * these operations trap if they are ever reached. */
#pragma once

#include <cooperative_groups.h>

namespace ktune_cluster {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define KTUNE_CLUSTER_UNAVAILABLE_ __trap()
#endif

/* This block's rank in its cluster. */
__device__ __forceinline__ unsigned rank()
{
#ifdef KTUNE_CLUSTER_UNAVAILABLE_
    KTUNE_CLUSTER_UNAVAILABLE_;
    return 0;
#else
    return cooperative_groups::this_cluster().block_rank();
#endif
}

/* A barrier of every thread of the cluster, with its shared memory writes visible after it. */
__device__ __forceinline__ void sync()
{
#ifdef KTUNE_CLUSTER_UNAVAILABLE_
    KTUNE_CLUSTER_UNAVAILABLE_;
#else
    cooperative_groups::this_cluster().sync();
#endif
}

/* sync() in two halves: arrive (release), then wait (acquire), with independent work between. */
__device__ __forceinline__ void arrive()
{
#ifdef KTUNE_CLUSTER_UNAVAILABLE_
    KTUNE_CLUSTER_UNAVAILABLE_;
#else
    __cluster_barrier_arrive();
#endif
}

__device__ __forceinline__ void wait()
{
#ifdef KTUNE_CLUSTER_UNAVAILABLE_
    KTUNE_CLUSTER_UNAVAILABLE_;
#else
    __cluster_barrier_wait();
#endif
}

/* The address of p's counterpart in the shared memory of the cluster's block `block`. */
template <typename T> __device__ __forceinline__ T *map(T *p, unsigned block)
{
#ifdef KTUNE_CLUSTER_UNAVAILABLE_
    (void)block;
    KTUNE_CLUSTER_UNAVAILABLE_;
    return p;
#else
    return cooperative_groups::this_cluster().map_shared_rank(p, block);
#endif
}

#undef KTUNE_CLUSTER_UNAVAILABLE_

/* A barrier of the cluster of BLOCKS blocks that split a tile, or of the block alone where
 * BLOCKS is 1. */
template <int BLOCKS> __device__ __forceinline__ void sync_split()
{
    if constexpr (BLOCKS > 1)
        sync();
    else
        __syncthreads();
}

/* p[i] summed over the shared memory of the cluster's BLOCKS blocks (block 0 first), or p[i]
 * itself where BLOCKS is 1: the partial sums (of type A) of a tile split over a cluster. */
template <int BLOCKS, typename A> __device__ __forceinline__ A sum_split(A *p, int i)
{
    if constexpr (BLOCKS == 1)
        return p[i];
    A s = 0;
#pragma unroll
    for (int q = 0; q < BLOCKS; q++)
        s += map(p, q)[i];
    return s;
}

/* Two neighbouring columns' partial sums of a tile (A: a 4-byte accumulator type), the unit in
 * which the blocks of a cluster that split a tile's k lay their sums out in shared memory: row r,
 * columns c and c + 1 of a tile BN wide at (r * BN + c) / 2. */
template <typename A> struct alignas(8) sum_pair {
    A x, y;
};

/* The pairs of a tile (PAIRS of them at `pairs` in every block's shared memory, each block's
 * partial sums) added up over the cluster's BLOCKS blocks (block 0 first), this block taking a
 * BLOCKS-th of them: store(i, sum) for each of its pairs i, the block's threads `thread` of
 * `threads` in turn. The cluster must have met after every block wrote its sums, and must meet
 * again before a block leaves or reuses them. */
template <int BLOCKS, int PAIRS, typename A, typename Store>
__device__ __forceinline__ void add_split_pairs(sum_pair<A> *pairs, int thread, int threads,
                                                Store store)
{
    const int split = (int)rank();
    const int begin = PAIRS * split / BLOCKS, end = PAIRS * (split + 1) / BLOCKS;
    for (int i = begin + thread; i < end; i += threads) {
        sum_pair<A> s = {};
#pragma unroll
        for (int q = 0; q < BLOCKS; q++) {
            const sum_pair<A> v = map(pairs, q)[i];
            s.x += v.x;
            s.y += v.y;
        }
        store(i, s);
    }
}

} // namespace ktune_cluster
