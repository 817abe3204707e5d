/* Launching a kernel with a cluster shape and dynamic shared memory, for every family; and
 * overlapping a launch with the stream's previous kernel. */
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <stdlib.h>
#include <string.h>

namespace ktune_launch {

/* Overlapped launches. A kernel launched by launch_overlapped is a programmatic dependent launch
 * of the stream's previous kernel: its blocks may become resident while that kernel's last blocks
 * run, and so hide the gap between two kernels (the launch, the blocks' placement, their set-up).
 * Its contract: every thread calls wait_previous() before its first access to global memory
 * (reads, since the previous kernel may write what this one reads; writes, since it may read what
 * this one writes). A kernel may call release_next() once its blocks have issued the loads of
 * their main loop, which lets the stream's next kernel, if it is launched the same way, start its
 * blocks as this one's finish (without it, the next kernel starts as this one's blocks exit). Both
 * are no-ops in a kernel launched otherwise. */
__device__ __forceinline__ void wait_previous()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void release_next()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

constexpr int max_devices = 64;

/* *value for the current device: what known holds for it, else what ask(device, value) gives,
 * kept in known where that succeeds with a positive value (0 is "not asked yet"; a device past
 * max_devices is asked every time). Each caller keeps its own known, as a function's static. */
template <typename Ask>
cudaError_t asked_once(std::atomic<int> (&known)[max_devices], Ask ask, int *value)
{
    int device = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess)
        return e;
    const bool kept = device >= 0 && device < max_devices;
    *value = kept ? known[device].load(std::memory_order_relaxed) : 0;
    if (*value > 0)
        return cudaSuccess;
    e = ask(device, value);
    if (e == cudaSuccess && *value > 0 && kept)
        known[device].store(*value, std::memory_order_relaxed);
    return e;
}

/* Device attribute A of the current device (asked once a device). */
template <cudaDeviceAttr A> cudaError_t attribute_once(int *value)
{
    static std::atomic<int> known[max_devices];
    return asked_once(
        known, [](int device, int *v) { return cudaDeviceGetAttribute(v, A, device); }, value);
}

/* Whether launches on the current device overlap: compute capability 9.0 or later (earlier ones
 * have no programmatic dependent launch), and KTUNE_OVERLAP not "0" in the environment (read
 * once a process). */
inline bool overlap_allowed()
{
    static const bool disabled = [] {
        const char *v = getenv("KTUNE_OVERLAP");
        return v && strcmp(v, "0") == 0;
    }();
    int major = 0;
    if (disabled)
        return false;
    if (attribute_once<cudaDevAttrComputeCapabilityMajor>(&major) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return major >= 9;
}

/* The current device's multiprocessor count (asked once a device). */
inline cudaError_t multiprocessors(int *count)
{
    return attribute_once<cudaDevAttrMultiProcessorCount>(count);
}

/* The current device's L2 cache, bytes (asked once a device). */
inline cudaError_t l2_bytes(int *bytes)
{
    return attribute_once<cudaDevAttrL2CacheSize>(bytes);
}

/* A launch configuration: the cluster dimension where the cluster holds more than one block,
 * then the `extras` attributes at extra, in attrs[3] (at most two extras). */
inline cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, dim3 cluster, size_t smem,
                                        cudaStream_t s, cudaLaunchAttribute (&attrs)[3],
                                        const cudaLaunchAttribute *extra = nullptr,
                                        int extras = 0)
{
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = s;
    config.attrs = attrs;
    config.numAttrs = 0;
    if (cluster.x * cluster.y * cluster.z > 1) {
        cudaLaunchAttribute &a = attrs[config.numAttrs++];
        a = {};
        a.id = cudaLaunchAttributeClusterDimension;
        a.val.clusterDim.x = cluster.x;
        a.val.clusterDim.y = cluster.y;
        a.val.clusterDim.z = cluster.z;
    }
    for (int i = 0; i < extras && i < 2; i++)
        attrs[config.numAttrs++] = extra[i];
    return config;
}

/* The attribute of an overlapped launch. */
inline cudaLaunchAttribute overlap_attribute()
{
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    return attr;
}

/* The attribute of a cooperative launch. */
inline cudaLaunchAttribute cooperative_attribute()
{
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeCooperative;
    attr.val.cooperative = 1;
    return attr;
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

/* Launches kernel on grid x block with cluster dimensions `cluster` (1x1x1: no cluster), smem
 * bytes of dynamic shared memory and the `extras` launch attributes at extra (at most two). Sets
 * the function attributes a launch needs first. A launch error is returned and cleared, so that
 * the next launch does not report it again. */
template <typename... Params, typename... Args>
cudaError_t launch_attributed(const cudaLaunchAttribute *extra, int extras,
                              void (*kernel)(Params...), dim3 grid, dim3 block, dim3 cluster,
                              size_t smem, cudaStream_t s, Args... args)
{
    const unsigned ctas = cluster.x * cluster.y * cluster.z;
    cudaError_t e = set_attributes(kernel, ctas, smem);
    if (e != cudaSuccess)
        return e;
    cudaLaunchAttribute attrs[3];
    const cudaLaunchConfig_t config =
        launch_config(grid, block, cluster, smem, s, attrs, extra, extras);
    e = cudaLaunchKernelEx(&config, kernel, args...);
    if (e != cudaSuccess)
        cudaGetLastError();
    return e;
}

/* As launch_attributed, with no other attribute. */
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, dim3 cluster, size_t smem,
                   cudaStream_t s, Args... args)
{
    return launch_attributed(nullptr, 0, kernel, grid, block, cluster, smem, s, args...);
}

