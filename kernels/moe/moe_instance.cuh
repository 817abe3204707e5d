/* How the generated instance files define one moe configuration: a launch function a config,
 * named by the generator, with the config's parameters as template arguments. */
#pragma once

#include "moe_decode.cuh"
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

#define KTUNE_MOE_DEFINE_DECODE(fn, bn, warps, unroll, mtiles, split)                             \
    KTUNE_MOE_DEFINE_(fn, ktune_moe_impl::decode_launcher<bn, warps, unroll, mtiles, split>)
#define KTUNE_MOE_DEFINE_MMA(fn, bm, bn, bk, wm, wn, stages)                                       \
    KTUNE_MOE_DEFINE_(fn, ktune_moe_impl::mma_launcher<bm, bn, bk, wm, wn, stages>)
#define KTUNE_MOE_DEFINE_WGMMA(fn, bm, bn, consumers, stages)                                      \
    KTUNE_MOE_DEFINE_(fn, ktune_moe_impl::wgmma_launcher<bm, bn, consumers, stages>)
#define KTUNE_MOE_DEFINE_WGEMV(fn, bm, bn, stages, split)                                          \
    KTUNE_MOE_DEFINE_(fn, ktune_moe_impl::wgemv_launcher<bm, bn, stages, split>)
