/* A cuBLAS status as the CUDA error the worker protocol reports, for the families whose workers
 * call cuBLAS (their reference, their vendor anchor). */
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace ktune_common {

/* Success, an allocation failure, or the CUDA error behind another failure (unknown if none). */
inline cudaError_t from_cublas(cublasStatus_t s)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return cudaSuccess;
    if (s == CUBLAS_STATUS_ALLOC_FAILED)
        return cudaErrorMemoryAllocation;
    cudaError_t e = cudaGetLastError();
    return e != cudaSuccess ? e : cudaErrorUnknown;
}

} // namespace ktune_common
