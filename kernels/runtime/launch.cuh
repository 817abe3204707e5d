/* Launching a kernel with a cluster shape and dynamic shared memory, for every family. */
#pragma once

#include <cuda_runtime.h>

namespace ktune_launch {

/* Launches kernel on grid x block with cluster dimensions `cluster` (1x1x1: no cluster) and smem
 * bytes of dynamic shared memory. Sets the function attributes a launch needs first: the dynamic
 * shared memory limit, and non-portable cluster sizes above 8. A launch error is returned and
 * cleared, so that the next launch does not report it again. */
/* The function attributes a launch of kernel needs: the dynamic shared memory limit, and
 * non-portable cluster sizes above 8. */
template <typename... Params>
cudaError_t set_attributes(void (*kernel)(Params...), unsigned ctas, size_t smem)
{
    cudaError_t e = cudaSuccess;
    if (smem > 0)
        e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e == cudaSuccess && ctas > 8)
        e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    return e;
}

template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, dim3 cluster, size_t smem,
                   cudaStream_t s, Args... args)
{
    const unsigned ctas = cluster.x * cluster.y * cluster.z;
    cudaError_t e = set_attributes(kernel, ctas, smem);
    if (e != cudaSuccess)
        return e;
    cudaLaunchConfig_t config = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = cluster.x;
    attr[0].val.clusterDim.y = cluster.y;
    attr[0].val.clusterDim.z = cluster.z;
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = s;
    config.attrs = ctas > 1 ? attr : nullptr;
    config.numAttrs = ctas > 1 ? 1 : 0;
    e = cudaLaunchKernelEx(&config, kernel, args...);
    if (e != cudaSuccess)
        cudaGetLastError();
    return e;
}

/* How many clusters of `cluster` blocks of `block` threads and smem bytes of dynamic shared memory
 * the current device holds at once (blocks when the cluster is one block): the grid of a
 * persistent kernel. */
template <typename... Params>
cudaError_t resident_clusters(void (*kernel)(Params...), dim3 block, dim3 cluster, size_t smem,
                              int *count)
{
    const unsigned ctas = cluster.x * cluster.y * cluster.z;
    cudaError_t e = set_attributes(kernel, ctas, smem);
    if (e != cudaSuccess)
        return e;
    if (ctas == 1) {
        int device = 0, sms = 0, per_sm = 0;
        e = cudaGetDevice(&device);
        if (e == cudaSuccess)
            e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
        if (e == cudaSuccess)
            e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &per_sm, kernel, (int)(block.x * block.y * block.z), smem);
        *count = sms * per_sm;
        return e;
    }
    cudaLaunchConfig_t config = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = cluster.x;
    attr[0].val.clusterDim.y = cluster.y;
    attr[0].val.clusterDim.z = cluster.z;
    config.gridDim = cluster;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.attrs = attr;
    config.numAttrs = 1;
    return cudaOccupancyMaxActiveClusters(count, kernel, &config);
}

} // namespace ktune_launch
