/* How the generated instance files define one moe configuration: a launch function a config,
 * named by the generator, with the config's parameters as template arguments. A macro also takes
 * the combinations of instantiated key values to compile (combos, ktune_instance.combos); this
 * family's space instantiates none, so its kernels serve every key. */
#pragma once

#include "moe_decode.cuh"
#include "moe_dot.cuh"
#include "moe_mma.cuh"
#include "moe_wgemv.cuh"
#include "moe_wgmma.cuh"

typedef cudaError_t ktune__moe_launch_t(const ktune_moe_impl::problem *pb, int dtype,
                                        cudaStream_t stream);

#define KTUNE_MOE_DEFINE_(fn, ...)                                                                 \
    extern "C" cudaError_t fn(const ktune_moe_impl::problem *pb, int dtype, cudaStream_t stream)   \
    {                                                                                              \
        return ktune_moe_impl::dispatch<__VA_ARGS__>(*pb, dtype, stream);                          \
    }

#define KTUNE_MOE_DEFINE_DECODE(fn, combos, bn, warps, unroll, mtiles, split)                      \
    KTUNE_MOE_DEFINE_(fn, ktune_moe_impl::decode_launcher<bn, warps, unroll, mtiles, split>)
#define KTUNE_MOE_DEFINE_MMA(fn, combos, bm, bn, bk, wm, wn, stages)                               \
    KTUNE_MOE_DEFINE_(fn, ktune_moe_impl::mma_launcher<bm, bn, bk, wm, wn, stages>)
#define KTUNE_MOE_DEFINE_WGMMA(fn, combos, bm, bn, consumers, stages)                              \
    KTUNE_MOE_DEFINE_(fn, ktune_moe_impl::wgmma_launcher<bm, bn, consumers, stages>)
#define KTUNE_MOE_DEFINE_WGEMV(fn, combos, bm, bn, stages, split)                                  \
    KTUNE_MOE_DEFINE_(fn, ktune_moe_impl::wgemv_launcher<bm, bn, stages, split>)
#define KTUNE_MOE_DEFINE_DOT(fn, combos, warps, wrows, unroll, mrows)                              \
    KTUNE_MOE_DEFINE_(fn, ktune_moe_impl::dot_launcher<warps, wrows, unroll, mrows>)
