/* How the generated instance files define one wqmatmul configuration: a launch function a config,
 * named by the generator, with the config's parameters as template arguments. */
#pragma once

#include "wqmatmul_decode.cuh"
#include "wqmatmul_large.cuh"
#include "wqmatmul_small.cuh"
#include "wqmatmul_wgmma.cuh"

typedef cudaError_t ktune__wqmatmul_launch_t(const void *a, const ktune_qweight *w, void *c,
                                            int64_t m, int64_t n, int64_t k, int dtype,
                                            cudaStream_t stream);

#define KTUNE_WQMATMUL_DEFINE_(fn, ...)                                                            \
    extern "C" cudaError_t fn(const void *a, const ktune_qweight *w, void *c, int64_t m,          \
                              int64_t n, int64_t k, int dtype, cudaStream_t stream)                \
    {                                                                                              \
        return ktune_wqmatmul_impl::dispatch<__VA_ARGS__>(a, w, c, m, n, k, dtype, stream);        \
    }

#define KTUNE_WQMATMUL_DEFINE_DECODE(fn, tm, rows, warps, unroll, acc32)                           \
    KTUNE_WQMATMUL_DEFINE_(fn, ktune_wqmatmul_impl::decode_launcher<tm, rows, warps, unroll, acc32>)
#define KTUNE_WQMATMUL_DEFINE_PREFILL(fn, mtiles, rtiles, warps, unroll, acc32)                    \
    KTUNE_WQMATMUL_DEFINE_(fn, ktune_wqmatmul_impl::small_launcher<warps, unroll, mtiles, rtiles, acc32>)
#define KTUNE_WQMATMUL_DEFINE_BASE(fn, mtiles, rtiles, warps, unroll, acc32)                       \
    KTUNE_WQMATMUL_DEFINE_(fn, ktune_wqmatmul_impl::small_launcher<warps, unroll, mtiles, rtiles, acc32>)
#define KTUNE_WQMATMUL_DEFINE_LARGE(fn, bm, bn, wm, wn, stages)                                    \
    KTUNE_WQMATMUL_DEFINE_(fn, ktune_wqmatmul_impl::large_launcher<bm, bn, wm, wn, stages>)
/* one 64-row piece of W a consumer warpgroup (the kernel's FM; two measured slower everywhere) */
#define KTUNE_WQMATMUL_DEFINE_WGMMA(fn, bm, consumers, stages, slab, mc)                          \
    KTUNE_WQMATMUL_DEFINE_(fn,                                                                     \
                           ktune_wqmatmul_impl::wgmma_launcher<bm, 1, consumers, stages, slab, mc>)
