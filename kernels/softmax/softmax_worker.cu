/* The softmax family's side of a sweep worker: inputs, the reference, the check, the anchor.
 *
 * Reference: fp64 softmax of the same (already rounded) inputs. A result passes when
 * |y - ref| <= atol + rtol * |ref| for every element: f32 1e-6 + 1e-4, f16 2e-5 + 2e-3,
 * bf16 1e-4 + 1.6e-2 (a few units in the last place of each format). NaN never passes. */
#include <algorithm>
#include <stdio.h>

#include "softmax_instance.cuh"
#include "worker.h"
#include "worker_check.cuh"

extern "C" {
extern const ktune_instance ktune__softmax_candidates[];
extern const int ktune__softmax_candidates_count;
}

namespace {

using ktune_softmax_impl::from_float;
using ktune_softmax_impl::to_float;

const int max_sets = 256;

struct state {
    int dtype = 0;
    int64_t rows = 0, cols = 0;
    size_t bytes = 0; /* of one input */
    int sets = 0;
    void *x[max_sets] = {};
    void *y[max_sets] = {};
    float *ref = nullptr;
} st;

template <typename T> __global__ void reference(const T *x, float *ref, int64_t cols)
{
    __shared__ double red[256];
    const T *xr = x + blockIdx.x * cols;
    float *rr = ref + blockIdx.x * cols;
    double m = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        m = fmax(m, (double)to_float(xr[c]));
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    double sum = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        sum += exp((double)to_float(xr[c]) - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    sum = red[0];
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        rr[c] = (float)(exp((double)to_float(xr[c]) - m) / sum);
}

using ktune_worker_check::compare_launch;

template <typename T> struct typed {
    static void fill_all(uint64_t seed) /* the inputs lie one after another (prepare) */
    {
        const int64_t stride = ktune_worker_check::carver::round(st.bytes) / sizeof(T);
        ktune_worker_check::fill_sets((T *)st.x[0], st.rows * st.cols, stride, st.sets, seed, 1,
                                      -8.f, 8.f);
        reference<T><<<(unsigned)st.rows, 256>>>((const T *)st.x[0], st.ref, st.cols);
    }
    static cudaError_t compare_all(float atol, float rtol, unsigned long long *bad,
                                   cudaStream_t s)
    {
        return compare_launch((const T *)st.y[0], st.ref, st.rows * st.cols, atol, rtol, bad, s);
    }
};

size_t elem_bytes(int dtype) { return dtype == KTUNE_F32 ? 4 : 2; }

void release() { st = state(); } /* the buffers are the worker's arena */

int prepare(const int64_t *key, int64_t l2_bytes, cudaError_t *error)
{
    static uint64_t seed = 1;
    st.dtype = (int)key[0];
    st.rows = key[1];
    st.cols = key[2];
    st.bytes = (size_t)st.rows * (size_t)st.cols * elem_bytes(st.dtype);
    const int sets = ktune_worker_check::rotating_sets(2 * (int64_t)st.bytes, l2_bytes, max_sets);
    const size_t ref_bytes = (size_t)st.rows * st.cols * sizeof(float);
    using ktune_worker_check::carver;
    cudaError_t e = cudaSuccess;
    carver c{(char *)ktune_worker_arena(
        2 * (size_t)sets * carver::round(st.bytes) + carver::round(ref_bytes), &e)};
    if (c.at) {
        for (int s = 0; s < sets; s++)
            st.x[s] = c.take(st.bytes);
        for (int s = 0; s < sets; s++)
            st.y[s] = c.take(st.bytes);
        st.ref = (float *)c.take(ref_bytes);
        st.sets = sets;
        seed += 1000;
        if (st.dtype == KTUNE_F32)
            typed<float>::fill_all(seed);
        else if (st.dtype == KTUNE_F16)
            typed<__half>::fill_all(seed);
        else
            typed<__nv_bfloat16>::fill_all(seed);
        e = cudaGetLastError();
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
    ktune__softmax_launch_t *fn = (ktune__softmax_launch_t *)ktune__softmax_candidates[instance].launch;
    return fn(st.x[set], st.y[set], st.rows, st.cols, st.dtype, stream);
}

cudaError_t check_poison(cudaStream_t stream)
{
    return cudaMemsetAsync(st.y[0], 0xff, st.bytes, stream); /* NaN in every dtype */
}

cudaError_t check_compare(cudaStream_t stream, unsigned long long *bad, int64_t *rows,
                          int64_t *cols)
{
    *rows = st.rows;
    *cols = st.cols;
    const float atol[3] = {1e-6f, 2e-5f, 1e-4f}, rtol[3] = {1e-4f, 2e-3f, 1.6e-2f};
    if (st.dtype == KTUNE_F32)
        return typed<float>::compare_all(atol[0], rtol[0], bad, stream);
    if (st.dtype == KTUNE_F16)
        return typed<__half>::compare_all(atol[1], rtol[1], bad, stream);
    return typed<__nv_bfloat16>::compare_all(atol[2], rtol[2], bad, stream);
}

cudaError_t copy(int set, cudaStream_t stream)
{
    return cudaMemcpyAsync(st.y[set], st.x[set], st.bytes, cudaMemcpyDeviceToDevice, stream);
}

double bytes(const int64_t *key) { return 2.0 * (double)key[1] * (double)key[2] * elem_bytes((int)key[0]); }

} // namespace

const ktune_worker_family ktune_worker_family_def = {
    "softmax", 3, ktune__softmax_candidates, ktune__softmax_candidates_count, prepare, launch,
    check_poison, check_compare, copy, bytes, release, nullptr, nullptr, nullptr, nullptr};
