/* How the generated instance files define one rpa configuration: a launch function a config,
 * named by the generator, with the config's parameters as template arguments. A macro also takes
 * the combinations of instantiated key values to compile (combos, ktune_instance.combos); this
 * family's space instantiates none, so its kernels serve every key. */
#pragma once

#include "rpa_common.cuh"
#include "rpa_wgmma.cuh"

typedef cudaError_t ktune__rpa_launch_t(const ktune_rpa_problem *problem, cudaStream_t stream);

#define KTUNE_RPA_DEFINE_MMA(fn, combos, warps_m, warps_n, mtiles, bn, stages, splits)             \
    extern "C" cudaError_t fn(const ktune_rpa_problem *problem, cudaStream_t stream)               \
    {                                                                                              \
        return ktune_rpa_impl::dispatch<                                                           \
            ktune_rpa_impl::launcher<warps_m, warps_n, mtiles, bn, stages, splits>>(problem,       \
                                                                                    stream);      \
    }
#define KTUNE_RPA_DEFINE_WGMMA(fn, combos, consumers, bn, stages, splits)                          \
    extern "C" cudaError_t fn(const ktune_rpa_problem *problem, cudaStream_t stream)               \
    {                                                                                              \
        return ktune_rpa_impl::dispatch<                                                           \
            ktune_rpa_impl::wgmma_launcher<consumers, bn, stages, splits>>(problem, stream);       \
    }
