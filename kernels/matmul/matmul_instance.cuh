/* How the generated instance files define one matmul configuration: a launch function a config,
 * named by the generator, with the config's parameters as template arguments. A macro also takes
 * the combinations of instantiated key values to compile (combos, ktune_instance.combos); this
 * family's space instantiates none, so its kernels serve every key. */
#pragma once

#include "matmul_dot.cuh"
#include "matmul_gemv.cuh"
#include "matmul_mma.cuh"
#include "matmul_wgemv.cuh"
#include "matmul_wgmma.cuh"

typedef cudaError_t ktune__matmul_launch_t(const void *a, const void *w, void *c, int64_t m,
                                          int64_t n, int64_t k, int dtype, cudaStream_t stream);

#define KTUNE_MATMUL_DEFINE_(fn, ...)                                                              \
    extern "C" cudaError_t fn(const void *a, const void *w, void *c, int64_t m, int64_t n,         \
                              int64_t k, int dtype, cudaStream_t stream)                           \
    {                                                                                              \
        return ktune_matmul_impl::dispatch<__VA_ARGS__>(a, w, c, m, n, k, dtype, stream);          \
    }

#define KTUNE_MATMUL_DEFINE_GEMV(fn, combos, rows, warps, unroll, split, mtiles)                   \
    KTUNE_MATMUL_DEFINE_(fn, ktune_matmul_impl::gemv_launcher<rows, warps, unroll, split, mtiles>)
#define KTUNE_MATMUL_DEFINE_MMA(fn, combos, bm, bn, bk, wm, wn, stages, split)                     \
    KTUNE_MATMUL_DEFINE_(fn, ktune_matmul_impl::mma_launcher<bm, bn, bk, wm, wn, stages, split>)
#define KTUNE_MATMUL_DEFINE_WGMMA(fn, combos, bm, bn, consumers, stages)                           \
    KTUNE_MATMUL_DEFINE_(fn, ktune_matmul_impl::wgmma_launcher<bm, bn, consumers, stages>)
#define KTUNE_MATMUL_DEFINE_WGEMV(fn, combos, bm, bn, stages, split)                               \
    KTUNE_MATMUL_DEFINE_(fn, ktune_matmul_impl::wgemv_launcher<bm, bn, stages, split>)
#define KTUNE_MATMUL_DEFINE_SPLITK(fn, combos, bm, bn, consumers, stages, split)                   \
    KTUNE_MATMUL_DEFINE_(fn, ktune_matmul_impl::wgmma_launcher<bm, bn, consumers, stages, split>)
#define KTUNE_MATMUL_DEFINE_TAILSPLIT(fn, combos, bm, bn, consumers, stages, tail)                 \
    KTUNE_MATMUL_DEFINE_(fn, ktune_matmul_impl::wgmma_launcher<bm, bn, consumers, stages, 1, tail>)
#define KTUNE_MATMUL_DEFINE_TRANSPOSED(fn, combos, consumers, ring)                               \
    KTUNE_MATMUL_DEFINE_(fn, ktune_matmul_impl::transposed_launcher<64 * consumers, consumers, ring>)
#define KTUNE_MATMUL_DEFINE_DOT(fn, combos, warps, wrows, unroll, mrows)                           \
    KTUNE_MATMUL_DEFINE_(fn, ktune_matmul_impl::dot_launcher<warps, wrows, unroll, mrows>)
