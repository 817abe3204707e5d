/* How the generated instance files define one softmax configuration: a launch function a config,
 * named by the generator, with the config's parameters as template arguments. */
#pragma once

#include "softmax_kernels.cuh"

typedef cudaError_t ktune__softmax_launch_t(const void *x, void *y, int64_t rows, int64_t cols,
                                           int dtype, cudaStream_t stream);

#define KTUNE_SOFTMAX_DEFINE_(fn, ...)                                                             \
    extern "C" cudaError_t fn(const void *x, void *y, int64_t rows, int64_t cols, int dtype,       \
                              cudaStream_t stream)                                                 \
    {                                                                                              \
        return ktune_softmax_impl::dispatch<__VA_ARGS__>(x, y, rows, cols, dtype, stream);         \
    }

#define KTUNE_SOFTMAX_DEFINE_VEC(fn, vec, iters, warps)                                            \
    KTUNE_SOFTMAX_DEFINE_(fn, ktune_softmax_impl::vec_launcher<vec, iters, warps>)
#define KTUNE_SOFTMAX_DEFINE_BLOCK(fn, threads, vec, iters)                                        \
    KTUNE_SOFTMAX_DEFINE_(fn, ktune_softmax_impl::block_launcher<threads, vec, iters>)
#define KTUNE_SOFTMAX_DEFINE_ONLINE(fn, threads, vec, unroll, per_sm)                              \
    KTUNE_SOFTMAX_DEFINE_(fn, ktune_softmax_impl::online_launcher<threads, vec, unroll, per_sm>)
#define KTUNE_SOFTMAX_DEFINE_CLUSTER(fn, ctas, threads, vec, iters)                                \
    KTUNE_SOFTMAX_DEFINE_(fn, ktune_softmax_impl::cluster_launcher<ctas, threads, vec, iters>)
#define KTUNE_SOFTMAX_DEFINE_SMEM(fn, ctas, threads)                                               \
    KTUNE_SOFTMAX_DEFINE_(fn, ktune_softmax_impl::smem_launcher<ctas, threads>)
#define KTUNE_SOFTMAX_DEFINE_PIPE(fn, ctas, threads, stages)                                       \
    KTUNE_SOFTMAX_DEFINE_(fn, ktune_softmax_impl::pipe_launcher<ctas, threads, stages>)
#define KTUNE_SOFTMAX_DEFINE_SPLIT(fn, threads, unroll, per_sm)                                    \
    KTUNE_SOFTMAX_DEFINE_(fn, ktune_softmax_impl::split_launcher<threads, unroll, per_sm>)
