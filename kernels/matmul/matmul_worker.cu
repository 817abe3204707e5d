/* The matmul family's side of a sweep worker: inputs, the cuBLAS reference and anchor.
 *
 * Inputs are uniform in [-1, 1). The reference is cuBLAS with fp32 output on the same inputs; a
 * result passes ktune_worker_gemm::compare_16bit's tolerance for every element. NaN never
 * passes. */
#include <algorithm>
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>

#include "cublas_status.cuh"
#include "matmul_instance.cuh"
#include "worker.h"
#include "worker_gemm.cuh"
#include "worker_check.cuh"

extern "C" {
extern const ktune_instance ktune__matmul_candidates[];
extern const int ktune__matmul_candidates_count;
}

namespace {

const int max_sets = 256;

struct state {
    int dtype = 0;
    int64_t m = 0, n = 0, k = 0;
    int sets = 0;
    void *a[max_sets] = {};
    void *w[max_sets] = {};
    void *c[max_sets] = {};
    void *scratch = nullptr; /* the copy anchor's destination */
    float *ref = nullptr;
} st;

ktune_worker_gemm::cublas_handle cublas;

cudaDataType_t cuda_type(int dtype) { return dtype == KTUNE_BF16 ? CUDA_R_16BF : CUDA_R_16F; }

/* c (m x n, row-major) = a (m x k) w (n x k)^T: in cuBLAS's column-major terms c^T = w^T' a^T'
 * with w^T' the k x n column-major view of w, transposed. */
cublasStatus_t gemm(int set, void *out, cudaDataType_t out_type)
{
    const float one = 1.f, zero = 0.f;
    return cublasGemmEx(cublas.handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)st.n, (int)st.m, (int)st.k, &one,
                        st.w[set], cuda_type(st.dtype), (int)st.k, st.a[set], cuda_type(st.dtype),
                        (int)st.k, &zero, out, out_type, (int)st.n, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT);
}

using ktune_common::from_cublas;


void release() { st = state(); } /* the buffers are the worker's arena */

int prepare(const int64_t *key, int64_t l2_bytes, cudaError_t *error)
{
    static uint64_t seed = 1;
    st.dtype = (int)key[0];
    st.m = key[1];
    st.n = key[2];
    st.k = key[3];
    const size_t abytes = (size_t)(st.m * st.k * 2), wbytes = (size_t)(st.n * st.k * 2),
                 cbytes = (size_t)(st.m * st.n * 2), ref_bytes = (size_t)(st.m * st.n) * 4;
    const int sets = ktune_worker_check::rotating_sets((int64_t)(abytes + wbytes + cbytes), l2_bytes,
                                                       max_sets);
    using ktune_worker_check::carver;
    cudaError_t e = st.dtype == KTUNE_F16 || st.dtype == KTUNE_BF16 ? cublas.ready(0)
                                                                     : cudaErrorInvalidValue;
    const size_t set_bytes = carver::round(abytes) + carver::round(wbytes) + carver::round(cbytes);
    carver c{e == cudaSuccess ? (char *)ktune_worker_arena((size_t)sets * set_bytes +
                                                               carver::round(wbytes) +
                                                               carver::round(ref_bytes),
                                                           &e)
                              : nullptr};
    if (c.at) {
        ktune_worker_gemm::take_sets(c, sets, abytes, wbytes, cbytes, st.a, st.w, st.c);
        st.scratch = c.take(wbytes);
        st.ref = (float *)c.take(ref_bytes);
        st.sets = sets;
        seed += 2 * (uint64_t)sets;
        if (st.dtype == KTUNE_F16)
            ktune_worker_gemm::fill_16bit_sets((__half *)st.a[0], st.m * st.k, (__half *)st.w[0],
                                               st.n * st.k, sets, seed);
        else
            ktune_worker_gemm::fill_16bit_sets((__nv_bfloat16 *)st.a[0], st.m * st.k,
                                               (__nv_bfloat16 *)st.w[0], st.n * st.k, sets, seed);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = from_cublas(gemm(0, st.ref, CUDA_R_32F));
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        *error = e;
        release();
        return -1;
    }
    return st.sets;
}

cudaError_t launch(int instance, int set, cudaStream_t stream)
{
    ktune__matmul_launch_t *fn = (ktune__matmul_launch_t *)ktune__matmul_candidates[instance].launch;
    return fn(st.a[set], st.w[set], st.c[set], st.m, st.n, st.k, st.dtype, stream);
}

cudaError_t check_poison(cudaStream_t stream)
{
    return cudaMemsetAsync(st.c[0], 0xff, (size_t)(st.m * st.n * 2), stream); /* NaN */
}

cudaError_t check_compare(cudaStream_t stream, unsigned long long *bad, int64_t *rows,
                          int64_t *cols)
{
    *rows = st.m;
    *cols = st.n;
    return ktune_worker_gemm::compare_16bit(st.dtype, st.c[0], st.ref, st.m * st.n, st.k, bad,
                                            stream);
}

cudaError_t copy(int set, cudaStream_t stream)
{
    return cudaMemcpyAsync(st.scratch, st.w[set], (size_t)(st.n * st.k * 2),
                           cudaMemcpyDeviceToDevice, stream);
}

double bytes(const int64_t *key)
{
    return 2.0 * ((double)key[1] * key[3] + (double)key[2] * key[3] + (double)key[1] * key[2]);
}

int vendors(const char **names, cudaError_t *)
{
    names[0] = "cublas";
    return 1;
}

cudaError_t vendor(int, int set, cudaStream_t stream)
{
    cudaError_t e = cublas.ready(stream);
    return e == cudaSuccess ? from_cublas(gemm(set, st.c[set], cuda_type(st.dtype))) : e;
}


} // namespace

const ktune_worker_family ktune_worker_family_def = {
    "matmul", 4, ktune__matmul_candidates, ktune__matmul_candidates_count, prepare, launch,
    check_poison, check_compare, copy, bytes, release, vendors, vendor, ktune_worker_gemm::flops,
    ktune_worker_gemm::ceiling_key};
