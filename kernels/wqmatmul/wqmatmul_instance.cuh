/* How the generated instance files define one wqmatmul configuration: a launch function a config,
 * named by the generator, with the config's parameters as template arguments and the combinations
 * of the space's instantiated values (the activations' dtype, the bit width) to compile it for
 * (combos, ktune_instance.combos), of which KTUNE_WQMATMUL_COMBO_* number each value. */
#pragma once

#include "compiled.cuh"
#include "wqmatmul_decode.cuh"
#include "wqmatmul_large.cuh"
#include "wqmatmul_ring.cuh"
#include "wqmatmul_small.cuh"
#include "wqmatmul_space.h"
#include "wqmatmul_wgmma.cuh"

namespace ktune_wqmatmul_impl {

/* Launcher::run<T, B> for the activations' dtype and the weight's bits where Combos holds their
 * combination (numbered by KTUNE_WQMATMUL_COMBO_*); cudaErrorInvalidValue where it does not (the
 * selection never picks a config for a key it is not compiled for). */
template <unsigned long long Combos, typename Launcher, typename T, int B>
cudaError_t run_compiled(const void *a, const ktune_qweight &w, void *c, int64_t m, int64_t n,
                         int64_t k, cudaStream_t s)
{
    constexpr int combo =
        (std::is_same<T, __half>::value ? KTUNE_WQMATMUL_COMBO_DTYPE_F16
                                        : KTUNE_WQMATMUL_COMBO_DTYPE_BF16) +
        (B == 2 ? KTUNE_WQMATMUL_COMBO_BITS_2
                : B == 3 ? KTUNE_WQMATMUL_COMBO_BITS_3
                         : B == 4 ? KTUNE_WQMATMUL_COMBO_BITS_4 : KTUNE_WQMATMUL_COMBO_BITS_8);
    if constexpr (ktune_compiled(Combos, combo))
        return Launcher::template run<T, B>(a, w, c, m, n, k, s);
    else
        return cudaErrorInvalidValue;
}

/* Runs the config for the activations' dtype and the weight's bits. */
template <unsigned long long Combos, typename Launcher>
cudaError_t dispatch(const void *a, const ktune_qweight *w, void *c, int64_t m, int64_t n,
                     int64_t k, int dtype, cudaStream_t s)
{
    if (m < 1 || n < 1 || k < 1 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || !w ||
        w->layout != KTUNE_QWEIGHT_K32 || !weight_takes(k, w->bits, w->group) ||
        (uintptr_t)a % 16 != 0 || (uintptr_t)w->packed % 16 != 0 || (uintptr_t)c % 2 != 0 ||
        (uintptr_t)w->scales % 2 != 0)
        return cudaErrorInvalidValue;
    const bool f16 = dtype == KTUNE_F16;
    if (!f16 && dtype != KTUNE_BF16)
        return cudaErrorInvalidValue;
#define KTUNE_WQ_BITS(b)                                                                           \
    case b:                                                                                        \
        return f16 ? run_compiled<Combos, Launcher, __half, b>(a, *w, c, m, n, k, s)               \
                   : run_compiled<Combos, Launcher, __nv_bfloat16, b>(a, *w, c, m, n, k, s);
    switch (w->bits) {
        KTUNE_WQ_BITS(2)
        KTUNE_WQ_BITS(3)
        KTUNE_WQ_BITS(4)
        KTUNE_WQ_BITS(8)
    default:
        return cudaErrorInvalidValue;
    }
#undef KTUNE_WQ_BITS
}

} // namespace ktune_wqmatmul_impl

typedef cudaError_t ktune__wqmatmul_launch_t(const void *a, const ktune_qweight *w, void *c,
                                            int64_t m, int64_t n, int64_t k, int dtype,
                                            cudaStream_t stream);

#define KTUNE_WQMATMUL_DEFINE_(fn, combos, ...)                                                    \
    extern "C" cudaError_t fn(const void *a, const ktune_qweight *w, void *c, int64_t m,          \
                              int64_t n, int64_t k, int dtype, cudaStream_t stream)                \
    {                                                                                              \
        return ktune_wqmatmul_impl::dispatch<combos, __VA_ARGS__>(a, w, c, m, n, k, dtype,         \
                                                                  stream);                         \
    }

#define KTUNE_WQMATMUL_DEFINE_DECODE(fn, combos, tm, rows, warps, unroll, acc32)                   \
    KTUNE_WQMATMUL_DEFINE_(fn, combos,                                                             \
                           ktune_wqmatmul_impl::decode_launcher<tm, rows, warps, unroll, acc32>)
#define KTUNE_WQMATMUL_DEFINE_PREFILL(fn, combos, mtiles, rtiles, warps, unroll, acc32)            \
    KTUNE_WQMATMUL_DEFINE_(fn, combos,                                                             \
                           ktune_wqmatmul_impl::small_launcher<warps, unroll, mtiles, rtiles,   \
                                                               acc32>)
#define KTUNE_WQMATMUL_DEFINE_BASE(fn, combos, mtiles, rtiles, warps, unroll, acc32)               \
    KTUNE_WQMATMUL_DEFINE_(fn, combos,                                                             \
                           ktune_wqmatmul_impl::small_launcher<warps, unroll, mtiles, rtiles,   \
                                                               acc32>)
#define KTUNE_WQMATMUL_DEFINE_RING(fn, combos, mtiles, rtiles, warps, stages)                     \
    KTUNE_WQMATMUL_DEFINE_(fn, combos,                                                             \
                           ktune_wqmatmul_impl::ring_launcher<warps, stages, mtiles, rtiles>)
#define KTUNE_WQMATMUL_DEFINE_LARGE(fn, combos, bm, bn, wm, wn, stages)                            \
    KTUNE_WQMATMUL_DEFINE_(fn, combos, ktune_wqmatmul_impl::large_launcher<bm, bn, wm, wn, stages>)
/* one 64-row piece of W a consumer warpgroup (the kernel's FM; two measured slower everywhere) */
#define KTUNE_WQMATMUL_DEFINE_WGMMA(fn, combos, bm, consumers, stages, slab, mc)                   \
    KTUNE_WQMATMUL_DEFINE_(fn, combos,                                                             \
                           ktune_wqmatmul_impl::wgmma_launcher<bm, 1, consumers, stages, slab, mc>)
