/* The qmatmul bench's vendor paths: the vendor library's answers to the same linear layer, so
 * that the bench shows the tuned kernel against them and what quantizing buys.
 *
 *   cublaslt_int8  cublasLtMatmul, int8 inputs, int32 sums out (IMMA), alpha 1: the scales and
 *                  the bias are left out (cuBLASLt has no int8 path that applies them), so it
 *                  writes 4 bytes an output where the family writes 2 and applies them
 *   cublaslt_fp8   cublasLtMatmul, e4m3 inputs, bf16 out, the scales per token and per channel
 *                  (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F) and the bias in its epilogue: the
 *                  family's operation; where the library offers no algorithm for that, a scale a
 *                  tensor (scale pointers, as torch._scaled_mm) under the name cublaslt_fp8_tensor
 *   cublas_bf16    cublasGemmEx, bf16 inputs and output, fp32 sums: the layer unquantized
 *
 * Each cuBLASLt path runs the fastest of the algorithms the library's heuristic offers (up to
 * `heuristic_algos`, each timed on the problem here). The path of the key's dtype comes first (the
 * bench's anchor), reads the key's inputs and is checked against the family's reference before
 * it is timed; the others read inputs of their own of the same shape (random values of their
 * type), one copy an input set as the family's. Every path is one launch a call, written in
 * row-major terms as cuBLAS's column-major c^T = w a^T (TN). */
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <stdio.h>
#include <string.h>

#include <utility>

#include "cublas_status.cuh"
#include "qmatmul_common.cuh"
#include "worker_check.cuh"

