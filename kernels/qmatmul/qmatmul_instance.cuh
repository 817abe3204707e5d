/* How the generated instance files define one qmatmul configuration: a launch function a config,
 * named by the generator, with the config's parameters as template arguments and the quantized
 * types to compile it for (combos, ktune_instance.combos; KTUNE_QMATMUL_COMBO_DTYPE_* number
 * them), each with both output types (the epilogue's, not a key dimension). */
#pragma once

#include "compiled.cuh"
#include "qmatmul_decode.cuh"
#include "qmatmul_dot.cuh"
#include "qmatmul_mma.cuh"
#include "qmatmul_space.h"
#include "qmatmul_wgemv.cuh"
#include "qmatmul_wgmma.cuh"

namespace ktune_qmatmul_impl {

/* Runs Launcher::run<Q, O> for the quantized type, where the config is compiled for it, and the
 * epilogue's output type. */
template <unsigned long long Combos, typename Launcher>
cudaError_t dispatch(const void *a, const void *w, void *c, int64_t m, int64_t n, int64_t k,
                     int qdtype, const ktune_qmatmul_epilogue *ep, cudaStream_t s)
{
    if (m < 1 || n < 1 || k < 1 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || k % 16 != 0 ||
        !ep || !ep->a_scale || !ep->w_scale)
        return cudaErrorInvalidValue;
    const bool bf16 = ep->out_dtype == KTUNE_BF16;
    if (!bf16 && ep->out_dtype != KTUNE_F16)
        return cudaErrorInvalidValue;
    if constexpr (ktune_compiled(Combos, KTUNE_QMATMUL_COMBO_DTYPE_INT8))
        if (qdtype == KTUNE_INT8)
            return bf16 ? Launcher::template run<int8_t, __nv_bfloat16>(a, w, c, m, n, k, *ep, s)
                        : Launcher::template run<int8_t, __half>(a, w, c, m, n, k, *ep, s);
    if constexpr (ktune_compiled(Combos, KTUNE_QMATMUL_COMBO_DTYPE_FP8_E4M3))
        if (qdtype == KTUNE_FP8_E4M3)
            return bf16 ? Launcher::template run<__nv_fp8_e4m3, __nv_bfloat16>(a, w, c, m, n, k,
                                                                               *ep, s)
                        : Launcher::template run<__nv_fp8_e4m3, __half>(a, w, c, m, n, k, *ep, s);
    return cudaErrorInvalidValue;
}

} // namespace ktune_qmatmul_impl

typedef cudaError_t ktune__qmatmul_launch_t(const void *a, const void *w, void *c, int64_t m,
                                           int64_t n, int64_t k, int qdtype,
                                           const ktune_qmatmul_epilogue *ep, cudaStream_t stream);

#define KTUNE_QMATMUL_DEFINE_(fn, combos, ...)                                                     \
    extern "C" cudaError_t fn(const void *a, const void *w, void *c, int64_t m, int64_t n,         \
                              int64_t k, int qdtype, const ktune_qmatmul_epilogue *ep,             \
                              cudaStream_t stream)                                                 \
    {                                                                                              \
        return ktune_qmatmul_impl::dispatch<combos, __VA_ARGS__>(a, w, c, m, n, k, qdtype, ep,     \
                                                                 stream);                          \
    }

#define KTUNE_QMATMUL_DEFINE_DECODE(fn, combos, warps, unroll, mtiles, rtiles, convert)            \
    KTUNE_QMATMUL_DEFINE_(fn, combos,                                                              \
                          ktune_qmatmul_impl::decode_launcher<warps, unroll, mtiles, rtiles,       \
                                                              convert>)
#define KTUNE_QMATMUL_DEFINE_MMA(fn, combos, bm, bn, bk, wm, wn, stages, split)                    \
    KTUNE_QMATMUL_DEFINE_(fn, combos,                                                              \
                          ktune_qmatmul_impl::qmma_launcher<bm, bn, bk, wm, wn, stages, split>)
#define KTUNE_QMATMUL_DEFINE_WGMMA(fn, combos, bm, bn, consumers, stages, split)                   \
    KTUNE_QMATMUL_DEFINE_(fn, combos,                                                              \
                          ktune_qmatmul_impl::qwgmma_launcher<bm, bn, consumers, stages, split>)
#define KTUNE_QMATMUL_DEFINE_WGEMV(fn, combos, bm, bn, stages, split)                             \
    KTUNE_QMATMUL_DEFINE_(fn, combos, ktune_qmatmul_impl::qwgemv_launcher<bm, bn, stages, split>)
#define KTUNE_QMATMUL_DEFINE_DOT(fn, combos, warps, wrows, unroll, mrows)                          \
    KTUNE_QMATMUL_DEFINE_(fn, combos,                                                              \
                          ktune_qmatmul_impl::dot_launcher<warps, wrows, unroll, mrows>)
