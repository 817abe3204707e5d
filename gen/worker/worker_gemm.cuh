/* What the workers of families keyed (dtype, m, n, k, ...) as a GEMM share: a cuBLAS handle on
 * a fixed workspace, the floating-point (or integer) operations of one launch, the key whose
 * vendor throughput stands for the device's compute ceiling (a large square problem of the key's
 * dtype), and the check of a 16-bit output of fp32 sums. */
#pragma once

#include <cublas_v2.h>
#include <math.h>
#include <stdint.h>

#include "cublas_status.cuh"
#include "ktune/ktune.h"
#include "worker_check.cuh"

namespace ktune_worker_gemm {

/* A cuBLAS handle on a fixed workspace of its own (nothing is allocated while a graph is being
 * captured), created on first use; ready() also sets its stream. */
struct cublas_handle {
    cublasHandle_t handle = nullptr;
    void *workspace = nullptr;
    static constexpr size_t workspace_bytes = (size_t)32 << 20;

    cudaError_t ready(cudaStream_t stream)
    {
        if (!handle) {
            if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS)
                return cudaErrorUnknown;
            cudaError_t e = cudaMalloc(&workspace, workspace_bytes);
            if (e != cudaSuccess)
                return e;
            if (cublasSetWorkspace(handle, workspace, workspace_bytes) != CUBLAS_STATUS_SUCCESS)
                return cudaErrorUnknown;
        }
        return ktune_common::from_cublas(cublasSetStream(handle, stream));
    }
};

inline double flops(const int64_t *key) { return 2.0 * (double)key[1] * key[2] * key[3]; }

inline void ceiling_key(const int64_t *key, int64_t *out)
{
    out[0] = key[0];
    out[1] = out[2] = out[3] = 8192;
}

/* The a, w and c of every input set from the arena: the sets' a, then their w, then their c, each
 * `bytes` long. */
inline void take_sets(ktune_worker_check::carver &arena, int sets, size_t abytes, size_t wbytes,
                      size_t cbytes, void **a, void **w, void **c)
{
    for (int s = 0; s < sets; s++)
        a[s] = arena.take(abytes);
    for (int s = 0; s < sets; s++)
        w[s] = arena.take(wbytes);
    for (int s = 0; s < sets; s++)
        c[s] = arena.take(cbytes);
}

/* Fills a (a_elems) and w (w_elems) of every set, laid out by take_sets, uniform in [-1, 1). */
template <typename T>
void fill_16bit_sets(T *a, int64_t a_elems, T *w, int64_t w_elems, int sets, uint64_t seed)
{
    using ktune_worker_check::carver;
    auto stride = [](int64_t elems) { return carver::round(elems * sizeof(T)) / sizeof(T); };
    ktune_worker_check::fill_sets(a, a_elems, stride(a_elems), sets, seed, 2, -1.f, 1.f);
    ktune_worker_check::fill_sets(w, w_elems, stride(w_elems), sets, seed + 1, 2, -1.f, 1.f);
}

/* Enqueues the check of c (count 16-bit values of dtype, KTUNE_F16 or KTUNE_BF16) against ref,
 * sums over k in fp32: |c - ref| <= 1e-3 sqrt(k) + rtol |ref|, rtol 2^-9 for f16 and 2^-7 for
 * bf16 (the output's rounding and fp32 sums in another order); a missing 16-wide slice of k is
 * off by about sqrt(16 / 9), far above that. */
inline cudaError_t compare_16bit(int dtype, const void *c, const float *ref, int64_t count,
                                 int64_t k, unsigned long long *bad, cudaStream_t stream)
{
    const float atol = 1e-3f * sqrtf((float)k);
    if (dtype == KTUNE_F16)
        return ktune_worker_check::compare_launch((const __half *)c, ref, count, atol, 1.f / 512,
                                                  bad, stream);
    return ktune_worker_check::compare_launch((const __nv_bfloat16 *)c, ref, count, atol,
                                              1.f / 128, bad, stream);
}

} // namespace ktune_worker_gemm