namespace ktune_qmatmul_vendor {

enum path_kind { lt_int8, lt_fp8, cublas_bf16 };

/* The inputs and results of the problem the bench asks about (the worker's state). */
struct problem {
    int dtype;
    int64_t m, n, k;
    int sets;
    void *const *a, *const *w; /* the key's inputs, a set each */
    const float *ref;          /* the family's reference of set 0 */
    float atol, rtol;          /* its tolerance for bf16 outputs */
    ktune_qmatmul_epilogue ep; /* the scales (per token and per channel) and the bf16 bias */
};

struct path {
    path_kind kind;
    const char *name;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t wl = nullptr, al = nullptr, cl = nullptr;
    cublasLtMatmulAlgo_t algo = {};
    void *a[256] = {}, *w[256] = {}, *c[256] = {};
};

struct paths {
    static const int heuristic_algos = 8;
    static const size_t workspace_bytes = (size_t)32 << 20;
    cublasLtHandle_t lt = nullptr;
    cublasHandle_t blas = nullptr;
    void *workspace = nullptr;   /* the cuBLASLt and cuBLAS workspace, kept from key to key */
    void *block = nullptr;       /* the paths' own inputs and outputs for the current key */
    unsigned long long *bad = nullptr;
    float *widened = nullptr;    /* the int8 path's sums after the epilogue, for its check */
    problem pb = {}; /* the problem the paths are ready for */
    int n = 0;
    path p[3];
};

using ktune_common::from_cublas;

/* Frees what the current key's paths hold; the handles and the workspace stay. */
inline void paths_clear(paths &v)
{
    for (int i = 0; i < v.n; i++) {
        path &x = v.p[i];
        if (x.desc)
            cublasLtMatmulDescDestroy(x.desc);
        if (x.wl)
            cublasLtMatrixLayoutDestroy(x.wl);
        if (x.al)
            cublasLtMatrixLayoutDestroy(x.al);
        if (x.cl)
            cublasLtMatrixLayoutDestroy(x.cl);
        x = path{};
    }
    v.n = 0;
    cudaFree(v.block);
    v.block = nullptr;
    cudaFree(v.widened);
    v.widened = nullptr;
}

/* Runs path x on set s of v's problem. */
inline cudaError_t path_run(paths &v, const path &x, int s, cudaStream_t stream)
{
    const problem &pb = v.pb;
    if (x.kind == cublas_bf16) {
        const float one = 1.f, zero = 0.f;
        cudaError_t e = from_cublas(cublasSetStream(v.blas, stream));
        if (e != cudaSuccess)
            return e;
        return from_cublas(cublasGemmEx(v.blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)pb.n, (int)pb.m,
                                        (int)pb.k, &one, x.w[s], CUDA_R_16BF, (int)pb.k, x.a[s],
                                        CUDA_R_16BF, (int)pb.k, &zero, x.c[s], CUDA_R_16BF,
                                        (int)pb.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    const int32_t ione = 1, izero = 0;
    const float fone = 1.f, fzero = 0.f;
    const void *alpha = x.kind == lt_int8 ? (const void *)&ione : (const void *)&fone;
    const void *beta = x.kind == lt_int8 ? (const void *)&izero : (const void *)&fzero;
    return from_cublas(cublasLtMatmul(v.lt, x.desc, alpha, x.w[s], x.wl, x.a[s], x.al, beta,
                                      x.c[s], x.cl, x.c[s], x.cl, &x.algo, v.workspace,
                                      paths::workspace_bytes, stream));
}

/* The descriptors of a cuBLASLt path; fp8 with the scales a row and a column when outer_vec,
 * else a scale a tensor (the first of each vector). */
inline cudaError_t lt_describe(const problem &pb, path &x, bool outer_vec)
{
    const bool int8 = x.kind == lt_int8;
    const cudaDataType_t in = int8 ? CUDA_R_8I : CUDA_R_8F_E4M3, out = int8 ? CUDA_R_32I : CUDA_R_16BF;
    cudaError_t e = from_cublas(cublasLtMatmulDescCreate(
        &x.desc, int8 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F, int8 ? CUDA_R_32I : CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T, nop = CUBLAS_OP_N;
    /* fp8: A of cuBLAS's product is w (n rows of its result), B is a (m columns) */
    const void *ws = pb.ep.w_scale, *as = pb.ep.a_scale, *bias = pb.ep.bias;
    const int32_t mode = outer_vec ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                   : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const int32_t bias_type = CUDA_R_16BF;
    const struct {
        cublasLtMatmulDescAttributes_t attr;
        const void *value;
        size_t size;
    } attrs[] = {{CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t},
                 {CUBLASLT_MATMUL_DESC_TRANSB, &nop, sizeof nop},
                 /* the int8 path ends here */
                 {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &ws, sizeof ws},
                 {CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &as, sizeof as},
                 {CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode},
                 {CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode},
                 {CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi},
                 {CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias},
                 {CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type}};
    const int nattrs = int8 ? 2 : (int)(sizeof attrs / sizeof *attrs);
    for (int i = 0; i < nattrs && e == cudaSuccess; i++)
        e = from_cublas(cublasLtMatmulDescSetAttribute(x.desc, attrs[i].attr, attrs[i].value,
                                                       attrs[i].size));
    if (e == cudaSuccess)
        e = from_cublas(cublasLtMatrixLayoutCreate(&x.wl, in, (uint64_t)pb.k, (uint64_t)pb.n, pb.k));
    if (e == cudaSuccess)
        e = from_cublas(cublasLtMatrixLayoutCreate(&x.al, in, (uint64_t)pb.k, (uint64_t)pb.m, pb.k));
    if (e == cudaSuccess)
        e = from_cublas(cublasLtMatrixLayoutCreate(&x.cl, out, (uint64_t)pb.n, (uint64_t)pb.m, pb.n));
    return e;
}

/* Microseconds a launch of x takes on set 0, over a few launches after one to warm up. */
inline cudaError_t path_quick_time(paths &v, const problem &pb, const path &x, float *us)
{
    cudaEvent_t t0, t1;
    cudaError_t e = cudaEventCreate(&t0);
    if (e != cudaSuccess)
        return e;
    e = cudaEventCreate(&t1);
    if (e == cudaSuccess)
        e = path_run(v, x, 0, 0);
    const int reps = 5;
    if (e == cudaSuccess)
        e = cudaEventRecord(t0, 0);
    for (int r = 0; r < reps && e == cudaSuccess; r++)
        e = path_run(v, x, r % pb.sets, 0);
    if (e == cudaSuccess)
        e = cudaEventRecord(t1, 0);
    if (e == cudaSuccess)
        e = cudaEventSynchronize(t1);
    float ms = 0;
    if (e == cudaSuccess)
        e = cudaEventElapsedTime(&ms, t0, t1);
    *us = ms * 1000 / reps;
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    return e;
}

/* Chooses the fastest of the algorithms the heuristic offers for x, timed here; *usable false
 * when none runs. */
inline cudaError_t lt_choose(paths &v, const problem &pb, path &x, bool *usable)
{
    *usable = false;
    cublasLtMatmulPreference_t pref = nullptr;
    cudaError_t e = from_cublas(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = paths::workspace_bytes;
    if (e == cudaSuccess)
        e = from_cublas(cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t found[paths::heuristic_algos] = {};
    int count = 0;
    if (e == cudaSuccess &&
        cublasLtMatmulAlgoGetHeuristic(v.lt, x.desc, x.wl, x.al, x.cl, x.cl, pref,
                                       paths::heuristic_algos, found, &count) !=
            CUBLAS_STATUS_SUCCESS)
        count = 0; /* no algorithm for this problem */
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    float best = INFINITY;
    int chosen = -1;
    for (int i = 0; i < count && e == cudaSuccess; i++) {
        if (found[i].state != CUBLAS_STATUS_SUCCESS)
            continue;
        x.algo = found[i].algo;
        float us = 0;
        if (path_quick_time(v, pb, x, &us) != cudaSuccess) {
            e = cudaDeviceSynchronize(); /* an algorithm that refuses the problem: the next */
            cudaGetLastError();
            continue;
        }
        if (us < best) {
            best = us;
            chosen = i;
        }
    }
    if (chosen >= 0) {
        x.algo = found[chosen].algo;
        *usable = true;
    }
    return e;
}

/* The int8 path's sums after the family's epilogue, as fp32, for its check. */
__global__ void finish_sums(const int32_t *sums, float *out, int64_t m, int64_t n,
                            ktune_qmatmul_epilogue ep)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < m * n;
         e += (int64_t)gridDim.x * blockDim.x)
        out[e] = ktune_qmatmul_impl::epilogue_value<__nv_bfloat16>((float)sums[e], ep, e / n, e % n);
}

/* Whether the anchor x (the path of the key's dtype, on the key's inputs) agrees with the
 * family's reference on set 0: the same operation, before its time stands beside the family's. */
inline cudaError_t anchor_check(paths &v, const problem &pb, const path &x, bool *agrees)
{
    const int64_t mn = pb.m * pb.n;
    const unsigned long long init[2] = {0, ~0ULL};
    cudaError_t e = cudaMemcpy(v.bad, init, sizeof init, cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = path_run(v, x, 0, 0);
    if (e == cudaSuccess && x.kind == lt_int8) {
        e = cudaMalloc(&v.widened, (size_t)mn * 4);
        if (e == cudaSuccess) {
            finish_sums<<<1024, 256>>>((const int32_t *)x.c[0], v.widened, pb.m, pb.n, pb.ep);
            e = ktune_worker_check::compare_launch((const float *)v.widened, pb.ref, mn, pb.atol,
                                                   pb.rtol, v.bad, 0);
        }
    } else if (e == cudaSuccess) {
        e = ktune_worker_check::compare_launch((const __nv_bfloat16 *)x.c[0], pb.ref, mn, pb.atol,
                                               pb.rtol, v.bad, 0);
    }
    unsigned long long bad[2] = {0, 0};
    if (e == cudaSuccess)
        e = cudaMemcpy(bad, v.bad, sizeof bad, cudaMemcpyDeviceToHost);
    *agrees = e == cudaSuccess && bad[0] == 0;
    if (e == cudaSuccess && bad[0])
        fprintf(stderr, "qmatmul: %s disagrees with the reference on %llu of %lld outputs (first: "
                        "%lld) of m=%lld n=%lld k=%lld\n",
                x.name, bad[0], (long long)mn, (long long)bad[1], (long long)pb.m, (long long)pb.n,
                (long long)pb.k);
    return e;
}

/* Readies the vendor paths of problem pb (the worker's vendors() hook): their inputs, their
 * algorithms, the anchor's check. Writes their names; their count, or -1 with *error set (the
 * anchor disagreeing with the reference: cudaErrorInvalidValue, the details on stderr). */
inline int paths_ready(paths &v, const problem &pb, const char **names, cudaError_t *error)
{
    paths_clear(v);
    v.pb = pb;
    cudaError_t e = cudaSuccess;
    if (!v.lt && cublasLtCreate(&v.lt) != CUBLAS_STATUS_SUCCESS)
        e = cudaErrorUnknown;
    if (e == cudaSuccess && !v.blas && cublasCreate(&v.blas) != CUBLAS_STATUS_SUCCESS)
        e = cudaErrorUnknown;
    if (e == cudaSuccess && !v.workspace) {
        e = cudaMalloc(&v.workspace, paths::workspace_bytes);
        /* a fixed workspace: nothing is allocated while a graph is captured */
        if (e == cudaSuccess)
            e = from_cublas(cublasSetWorkspace(v.blas, v.workspace, paths::workspace_bytes));
    }
    if (e == cudaSuccess && !v.bad)
        e = cudaMalloc(&v.bad, 2 * sizeof *v.bad);
    const bool int8 = pb.dtype == KTUNE_INT8;
    const path_kind order[3] = {int8 ? lt_int8 : lt_fp8, int8 ? lt_fp8 : lt_int8, cublas_bf16};
    using ktune_worker_check::carver;
    const size_t ab = (size_t)(pb.m * pb.k), wb = (size_t)(pb.n * pb.k), cb = (size_t)(pb.m * pb.n);
    const size_t per_set = carver::round(ab) + carver::round(wb) /* the other 8-bit type's */ +
                           carver::round(4 * cb) + carver::round(2 * cb) /* int32, bf16 out */ +
                           carver::round(2 * ab) + carver::round(2 * wb) + carver::round(2 * cb);
    if (e == cudaSuccess)
        e = cudaMalloc(&v.block, per_set * (size_t)pb.sets);
    if (e != cudaSuccess) {
        *error = e;
        return -1;
    }
    carver c{(char *)v.block};
    for (int i = 0; i < 3; i++) {
        path &x = v.p[i];
        x.kind = order[i];
        x.name = x.kind == lt_int8 ? "cublaslt_int8" : x.kind == lt_fp8 ? "cublaslt_fp8" : "cublas_bf16";
        const size_t in = x.kind == cublas_bf16 ? 2 : 1, out = x.kind == lt_int8 ? 4 : 2;
        for (int s = 0; s < pb.sets; s++) {
            x.a[s] = i == 0 ? pb.a[s] : c.take(in * ab);
            x.w[s] = i == 0 ? pb.w[s] : c.take(in * wb);
            x.c[s] = c.take(out * cb);
        }
    }
    v.n = 3;
    /* the other paths' inputs: random values of their types, a seed a set */
    using ktune_worker_check::fill_sets;
    const path &other = v.p[1], &wide = v.p[2];
    const int64_t sa = (int64_t)carver::round(ab), sw = (int64_t)carver::round(wb);
    if (other.kind == lt_int8) {
        for (int s = 0; s < pb.sets; s++) {
            fill_sets((int8_t *)other.a[s], pb.m * pb.k, sa, 1, 101 + s, 1, -127.f, 127.f);
            fill_sets((int8_t *)other.w[s], pb.n * pb.k, sw, 1, 202 + s, 1, -127.f, 127.f);
        }
    } else {
        for (int s = 0; s < pb.sets; s++) {
            fill_sets((__nv_fp8_e4m3 *)other.a[s], pb.m * pb.k, sa, 1, 101 + s, 1, -4.f, 4.f);
            fill_sets((__nv_fp8_e4m3 *)other.w[s], pb.n * pb.k, sw, 1, 202 + s, 1, -4.f, 4.f);
        }
    }
    for (int s = 0; s < pb.sets; s++) {
        fill_sets((__nv_bfloat16 *)wide.a[s], pb.m * pb.k, sa, 1, 303 + s, 1, -1.f, 1.f);
        fill_sets((__nv_bfloat16 *)wide.w[s], pb.n * pb.k, sw, 1, 404 + s, 1, -1.f, 1.f);
    }
    e = cudaDeviceSynchronize();
    int count = 0;
    for (int i = 0; i < 3 && e == cudaSuccess; i++) {
        path &x = v.p[i];
        bool usable = x.kind == cublas_bf16;
        if (x.kind != cublas_bf16) {
            e = lt_describe(pb, x, true);
            if (e == cudaSuccess)
                e = lt_choose(v, pb, x, &usable);
            if (e == cudaSuccess && !usable && x.kind == lt_fp8) {
                /* no algorithm scales by rows and columns here: a scale a tensor */
                cublasLtMatmulDescDestroy(x.desc);
                x.desc = nullptr;
                e = lt_describe(pb, x, false);
                x.name = "cublaslt_fp8_tensor";
                if (e == cudaSuccess)
                    e = lt_choose(v, pb, x, &usable);
            }
        }
        /* the anchor computes the family's operation (the fp8 path with a scale a tensor does
         * not): checked */
        if (e == cudaSuccess && usable && i == 0 &&
            (x.kind == lt_int8 || strcmp(x.name, "cublaslt_fp8") == 0)) {
            bool agrees = false;
            e = anchor_check(v, pb, x, &agrees);
            if (e == cudaSuccess && !agrees)
                e = cudaErrorInvalidValue;
        }
        if (e == cudaSuccess && usable) {
            if (count != i)
                std::swap(v.p[count], v.p[i]);
            names[count] = v.p[count].name;
            count++;
        }
    }
    if (e != cudaSuccess) {
        *error = e;
        return -1;
    }
    return count;
}

} // namespace ktune_qmatmul_vendor
