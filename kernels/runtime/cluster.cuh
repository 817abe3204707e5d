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
 * itself where BLOCKS is 1: the partial sums of a tile split over a cluster. */
template <int BLOCKS> __device__ __forceinline__ float sum_split(float *p, int i)
{
    if constexpr (BLOCKS == 1)
        return p[i];
    float s = 0;
#pragma unroll
    for (int q = 0; q < BLOCKS; q++)
        s += map(p, q)[i];
    return s;
}

} // namespace ktune_cluster
