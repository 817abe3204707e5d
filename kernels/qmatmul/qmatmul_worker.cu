/* The qmatmul family's side of a sweep worker: inputs, the reference, the check.
 *
 * Inputs: int8 uniform in [-127, 127], fp8 e4m3 uniform in [-4, 4) (rounded to e4m3); per-token
 * scales of a and per-channel scales of w uniform in [0.5, 1.5) / 127 (int8) or [0.5, 1.5)
 * (fp8); a bf16 bias uniform in [-1, 1); bf16 output. The reference: int8 sums by cuBLAS in
 * int32 (exact), fp8 sums by cuBLAS in fp32 on the values as fp32 (exact products, fp32 sums),
 * then the epilogue in fp32. A result passes when |c - ref| <= atol + rtol * |ref|: int8, whose
 * sums are exact, rtol 2^-8 (the output's rounding) and atol the same of the sums' typical
 * size; fp8, whose tensor-core sums round differently, rtol 2^-7 and atol 2^-9 of the typical
 * size (sqrt(k) times the typical product). NaN never passes. The bench's vendor paths are
 * qmatmul_vendor.cuh's. */
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>

#include "cublas_status.cuh"
#include "qmatmul_instance.cuh"
#include "qmatmul_vendor.cuh"
#include "worker.h"
#include "worker_gemm.cuh"
#include "worker_check.cuh"

extern "C" {
extern const ktune_instance ktune__qmatmul_candidates[];
extern const int ktune__qmatmul_candidates_count;
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
    float *a_scale = nullptr, *w_scale = nullptr;
    __nv_bfloat16 *bias = nullptr;
    void *scratch = nullptr; /* the copy anchor's destination */
    float *ref = nullptr;
    float typical = 0; /* the typical size of a result before its rounding */
    ktune_qmatmul_epilogue ep = {};
} st;

cublasHandle_t handle;
ktune_qmatmul_vendor::paths vendor_paths; /* the bench's, for the current key */

using ktune_common::from_cublas;

/* x as fp32, n elements. */
template <typename Q> __global__ void widen(const Q *x, float *y, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = ktune_common::to_float<Q>(x[i]);
}

/* ref[i][j] = the epilogue of sums[i][j] (int32 or fp32, in place as fp32). */
template <typename S>
__global__ void finish_reference(const S *sums, float *ref, int64_t m, int64_t n,
                                 ktune_qmatmul_epilogue ep)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < m * n;
         e += (int64_t)gridDim.x * blockDim.x)
        ref[e] = ktune_qmatmul_impl::epilogue_value<__nv_bfloat16>((float)sums[e], ep, e / n, e % n);
}

/* The reference of set 0 into st.ref: the sums by cuBLAS (row-major c = a w^T is column-major
 * c^T = w a^T, w being k x n column-major transposed), then the epilogue. */
cudaError_t reference()
{
    const int64_t mn = st.m * st.n;
    cudaError_t e = cudaSuccess;
    if (!handle && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS)
        return cudaErrorUnknown;
    if (st.dtype == KTUNE_INT8) {
        int32_t *sums = nullptr;
        e = cudaMalloc(&sums, (size_t)mn * 4);
        const int32_t one = 1, zero = 0;
        if (e == cudaSuccess)
            e = from_cublas(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)st.n, (int)st.m,
                                         (int)st.k, &one, st.w[0], CUDA_R_8I, (int)st.k, st.a[0],
                                         CUDA_R_8I, (int)st.k, &zero, sums, CUDA_R_32I, (int)st.n,
                                         CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT));
        if (e == cudaSuccess)
            finish_reference<<<1024, 256>>>(sums, st.ref, st.m, st.n, st.ep);
        if (e == cudaSuccess)
            e = cudaDeviceSynchronize();
        cudaFree(sums);
        return e;
    }
    float *a32 = nullptr, *w32 = nullptr;
    e = cudaMalloc(&a32, (size_t)(st.m * st.k) * 4);
    if (e == cudaSuccess)
        e = cudaMalloc(&w32, (size_t)(st.n * st.k) * 4);
    if (e == cudaSuccess) {
        widen<<<1024, 256>>>((const __nv_fp8_e4m3 *)st.a[0], a32, st.m * st.k);
        widen<<<1024, 256>>>((const __nv_fp8_e4m3 *)st.w[0], w32, st.n * st.k);
        const float one = 1.f, zero = 0.f;
        /* the sums into st.ref, then the epilogue in place */
        e = from_cublas(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)st.n, (int)st.m,
                                    (int)st.k, &one, w32, (int)st.k, a32, (int)st.k, &zero,
                                    st.ref, (int)st.n));
    }
    if (e == cudaSuccess)
        finish_reference<<<1024, 256>>>(st.ref, st.ref, st.m, st.n, st.ep);
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    cudaFree(a32);
    cudaFree(w32);
    return e;
}

/* The tolerance of a bf16 result against the reference: int8's sums are exact, so the output's
 * rounding; fp8's tensor-core sums round differently, so more. */
void tolerance(float *atol, float *rtol)
{
    const bool int8 = st.dtype == KTUNE_INT8;
    *rtol = int8 ? 1.f / 256 : 1.f / 128;
    *atol = st.typical * (int8 ? 1.f / 256 : 1.f / 512);
}

void release() /* the buffers are the worker's arena */
{
    ktune_qmatmul_vendor::paths_clear(vendor_paths);
    st = state();
}

