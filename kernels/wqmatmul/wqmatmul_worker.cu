/* The wqmatmul family's side of a sweep worker: inputs, the reference, the check, the vendor path.
 *
 * Inputs: activations uniform in [-1, 1); q uniform over the bits' 2^b values, packed by
 * wqmatmul_pack.cuh; scales uniform in [0.5, 1.5) / 2^(b - 1) (weights within about [-1.5, 1.5));
 * symmetric quantization (no zero points). Each input set has its own a, packed weight and
 * scales (one block, so that the copy anchor moves the packed weight and its scales in one copy)
 * and c. The reference: the weight of set 0 dequantized (ktune_qweight_dequantize's rule, the
 * values the kernels multiply by), then cuBLAS in fp32 into fp32; for the keys where some kernels
 * multiply by q - zero and scale a group's sums instead (m <= 32, groups of a multiple of 128), a
 * second one from the unrounded weight in fp32. A result passes within the tolerance
 * check_compare states of either. The vendor path is the same layer unquantized: cuBLAS on the
 * dequantized weight in the activations' dtype, one dense copy a set of its own. */
#include <cublas_v2.h>
#include <math.h>

#include "cublas_status.cuh"
#include "wqmatmul_instance.cuh"
#include "wqmatmul_pack.cuh"
#include "worker.h"
#include "worker_check.cuh"
#include "worker_gemm.cuh"

extern "C" {
extern const ktune_instance ktune__wqmatmul_candidates[];
extern const int ktune__wqmatmul_candidates_count;
}

