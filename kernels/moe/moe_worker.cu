/* The moe family's side of a sweep worker: inputs, routing, the cuBLAS reference and anchors.
 *
 * Routing: balanced (ktune_workload_balanced), as the anchors of the family were measured: every
 * group takes rows / groups rows and the remainder goes one row each to groups drawn by a
 * generator seeded by the key, so that the sweep, verify and bench time the same groups; a decode
 * key with fewer rows than groups touches that many distinct experts, drawn the same way. Inputs
 * are uniform in [-1, 1). The reference is cuBLAS with fp32 output, one GEMM a non-empty group; a
 * result passes ktune_worker_gemm::compare_16bit's tolerance (matmul's). NaN never passes.
 *
 * Bytes one launch moves: the touched experts' weights, a and c; the copy anchor copies as many,
 * from the start of its set. Input sets are counted by those bytes, not by the whole of w:
 * counted by the allocation, a decode key that reads one expert of 32 would have one set, each
 * sample would be a single launch behind an L2 flush and would time its launch latency with it,
 * where matmul times the same bytes in samples of many launches. Each set still holds all of w
 * (the kernels index experts in it), its a, w and c together, and there are as many sets as fit
 * in a quarter of the GPU's memory.
 * The bench's vendor paths: cuBLAS's grouped batched GEMM (cublasGemmGroupedBatchedEx, a group of
 * one problem a non-empty expert, its pointer arrays on the device), then a loop of cuBLAS GEMMs,
 * one a non-empty expert. Both take the routing from the host, where a serving stack's grouped
 * kernel reads it on the device. */
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>

#include <vector>

#include "cublas_status.cuh"
#include "moe_instance.cuh"
#include "worker.h"
#include "worker_check.cuh"
#include "worker_gemm.cuh"
#include "workload.h"

extern "C" {
extern const ktune_instance ktune__moe_candidates[];
extern const int ktune__moe_candidates_count;
}

