/* Launching a kernel with a cluster shape and dynamic shared memory, for every family. */
#pragma once

#include <cuda_runtime.h>

#include <atomic>

namespace ktune_launch {

/* A launch configuration, with the cluster dimension in *attr when the cluster holds more than
 * one block. */
inline cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, dim3 cluster, size_t smem,
                                        cudaStream_t s, cudaLaunchAttribute *attr)
{
    const bool clustered = cluster.x * cluster.y * cluster.z > 1;
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = cluster.x;
    attr->val.clusterDim.y = cluster.y;
    attr->val.clusterDim.z = cluster.z;
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = s;
    config.attrs = clustered ? attr : nullptr;
    config.numAttrs = clustered ? 1 : 0;
    return config;
}

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

/* Launches kernel on grid x block with cluster dimensions `cluster` (1x1x1: no cluster) and smem
 * bytes of dynamic shared memory. Sets the function attributes a launch needs first. A launch
 * error is returned and cleared, so that the next launch does not report it again. */
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, dim3 cluster, size_t smem,
                   cudaStream_t s, Args... args)
{
    const unsigned ctas = cluster.x * cluster.y * cluster.z;
    cudaError_t e = set_attributes(kernel, ctas, smem);
    if (e != cudaSuccess)
        return e;
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t config = launch_config(grid, block, cluster, smem, s, &attr);
    e = cudaLaunchKernelEx(&config, kernel, args...);
    if (e != cudaSuccess)
        cudaGetLastError();
    return e;
}

/* Launches kernel on grid x block with one launch attribute, no dynamic shared memory and no
 * cluster. A launch error is returned and cleared. */
template <typename... Params, typename... Args>
cudaError_t launch_with(cudaLaunchAttribute attr, void (*kernel)(Params...), dim3 grid, dim3 block,
                        cudaStream_t s, Args... args)
{
    cudaLaunchAttribute cluster;
    cudaLaunchConfig_t config = launch_config(grid, block, dim3(1, 1, 1), 0, s, &cluster);
    config.attrs = &attr;
    config.numAttrs = 1;
    const cudaError_t e = cudaLaunchKernelEx(&config, kernel, args...);
    if (e != cudaSuccess)
        cudaGetLastError();
    return e;
}

/* Launches kernel on grid x block after the stream's previous kernel as a programmatic
 * dependent launch: its blocks may start while that kernel's last blocks run, and must wait for
 * its memory (griddepcontrol.wait) before reading what it wrote. No dynamic shared memory, no
 * cluster. A launch error is returned and cleared. */
template <typename... Params, typename... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t s,
                             Args... args)
{
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    return launch_with(attr, kernel, grid, block, s, args...);
}

/* Launches kernel on grid x block as a cooperative grid: every block resident at once, so that
 * they may wait for each other at grid barriers (the launch fails where the device cannot hold
 * the grid). A launch error is returned and cleared. */
template <typename... Params, typename... Args>
cudaError_t launch_cooperative(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t s,
                               Args... args)
{
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeCooperative;
    attr.val.cooperative = 1;
    return launch_with(attr, kernel, grid, block, s, args...);
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
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t config = launch_config(cluster, block, cluster, smem, 0, &attr);
    return cudaOccupancyMaxActiveClusters(count, kernel, &config);
}

/* The grid of persistent Kernel, in clusters: `work` items, or as many clusters as the current
 * device holds at once if fewer (resident_clusters, asked once a device and kept, since it does
 * not change between calls). An error where the device cannot hold one cluster. */
template <auto Kernel>
cudaError_t persistent_grid(dim3 block, dim3 cluster, size_t smem, int64_t work, unsigned *grid)
{
    constexpr int max_devices = 64;
    static std::atomic<int> known[max_devices]; /* 0: not asked yet */
    int device = 0, resident = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess)
        return e;
    if (device < max_devices)
        resident = known[device].load(std::memory_order_relaxed);
    if (resident == 0) {
        e = resident_clusters(Kernel, block, cluster, smem, &resident);
        if (e != cudaSuccess)
            return e;
        if (resident < 1)
            return cudaErrorInvalidConfiguration;
        if (device < max_devices)
            known[device].store(resident, std::memory_order_relaxed);
    }
    *grid = (unsigned)(work < resident ? work : resident);
    return cudaSuccess;
}

} // namespace ktune_launch