namespace {

const int max_sets = 256;

struct state {
    int dtype = 0, bits = 0, group = 0;
    int64_t m = 0, n = 0, k = 0;
    int sets = 0, dense_sets = 0, dense_ready = 0;
    void *a[max_sets] = {};
    void *packed[max_sets] = {}; /* the packed weight, its scales right after it */
    void *c[max_sets] = {};
    void *dense[max_sets] = {}; /* the vendor's weight: set i's dequantized */
    size_t packed_bytes = 0, scale_bytes = 0;
    void *scratch = nullptr; /* q before packing; then the copy anchor's destination */
    void *vendor_c = nullptr;
    float *ref = nullptr;
    float *refx = nullptr, *densex = nullptr, *ax = nullptr; /* the second reference, its inputs */
    ktune_qweight w[max_sets] = {};
} st;

ktune_worker_gemm::cublas_handle cublas;

using ktune_common::from_cublas;

cudaDataType_t cuda_type(int dtype) { return dtype == KTUNE_BF16 ? CUDA_R_16BF : CUDA_R_16F; }


/* out (m x n, row-major) = a[set] (m x k) dense[dset] (n x k)^T, fp32 sums. */
cublasStatus_t gemm(int set, int dset, void *out, cudaDataType_t out_type)
{
    const float one = 1.f, zero = 0.f;
    return cublasGemmEx(cublas.handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)st.n, (int)st.m, (int)st.k, &one,
                        st.dense[dset], cuda_type(st.dtype), (int)st.k, st.a[set],
                        cuda_type(st.dtype), (int)st.k, &zero, out, out_type, (int)st.n,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

/* refx = ax densex^T in fp32 (the second reference's product). */
cublasStatus_t gemm_f32()
{
    const float one = 1.f, zero = 0.f;
    return cublasGemmEx(cublas.handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)st.n, (int)st.m, (int)st.k,
                        &one, st.densex, CUDA_R_32F, (int)st.k, st.ax, CUDA_R_32F, (int)st.k, &zero,
                        st.refx, CUDA_R_32F, (int)st.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

template <typename T> __global__ void widen(const T *x, float *y, int64_t count)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = ktune_common::to_float<T>(x[i]);
}

/* q of `count` values uniform over [0, 2^bits), from a hash of seed. */
__global__ void fill_q(uint8_t *q, int64_t count, int bits, uint64_t seed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x)
        q[i] = (uint8_t)(ktune_worker_check::hash(seed * 0x9e3779b97f4a7c15ULL + i) >> (32 - bits));
}

void release() { st = state(); } /* the buffers are the worker's arena */

int prepare(const int64_t *key, int64_t l2_bytes, cudaError_t *error)
{
    static uint64_t seed = 1;
    st.dtype = (int)key[0];
    st.bits = (int)key[1];
    st.group = (int)key[2];
    st.m = key[3];
    st.n = key[4];
    st.k = key[5];
    using ktune_worker_check::carver;
    cudaError_t e = (st.dtype == KTUNE_F16 || st.dtype == KTUNE_BF16) &&
                            st.n >= 1 && ktune_wqmatmul_impl::weight_takes(st.k, st.bits, st.group)
                        ? cublas.ready(0)
                        : cudaErrorInvalidValue;
    st.packed_bytes = (size_t)(st.n * st.k / 8 * st.bits);
    st.scale_bytes = (size_t)(st.n * (st.k / st.group) * 2);
    const size_t abytes = (size_t)(st.m * st.k * 2), wbytes = st.packed_bytes + st.scale_bytes,
                 cbytes = (size_t)(st.m * st.n * 2), dbytes = (size_t)(st.n * st.k * 2),
                 ref_bytes = (size_t)(st.m * st.n) * 4,
                 alt_bytes = st.m <= 32 && ktune_wqmatmul_impl::slab_sums_scaled(st.group)
                                 ? carver::round((size_t)(st.n * st.k) * 4) +
                                       carver::round((size_t)(st.m * st.k) * 4) +
                                       carver::round(ref_bytes)
                                 : 0,
                 scratch_bytes = std::max((size_t)(st.n * st.k), wbytes);
    const int sets = ktune_worker_check::rotating_sets((int64_t)(abytes + wbytes + cbytes), l2_bytes,
                                                       max_sets);
    const int dense_sets = std::min(
        sets, ktune_worker_check::rotating_sets((int64_t)(abytes + dbytes + cbytes), l2_bytes, max_sets));
    const size_t set_bytes = carver::round(abytes) + carver::round(wbytes) + carver::round(cbytes);
    carver c{e == cudaSuccess
                 ? (char *)ktune_worker_arena((size_t)sets * set_bytes +
                                                  (size_t)dense_sets * carver::round(dbytes) +
                                                  carver::round(scratch_bytes) +
                                                  carver::round(cbytes) + carver::round(ref_bytes) +
                                                  alt_bytes,
                                              &e)
                 : nullptr};
    if (c.at) {
        ktune_worker_gemm::take_sets(c, sets, abytes, wbytes, cbytes, st.a, st.packed, st.c);
        for (int s = 0; s < dense_sets; s++)
            st.dense[s] = c.take(dbytes);
        st.scratch = c.take(scratch_bytes);
        st.vendor_c = c.take(cbytes);
        st.ref = (float *)c.take(ref_bytes);
        if (alt_bytes) {
            st.densex = (float *)c.take((size_t)(st.n * st.k) * 4);
            st.ax = (float *)c.take((size_t)(st.m * st.k) * 4);
            st.refx = (float *)c.take(ref_bytes);
        }
        st.sets = sets;
        st.dense_sets = dense_sets;
        st.dense_ready = 0;
        seed += 2 * (uint64_t)sets;
        const int64_t astride = (int64_t)(carver::round(abytes) / 2);
        const float smin = 0.5f / (float)(1 << (st.bits - 1)), smax = 3 * smin;
        for (int s = 0; s < sets && e == cudaSuccess; s++) {
            fill_q<<<1024, 256>>>((uint8_t *)st.scratch, st.n * st.k, st.bits, seed + 2 * s + 1);
            e = ktune_wqmatmul_impl::pack((const uint8_t *)st.scratch, st.packed[s], st.n, st.k,
                                          st.bits, 0);
            void *scales = (char *)st.packed[s] + st.packed_bytes;
            if (st.dtype == KTUNE_F16)
                ktune_worker_check::fill_sets((__half *)scales, st.n * (st.k / st.group), 0, 1,
                                              seed + 2 * s + 1, 1, smin, smax);
            else
                ktune_worker_check::fill_sets((__nv_bfloat16 *)scales, st.n * (st.k / st.group), 0,
                                              1, seed + 2 * s + 1, 1, smin, smax);
            st.w[s] = {st.packed[s], scales, nullptr, st.bits, st.group, KTUNE_QWEIGHT_K32};
        }
        if (st.dtype == KTUNE_F16)
            ktune_worker_check::fill_sets((__half *)st.a[0], st.m * st.k, astride, sets, seed, 2,
                                          -1.f, 1.f);
        else
            ktune_worker_check::fill_sets((__nv_bfloat16 *)st.a[0], st.m * st.k, astride, sets,
                                          seed, 2, -1.f, 1.f);
        if (e == cudaSuccess)
            e = ktune_wqmatmul_impl::dequantize(st.w[0], st.dense[0], st.n, st.k, st.dtype, 0);
        if (e == cudaSuccess)
            e = cudaGetLastError();
        st.dense_ready = 1;
    }
    if (e == cudaSuccess)
        e = from_cublas(gemm(0, 0, st.ref, CUDA_R_32F));
    if (e == cudaSuccess && st.refx) {
        e = ktune_wqmatmul_impl::dequantize(st.w[0], st.densex, st.n, st.k, st.dtype, 0, true);
        if (st.dtype == KTUNE_F16)
            widen<<<1024, 256>>>((const __half *)st.a[0], st.ax, st.m * st.k);
        else
            widen<<<1024, 256>>>((const __nv_bfloat16 *)st.a[0], st.ax, st.m * st.k);
        if (e == cudaSuccess)
            e = cudaGetLastError();
        if (e == cudaSuccess)
            e = from_cublas(gemm_f32());
    }
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
    ktune__wqmatmul_launch_t *fn =
        (ktune__wqmatmul_launch_t *)ktune__wqmatmul_candidates[instance].launch;
    return fn(st.a[set], &st.w[set], st.c[set], st.m, st.n, st.k, st.dtype, stream);
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
    /* the output's rounding and fp32 sums in another order (|c - ref| <= 1e-3 sqrt(k) + 2^-7
     * |ref| for bf16, worker_gemm.cuh's); f16 also 16-bit sums over a unit or a slab (acc32 0),
     * 4e-3 sqrt(k) + 2^-9 |ref|, still far below a missing pair of k (about 0.5) */
    const float atol = (st.dtype == KTUNE_F16 ? 4e-3f : 1e-3f) * sqrtf((float)st.k);
    if (st.dtype == KTUNE_F16)
        return ktune_worker_check::compare_launch((const __half *)st.c[0], st.ref, st.m * st.n,
                                                  atol, 1.f / 512, bad, stream, st.refx);
    return ktune_worker_check::compare_launch((const __nv_bfloat16 *)st.c[0], st.ref, st.m * st.n,
                                              atol, 1.f / 128, bad, stream, st.refx);
}

/* The anchor: the packed weight and its scales, the bytes the kernels stream. */
cudaError_t copy(int set, cudaStream_t stream)
{
    return cudaMemcpyAsync(st.scratch, st.packed[set], st.packed_bytes + st.scale_bytes,
                           cudaMemcpyDeviceToDevice, stream);
}

double bytes(const int64_t *key)
{
    const double m = (double)key[3], n = (double)key[4], k = (double)key[5];
    return n * k * (double)key[1] / 8 + n * (k / (double)key[2]) * 2 + 2 * (m * k + m * n);
}

/* The dense layer's sets beyond the reference's, dequantized when the bench first asks. */
int vendors(const char **names, cudaError_t *error)
{
    cudaError_t e = cudaSuccess;
    for (int s = st.dense_ready; s < st.dense_sets && e == cudaSuccess; s++)
        e = ktune_wqmatmul_impl::dequantize(st.w[s], st.dense[s], st.n, st.k, st.dtype, 0);
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        *error = e;
        return -1;
    }
    st.dense_ready = st.dense_sets;
    names[0] = st.dtype == KTUNE_BF16 ? "cublas_bf16" : "cublas_f16";
    return 1;
}

cudaError_t vendor(int, int set, cudaStream_t stream)
{
    cudaError_t e = cublas.ready(stream);
    return e == cudaSuccess
               ? from_cublas(gemm(set, set % st.dense_sets, st.vendor_c, cuda_type(st.dtype)))
               : e;
}

double flops(const int64_t *key) { return 2.0 * (double)key[3] * key[4] * key[5]; }

/* The device's ceiling for the dtype: the dense layer of 8192^3 (the bits and group as key's). */
void ceiling_key(const int64_t *key, int64_t *out)
{
    out[0] = key[0];
    out[1] = key[1];
    out[2] = key[2];
    out[3] = out[4] = out[5] = 8192;
}

} // namespace

const ktune_worker_family ktune_worker_family_def = {
    "wqmatmul", 6,       ktune__wqmatmul_candidates, ktune__wqmatmul_candidates_count, prepare,
    launch,     check_poison, check_compare,         copy,                             bytes,
    release,    vendors,      vendor,                flops,                            ceiling_key};