namespace {

const int max_sets = 256;
const uint64_t routing_seed = 0x6d6f65; /* the routing of a key, the same on every machine */

struct state {
    int dtype = 0;
    int64_t rows = 0, n = 0, k = 0, groups = 0;
    int sets = 0;
    void *a[max_sets] = {};
    void *w[max_sets] = {};
    void *c[max_sets] = {};
    int32_t *offsets = nullptr; /* on the device, groups + 1 */
    std::vector<int32_t> host_offsets;
    void *scratch = nullptr; /* the copy anchor's destination */
    size_t copy_bytes = 0;   /* what a launch moves (bytes()) */
    float *ref = nullptr;
    /* the vendor paths' problems: one a non-empty group */
    std::vector<int> vm, vn, vk, lda, ldb, ldc, group_size;
    std::vector<int64_t> vrow0;
    std::vector<int> vgroup;
    std::vector<cublasOperation_t> ta, tb;
    std::vector<float> alpha, beta;
    const void **ptrs = nullptr; /* on the device: sets x (A, B, C) arrays of problems */
} st;

cublasHandle_t handle;

using ktune_common::from_cublas;

cudaDataType_t cuda_type(int dtype) { return dtype == KTUNE_BF16 ? CUDA_R_16BF : CUDA_R_16F; }

/* The offsets of key's routing (rows over groups), groups + 1 of them; false where the key is
 * not a moe key. */
bool routing(const int64_t *key, std::vector<int32_t> &offsets)
{
    const int64_t rows = key[1], groups = key[4];
    if (rows < 1 || rows > INT32_MAX || groups < 1 || groups > KTUNE_MOE_MAX_GROUPS)
        return false;
    ktune_rng rng;
    ktune_rng_seed(&rng, routing_seed, key, 5);
    offsets.assign((size_t)groups + 1, 0);
    return ktune_workload_balanced(&rng, rows, (int)groups, offsets.data()) == 0;
}

/* The touched experts: those with rows. */
int64_t touched(const std::vector<int32_t> &offsets)
{
    int64_t t = 0;
    for (size_t g = 0; g + 1 < offsets.size(); g++)
        t += offsets[g + 1] > offsets[g];
    return t;
}

/* The rows of group g of set `set` times its expert's weight, into out (cuBLAS's column-major
 * view: out^T = w_g a_g^T). */
cublasStatus_t gemm_group(int set, int64_t g, void *out, cudaDataType_t out_type)
{
    const float one = 1.f, zero = 0.f;
    const int64_t row0 = st.host_offsets[(size_t)g], r = st.host_offsets[(size_t)g + 1] - row0;
    const size_t out_bytes = out_type == CUDA_R_32F ? 4 : 2;
    return cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)st.n, (int)r, (int)st.k, &one,
                        (const char *)st.w[set] + (size_t)(g * st.n * st.k) * 2,
                        cuda_type(st.dtype), (int)st.k,
                        (const char *)st.a[set] + (size_t)(row0 * st.k) * 2, cuda_type(st.dtype),
                        (int)st.k, &zero, (char *)out + (size_t)(row0 * st.n) * out_bytes, out_type,
                        (int)st.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

cudaError_t ensure_cublas(cudaStream_t stream)
{
    if (!handle && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS)
        return cudaErrorUnknown;
    return from_cublas(cublasSetStream(handle, stream));
}

void release() /* the buffers are the worker's arena, but for the vendor paths' pointers */
{
    cudaFree(st.ptrs);
    st = state();
}

double bytes(const int64_t *key)
{
    std::vector<int32_t> offsets;
    if (!routing(key, offsets))
        return 0;
    return 2.0 * ((double)touched(offsets) * key[2] * key[3] + (double)key[1] * key[3] +
                  (double)key[1] * key[2]);
}

int prepare(const int64_t *key, int64_t l2_bytes, cudaError_t *error)
{
    static uint64_t seed = 1;
    st.dtype = (int)key[0];
    st.rows = key[1];
    st.n = key[2];
    st.k = key[3];
    st.groups = key[4];
    cudaError_t e = (st.dtype == KTUNE_F16 || st.dtype == KTUNE_BF16) && st.k % 8 == 0 &&
                            st.groups * st.n <= INT32_MAX && routing(key, st.host_offsets)
                        ? ensure_cublas(0)
                        : cudaErrorInvalidValue;
    const size_t abytes = (size_t)(st.rows * st.k * 2),
                 wbytes = (size_t)(st.groups * st.n * st.k * 2),
                 cbytes = (size_t)(st.rows * st.n * 2), ref_bytes = (size_t)(st.rows * st.n) * 4,
                 obytes = (size_t)(st.groups + 1) * 4;
    using ktune_worker_check::carver;
    const size_t set_bytes = carver::round(abytes) + carver::round(wbytes) + carver::round(cbytes);
    size_t free_bytes = 0, total_bytes = 0;
    if (e == cudaSuccess)
        e = cudaMemGetInfo(&free_bytes, &total_bytes);
    st.copy_bytes = (size_t)bytes(key);
    int sets = st.copy_bytes > 0
                   ? ktune_worker_check::rotating_sets((int64_t)st.copy_bytes, l2_bytes, max_sets)
                   : 1;
    while (sets > 1 && (size_t)sets * set_bytes > total_bytes / 4)
        sets--;
    carver c{e == cudaSuccess
                 ? (char *)ktune_worker_arena((size_t)sets * set_bytes + carver::round(set_bytes) +
                                                  carver::round(ref_bytes) + carver::round(obytes),
                                              &e)
                 : nullptr};
    if (c.at) {
        for (int s = 0; s < sets; s++) { /* a set's a, w and c together: the copy's source */
            st.a[s] = c.take(abytes);
            st.w[s] = c.take(wbytes);
            st.c[s] = c.take(cbytes);
        }
        st.scratch = c.take(set_bytes);
        st.ref = (float *)c.take(ref_bytes);
        st.offsets = (int32_t *)c.take(obytes);
        st.sets = sets;
        seed += 2 * (uint64_t)sets;
        const int64_t stride = (int64_t)(set_bytes / 2); /* elements from a set to the next */
        using ktune_worker_check::fill_sets;
        if (st.dtype == KTUNE_F16) {
            fill_sets((__half *)st.a[0], st.rows * st.k, stride, sets, seed, 2, -1.f, 1.f);
            fill_sets((__half *)st.w[0], st.groups * st.n * st.k, stride, sets, seed + 1, 2, -1.f,
                      1.f);
        } else {
            fill_sets((__nv_bfloat16 *)st.a[0], st.rows * st.k, stride, sets, seed, 2, -1.f, 1.f);
            fill_sets((__nv_bfloat16 *)st.w[0], st.groups * st.n * st.k, stride, sets, seed + 1, 2,
                      -1.f, 1.f);
        }
        e = cudaMemcpy(st.offsets, st.host_offsets.data(), obytes, cudaMemcpyHostToDevice);
        if (e == cudaSuccess)
            e = cudaGetLastError();
    }
    for (int64_t g = 0; g < st.groups && e == cudaSuccess; g++)
        if (st.host_offsets[(size_t)g + 1] > st.host_offsets[(size_t)g])
            e = from_cublas(gemm_group(0, g, st.ref, CUDA_R_32F));
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
    ktune__moe_launch_t *fn = (ktune__moe_launch_t *)ktune__moe_candidates[instance].launch;
    const ktune_moe_impl::problem pb = {st.a[set], st.w[set], st.offsets, st.c[set],
                                        st.rows,   st.n,      st.k,       st.groups};
    return fn(&pb, st.dtype, stream);
}

cudaError_t check_poison(cudaStream_t stream)
{
    return cudaMemsetAsync(st.c[0], 0xff, (size_t)(st.rows * st.n * 2), stream); /* NaN */
}

cudaError_t check_compare(cudaStream_t stream, unsigned long long *bad, int64_t *rows,
                          int64_t *cols)
{
    *rows = st.rows;
    *cols = st.n;
    return ktune_worker_gemm::compare_16bit(st.dtype, st.c[0], st.ref, st.rows * st.n, st.k, bad,
                                            stream);
}

cudaError_t copy(int set, cudaStream_t stream)
{
    /* as many bytes as a launch moves, from this set's inputs on (the arena holds them) */
    return cudaMemcpyAsync(st.scratch, st.a[set], st.copy_bytes, cudaMemcpyDeviceToDevice, stream);
}

int vendors(const char **names, cudaError_t *error)
{
    /* the problems: the non-empty groups, in order */
    cudaFree(st.ptrs);
    st.ptrs = nullptr;
    for (auto *v : {&st.vm, &st.vn, &st.vk, &st.lda, &st.ldb, &st.ldc, &st.group_size, &st.vgroup})
        v->clear();
    st.vrow0.clear();
    st.ta.clear();
    st.tb.clear();
    st.alpha.clear();
    st.beta.clear();
    for (int64_t g = 0; g < st.groups; g++) {
        const int r = st.host_offsets[(size_t)g + 1] - st.host_offsets[(size_t)g];
        if (r == 0)
            continue;
        st.vgroup.push_back((int)g);
        st.vrow0.push_back(st.host_offsets[(size_t)g]);
        st.vm.push_back((int)st.n);
        st.vn.push_back(r);
        st.vk.push_back((int)st.k);
        st.lda.push_back((int)st.k);
        st.ldb.push_back((int)st.k);
        st.ldc.push_back((int)st.n);
        st.group_size.push_back(1);
        st.ta.push_back(CUBLAS_OP_T);
        st.tb.push_back(CUBLAS_OP_N);
        st.alpha.push_back(1.f);
        st.beta.push_back(0.f);
    }
    const size_t np = st.vgroup.size();
    std::vector<const void *> host(3 * np * (size_t)st.sets);
    for (int s = 0; s < st.sets; s++)
        for (size_t i = 0; i < np; i++) {
            const void **p = host.data() + 3 * np * (size_t)s;
            p[i] = (const char *)st.w[s] + (size_t)(st.vgroup[i] * st.n * st.k) * 2;
            p[np + i] = (const char *)st.a[s] + (size_t)(st.vrow0[i] * st.k) * 2;
            p[2 * np + i] = (const char *)st.c[s] + (size_t)(st.vrow0[i] * st.n) * 2;
        }
    cudaError_t e = cudaMalloc(&st.ptrs, host.size() * sizeof(void *));
    if (e == cudaSuccess)
        e = cudaMemcpy(st.ptrs, host.data(), host.size() * sizeof(void *), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        *error = e;
        return -1;
    }
    names[0] = "cublas_grouped";
    names[1] = "cublas_loop";
    return 2;
}

cudaError_t vendor(int which, int set, cudaStream_t stream)
{
    cudaError_t e = ensure_cublas(stream);
    if (e != cudaSuccess || which < 0 || which > 1 || set < 0 || set >= st.sets)
        return e != cudaSuccess ? e : cudaErrorInvalidValue;
    if (which == 1) {
        for (size_t i = 0; i < st.vgroup.size() && e == cudaSuccess; i++)
            e = from_cublas(gemm_group(set, st.vgroup[i], st.c[set], cuda_type(st.dtype)));
        return e;
    }
    const int np = (int)st.vgroup.size();
    const void **p = st.ptrs + 3 * (size_t)np * (size_t)set;
    return from_cublas(cublasGemmGroupedBatchedEx(
        handle, st.ta.data(), st.tb.data(), st.vm.data(), st.vn.data(), st.vk.data(),
        st.alpha.data(), p, cuda_type(st.dtype), st.lda.data(), p + np, cuda_type(st.dtype),
        st.ldb.data(), st.beta.data(), (void *const *)(p + 2 * np), cuda_type(st.dtype),
        st.ldc.data(), np, st.group_size.data(), CUBLAS_COMPUTE_32F));
}

/* The compute ceiling: one group of 8192 rows, 8192 x 8192 (a large dense GEMM). */
void ceiling_key(const int64_t *key, int64_t *out)
{
    out[0] = key[0];
    out[1] = out[2] = out[3] = 8192;
    out[4] = 1;
}

} // namespace

const ktune_worker_family ktune_worker_family_def = {
    "moe", 5,     ktune__moe_candidates, ktune__moe_candidates_count, prepare, launch,
    check_poison, check_compare, copy,   bytes,  release, vendors, vendor,
    ktune_worker_gemm::flops, ceiling_key};
