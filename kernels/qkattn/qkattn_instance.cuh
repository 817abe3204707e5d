/* How the generated instance files define one qkattn configuration: a launch function a config,
 * named by the generator, with the config's parameters as template arguments. A macro also takes
 * the combinations of instantiated key values to compile (combos, ktune_instance.combos); this
 * family's space instantiates none, so its kernels serve every key. */
#pragma once

#include "qkattn_common.cuh"
#include "qkattn_wgmma.cuh"

typedef cudaError_t ktune__qkattn_launch_t(const ktune_qkattn_problem *problem,
                                           cudaStream_t stream);

#define KTUNE_QKATTN_DEFINE_MMA(fn, combos, block_size_m, block_size_n, num_warps, num_stages,     \
                                q_gran, k_gran)                                                    \
    extern "C" cudaError_t fn(const ktune_qkattn_problem *problem, cudaStream_t stream)            \
    {                                                                                              \
        return ktune_qkattn_impl::dispatch<ktune_qkattn_impl::launcher<                            \
            block_size_m, num_warps, block_size_n, num_stages, q_gran, k_gran>>(problem, stream);  \
    }
#define KTUNE_QKATTN_DEFINE_WGMMA(fn, combos, block_size_m, block_size_n, num_stages, q_gran,      \
                                  k_gran, kv_split)                                                \
    extern "C" cudaError_t fn(const ktune_qkattn_problem *problem, cudaStream_t stream)            \
    {                                                                                              \
        return ktune_qkattn_impl::dispatch<ktune_qkattn_impl::wgmma_launcher<                      \
            block_size_m, block_size_n, num_stages, q_gran, k_gran, kv_split>>(problem, stream);   \
    }
#define KTUNE_QKATTN_DEFINE_STREAM(fn, combos, block_size_m, block_size_n, num_stages, q_gran,     \
                                   k_gran)                                                         \
    extern "C" cudaError_t fn(const ktune_qkattn_problem *problem, cudaStream_t stream)            \
    {                                                                                              \
        return ktune_qkattn_impl::dispatch<ktune_qkattn_impl::wgmma_launcher<                      \
            block_size_m, block_size_n, num_stages, q_gran, k_gran, 1, true>>(problem, stream);    \
    }
