/* How the generated instance files define one softmax configuration: a launch function a config,
 * named by the generator, with the config's parameters as template arguments and the dtypes to
 * compile it for (combos, ktune_instance.combos; KTUNE_SOFTMAX_COMBO_DTYPE_* number them). */
#pragma once

#include "compiled.cuh"
#include "softmax_kernels.cuh"
#include "softmax_space.h"

namespace ktune_softmax_impl {

/* Runs the config for the dtype where it is compiled for it. */
template <unsigned long long Combos, typename Launcher>
cudaError_t dispatch(const void *x, void *y, int64_t rows, int64_t cols, int dtype, cudaStream_t s)
{
    switch (dtype) {
    case KTUNE_F32:
        if constexpr (ktune_compiled(Combos, KTUNE_SOFTMAX_COMBO_DTYPE_F32))
            return Launcher::template run<float>(x, y, rows, cols, s);
        break;
    case KTUNE_F16:
        if constexpr (ktune_compiled(Combos, KTUNE_SOFTMAX_COMBO_DTYPE_F16))
            return Launcher::template run<__half>(x, y, rows, cols, s);
        break;
    case KTUNE_BF16:
        if constexpr (ktune_compiled(Combos, KTUNE_SOFTMAX_COMBO_DTYPE_BF16))
            return Launcher::template run<__nv_bfloat16>(x, y, rows, cols, s);
        break;
    default:
        break;
    }
    return cudaErrorInvalidValue;
}

} // namespace ktune_softmax_impl

typedef cudaError_t ktune__softmax_launch_t(const void *x, void *y, int64_t rows, int64_t cols,
                                           int dtype, cudaStream_t stream);

#define KTUNE_SOFTMAX_DEFINE_(fn, combos, ...)                                                     \
    extern "C" cudaError_t fn(const void *x, void *y, int64_t rows, int64_t cols, int dtype,       \
                              cudaStream_t stream)                                                 \
    {                                                                                              \
        return ktune_softmax_impl::dispatch<combos, __VA_ARGS__>(x, y, rows, cols, dtype, stream); \
    }

#define KTUNE_SOFTMAX_DEFINE_VEC(fn, combos, vec, iters, warps)                                    \
    KTUNE_SOFTMAX_DEFINE_(fn, combos, ktune_softmax_impl::vec_launcher<vec, iters, warps>)
#define KTUNE_SOFTMAX_DEFINE_BLOCK(fn, combos, threads, vec, iters)                                \
    KTUNE_SOFTMAX_DEFINE_(fn, combos, ktune_softmax_impl::block_launcher<threads, vec, iters>)
#define KTUNE_SOFTMAX_DEFINE_ONLINE(fn, combos, threads, vec, unroll, per_sm)                      \
    KTUNE_SOFTMAX_DEFINE_(fn, combos,                                                              \
                          ktune_softmax_impl::online_launcher<threads, vec, unroll, per_sm>)
#define KTUNE_SOFTMAX_DEFINE_CLUSTER(fn, combos, ctas, threads, vec, iters)                        \
    KTUNE_SOFTMAX_DEFINE_(fn, combos,                                                              \
                          ktune_softmax_impl::cluster_launcher<ctas, threads, vec, iters>)
#define KTUNE_SOFTMAX_DEFINE_SMEM(fn, combos, ctas, threads)                                       \
    KTUNE_SOFTMAX_DEFINE_(fn, combos, ktune_softmax_impl::smem_launcher<ctas, threads>)
#define KTUNE_SOFTMAX_DEFINE_PIPE(fn, combos, ctas, threads, stages)                               \
    KTUNE_SOFTMAX_DEFINE_(fn, combos, ktune_softmax_impl::pipe_launcher<ctas, threads, stages>)
#define KTUNE_SOFTMAX_DEFINE_SPLIT(fn, combos, threads, unroll, per_sm)                            \
    KTUNE_SOFTMAX_DEFINE_(fn, combos, ktune_softmax_impl::split_launcher<threads, unroll, per_sm>)
#define KTUNE_SOFTMAX_DEFINE_RESIDENT(fn, combos, threads, per_sm, stages)                        \
    KTUNE_SOFTMAX_DEFINE_(fn, combos,                                                              \
                          ktune_softmax_impl::resident_launcher<threads, per_sm, stages>)
