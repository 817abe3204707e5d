/* How the generated instance files define one qmatmul configuration: a launch function a config,
 * named by the generator, with the config's parameters as template arguments. */
#pragma once

#include "qmatmul_decode.cuh"
#include "qmatmul_mma.cuh"
#include "qmatmul_wgmma.cuh"

typedef cudaError_t ktune__qmatmul_launch_t(const void *a, const void *w, void *c, int64_t m,
                                           int64_t n, int64_t k, int qdtype,
                                           const ktune_qmatmul_epilogue *ep, cudaStream_t stream);

#define KTUNE_QMATMUL_DEFINE_(fn, ...)                                                             \
    extern "C" cudaError_t fn(const void *a, const void *w, void *c, int64_t m, int64_t n,         \
                              int64_t k, int qdtype, const ktune_qmatmul_epilogue *ep,             \
                              cudaStream_t stream)                                                 \
    {                                                                                              \
        return ktune_qmatmul_impl::dispatch<__VA_ARGS__>(a, w, c, m, n, k, qdtype, ep, stream);    \
    }

#define KTUNE_QMATMUL_DEFINE_DECODE(fn, warps, unroll, mtiles, rtiles, convert)                    \
    KTUNE_QMATMUL_DEFINE_(fn,                                                                      \
                          ktune_qmatmul_impl::decode_launcher<warps, unroll, mtiles, rtiles, convert>)
#define KTUNE_QMATMUL_DEFINE_MMA(fn, bm, bn, bk, wm, wn, stages, split)                           \
    KTUNE_QMATMUL_DEFINE_(fn, ktune_qmatmul_impl::qmma_launcher<bm, bn, bk, wm, wn, stages, split>)
#define KTUNE_QMATMUL_DEFINE_WGMMA(fn, bm, bn, consumers, stages, split)                           \
    KTUNE_QMATMUL_DEFINE_(fn, ktune_qmatmul_impl::qwgmma_launcher<bm, bn, consumers, stages, split>)
