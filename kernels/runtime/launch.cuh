/* Launching a kernel with a cluster shape and dynamic shared memory, for every family. */
#pragma once

#include <cuda_runtime.h>

namespace ktune_launch {

/* Launches kernel on grid x block with cluster dimensions `cluster` (1x1x1: no cluster) and smem
 * bytes of dynamic shared memory. Sets the function attributes a launch needs first: the dynamic
 * shared memory limit, and non-portable cluster sizes above 8. A launch error is returned and
 * cleared, so that the next launch does not report it again. */
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, dim3 cluster, size_t smem,
                   cudaStream_t s, Args... args)
{
    const unsigned ctas = cluster.x * cluster.y * cluster.z;
    cudaError_t e = cudaSuccess;
    if (smem > 0)
        e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e == cudaSuccess && ctas > 8)
        e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
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

} // namespace ktune_launch