/* As launch, overlapped with the stream's previous kernel where the device allows it
 * (overlap_allowed): kernel keeps the contract of wait_previous and release_next. */
template <typename... Params, typename... Args>
cudaError_t launch_overlapped(void (*kernel)(Params...), dim3 grid, dim3 block, dim3 cluster,
                              size_t smem, cudaStream_t s, Args... args)
{
    const cudaLaunchAttribute attr = overlap_attribute();
    return launch_attributed(&attr, overlap_allowed() ? 1 : 0, kernel, grid, block, cluster, smem,
                             s, args...);
}

/* Launches kernel on grid x block with smem bytes of dynamic shared memory as a cooperative grid:
 * every block resident at once, so that they may wait for each other at grid barriers (the launch
 * fails where the device cannot hold the grid). A launch error is returned and cleared. */
template <typename... Params, typename... Args>
cudaError_t launch_cooperative(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                               cudaStream_t s, Args... args)
{
    const cudaLaunchAttribute attr = cooperative_attribute();
    return launch_attributed(&attr, 1, kernel, grid, block, dim3(1, 1, 1), smem, s, args...);
}

/* As launch_cooperative, overlapped with the stream's previous kernel where the device allows it
 * (overlap_allowed): kernel keeps the contract of wait_previous and release_next. Where the
 * driver refuses the two attributes on one launch and takes the cooperative one alone, the
 * refusal is kept for the device (as a function's static, a kernel's own) and its launches are
 * cooperative only from then on. */
template <typename... Params, typename... Args>
cudaError_t launch_cooperative_overlapped(void (*kernel)(Params...), dim3 grid, dim3 block,
                                          size_t smem, cudaStream_t s, Args... args)
{
    static std::atomic<int> refused[max_devices];
    int device = 0;
    bool overlap = overlap_allowed() && cudaGetDevice(&device) == cudaSuccess;
    const bool kept = device >= 0 && device < max_devices;
    if (overlap && kept && refused[device].load(std::memory_order_relaxed))
        overlap = false;
    if (!overlap)
        return launch_cooperative(kernel, grid, block, smem, s, args...);
    const cudaLaunchAttribute both[2] = {cooperative_attribute(), overlap_attribute()};
    if (launch_attributed(both, 2, kernel, grid, block, dim3(1, 1, 1), smem, s, args...) ==
        cudaSuccess)
        return cudaSuccess;
    const cudaError_t e = launch_cooperative(kernel, grid, block, smem, s, args...);
    if (e == cudaSuccess && kept)
        refused[device].store(1, std::memory_order_relaxed);
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
    cudaLaunchAttribute attrs[3];
    const cudaLaunchConfig_t config = launch_config(cluster, block, cluster, smem, 0, attrs);
    return cudaOccupancyMaxActiveClusters(count, kernel, &config);
}

/* The grid of persistent Kernel, in clusters: `work` items, or as many clusters as the current
 * device holds at once if fewer (resident_clusters, asked once a device and kept, since it does
 * not change between calls). An error where the device cannot hold one cluster. */
template <auto Kernel>
cudaError_t persistent_grid(dim3 block, dim3 cluster, size_t smem, int64_t work, unsigned *grid)
{
    static std::atomic<int> known[max_devices]; /* clusters resident at once */
    int resident = 0;
    const cudaError_t e = asked_once(
        known, [&](int, int *r) { return resident_clusters(Kernel, block, cluster, smem, r); },
        &resident);
    if (e != cudaSuccess)
        return e;
    if (resident < 1)
        return cudaErrorInvalidConfiguration;
    *grid = (unsigned)(work < resident ? work : resident);
    return cudaSuccess;
}

/* Launches persistent Kernel (no cluster) on the grid persistent_grid gives for `work` items. */
template <auto Kernel, typename... Args>
cudaError_t launch_persistent(dim3 block, size_t smem, int64_t work, cudaStream_t s, Args... args)
{
    unsigned grid;
    const cudaError_t e = persistent_grid<Kernel>(block, dim3(1, 1, 1), smem, work, &grid);
    if (e != cudaSuccess)
        return e;
    return launch(Kernel, dim3(grid), block, dim3(1, 1, 1), smem, s, args...);
}

} // namespace ktune_launch