int prepare(const int64_t *key, int64_t l2_bytes, cudaError_t *error)
{
    static uint64_t seed = 1;
    st.dtype = (int)key[0];
    st.m = key[1];
    st.n = key[2];
    st.k = key[3];
    using ktune_worker_check::carver;
    const size_t abytes = (size_t)(st.m * st.k), wbytes = (size_t)(st.n * st.k),
                 cbytes = (size_t)(st.m * st.n * 2), ref_bytes = (size_t)(st.m * st.n) * 4;
    const int sets = ktune_worker_check::rotating_sets((int64_t)(abytes + wbytes + cbytes), l2_bytes,
                                                       max_sets);
    const size_t set_bytes = carver::round(abytes) + carver::round(wbytes) + carver::round(cbytes);
    cudaError_t e = (st.dtype == KTUNE_INT8 || st.dtype == KTUNE_FP8_E4M3) && st.k % 16 == 0
                        ? cudaSuccess
                        : cudaErrorInvalidValue;
    carver c{e == cudaSuccess
                 ? (char *)ktune_worker_arena((size_t)sets * set_bytes + carver::round(wbytes) +
                                                  carver::round(ref_bytes) +
                                                  carver::round((size_t)(st.m + st.n) * 4) +
                                                  carver::round((size_t)st.n * 2),
                                              &e)
                 : nullptr};
    if (c.at) {
        ktune_worker_gemm::take_sets(c, sets, abytes, wbytes, cbytes, st.a, st.w, st.c);
        st.scratch = c.take(wbytes);
        st.ref = (float *)c.take(ref_bytes);
        st.a_scale = (float *)c.take((size_t)st.m * 4);
        st.w_scale = (float *)c.take((size_t)st.n * 4);
        st.bias = (__nv_bfloat16 *)c.take((size_t)st.n * 2);
        st.sets = sets;
        seed += 2 * (uint64_t)sets + 3;
        const bool int8 = st.dtype == KTUNE_INT8;
        const float amax = int8 ? 127.f : 4.f, smin = int8 ? 0.5f / 127 : 0.5f,
                    smax = int8 ? 1.5f / 127 : 1.5f;
        using ktune_worker_check::fill_sets;
        if (int8) {
            fill_sets((int8_t *)st.a[0], st.m * st.k, (int64_t)carver::round(abytes), sets, seed, 2,
                      -amax, amax);
            fill_sets((int8_t *)st.w[0], st.n * st.k, (int64_t)carver::round(wbytes), sets,
                      seed + 1, 2, -amax, amax);
        } else {
            fill_sets((__nv_fp8_e4m3 *)st.a[0], st.m * st.k, (int64_t)carver::round(abytes), sets,
                      seed, 2, -amax, amax);
            fill_sets((__nv_fp8_e4m3 *)st.w[0], st.n * st.k, (int64_t)carver::round(wbytes), sets,
                      seed + 1, 2, -amax, amax);
        }
        fill_sets(st.a_scale, st.m, st.m, 1, seed + 2 * (uint64_t)sets, 1, smin, smax);
        fill_sets(st.w_scale, st.n, st.n, 1, seed + 2 * (uint64_t)sets + 1, 1, smin, smax);
        fill_sets(st.bias, st.n, st.n, 1, seed + 2 * (uint64_t)sets + 2, 1, -1.f, 1.f);
        st.ep = {st.a_scale, st.w_scale, 1, 1, st.bias, KTUNE_BF16};
        /* a product's typical size times the scales', sqrt(k) of them summed */
        st.typical = amax * amax / 3.f * smax * smax * sqrtf((float)st.k);
        e = cudaGetLastError();
        if (e == cudaSuccess)
            e = reference();
    }
    if (e != cudaSuccess) {
        *error = e;
        release();
        return -1;
    }
    return st.sets;
}

cudaError_t launch(int instance, int set, cudaStream_t stream)
{
    ktune__qmatmul_launch_t *fn =
        (ktune__qmatmul_launch_t *)ktune__qmatmul_candidates[instance].launch;
    return fn(st.a[set], st.w[set], st.c[set], st.m, st.n, st.k, st.dtype, &st.ep, stream);
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
    float atol, rtol;
    tolerance(&atol, &rtol);
    return ktune_worker_check::compare_launch((const __nv_bfloat16 *)st.c[0], st.ref, st.m * st.n,
                                              atol, rtol, bad, stream);
}

cudaError_t copy(int set, cudaStream_t stream)
{
    return cudaMemcpyAsync(st.scratch, st.w[set], (size_t)(st.n * st.k), cudaMemcpyDeviceToDevice,
                           stream);
}

double bytes(const int64_t *key)
{
    return (double)key[1] * key[3] + (double)key[2] * key[3] + 2.0 * key[1] * key[2];
}

int vendors(const char **names, cudaError_t *error)
{
    ktune_qmatmul_vendor::problem pb = {st.dtype, st.m, st.n, st.k, st.sets, st.a, st.w,
                                        st.ref,   0,    0,    st.ep};
    tolerance(&pb.atol, &pb.rtol);
    return ktune_qmatmul_vendor::paths_ready(vendor_paths, pb, names, error);
}

cudaError_t vendor(int which, int set, cudaStream_t stream)
{
    if (which < 0 || which >= vendor_paths.n)
        return cudaErrorInvalidValue;
    return ktune_qmatmul_vendor::path_run(vendor_paths, vendor_paths.p[which], set, stream);
}


} // namespace

const ktune_worker_family ktune_worker_family_def = {
    "qmatmul", 4, ktune__qmatmul_candidates, ktune__qmatmul_candidates_count, prepare, launch,
    check_poison, check_compare, copy, bytes, release, vendors, vendor, ktune_worker_gemm::flops,
    ktune_worker_gemm::ceiling_key};
