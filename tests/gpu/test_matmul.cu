/* Every matmul config of the space, on odd shapes (tails in m, n and k; k not a multiple of 8;
 * unaligned pointers), against cuBLAS with fp32 output, on outputs poisoned late (poison_late: an
 * overlapped kernel that writes before it waits fails); then the public entry point, online
 * adaptation (KTUNE_ADAPT) on a tuned key of this device's table, and that the late poison
 * catches a kernel that does not wait. Exits 77 without a GPU. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "adapt.h"
#include "bits16.h"
#include "cuda_check.h"
#include "device.h"
#include "families.h"
#include "ktune/ktune.h"
#include "matmul_instance.cuh"
#include "matmul_space.h"
#include "select.h"

extern "C" {
extern const ktune_instance ktune__matmul_candidates[];
extern const int ktune__matmul_candidates_count;
}

struct problem {
    int dtype;
    int64_t m, n, k;
    int offset; /* elements every pointer is shifted by: the unaligned paths */
    uint16_t *a = nullptr, *w = nullptr, *c = nullptr;
    std::vector<float> ref;
};

static void problem_init(problem &p, cublasHandle_t h, unsigned seed)
{
    std::vector<uint16_t> a((size_t)(p.m * p.k)), w((size_t)(p.n * p.k));
    srand(seed);
    for (auto &x : a)
        x = bits16_of((float)rand() / RAND_MAX * 2.f - 1.f, p.dtype);
    for (auto &x : w)
        x = bits16_of((float)rand() / RAND_MAX * 2.f - 1.f, p.dtype);
    CHECK(cudaMalloc(&p.a, (a.size() + 8) * 2));
    CHECK(cudaMalloc(&p.w, (w.size() + 8) * 2));
    CHECK(cudaMalloc(&p.c, (size_t)(p.m * p.n + 8) * 2));
    p.a += p.offset;
    p.w += p.offset;
    p.c += p.offset;
    CHECK(cudaMemcpy(p.a, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(p.w, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
    float *ref;
    CHECK(cudaMalloc(&ref, (size_t)(p.m * p.n) * 4));
    const float one = 1.f, zero = 0.f;
    const cudaDataType_t t = p.dtype == KTUNE_F16 ? CUDA_R_16F : CUDA_R_16BF;
    if (cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)p.n, (int)p.m, (int)p.k, &one, p.w, t,
                     (int)p.k, p.a, t, (int)p.k, &zero, ref, CUDA_R_32F, (int)p.n,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasGemmEx failed\n");
        exit(1);
    }
    p.ref.resize((size_t)(p.m * p.n));
    CHECK(cudaMemcpy(p.ref.data(), ref, p.ref.size() * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(ref));
}

static void problem_free(problem &p)
{
    cudaFree(p.a - p.offset);
    cudaFree(p.w - p.offset);
    cudaFree(p.c - p.offset);
}

/* Elements out of tolerance (NaN counts): the worker's rule. */
static long long check_output(const problem &p, int64_t *first)
{
    std::vector<uint16_t> out((size_t)(p.m * p.n));
    CHECK(cudaMemcpy(out.data(), p.c, out.size() * 2, cudaMemcpyDeviceToHost));
    const double atol = 1e-3 * sqrt((double)p.k),
                 rtol = p.dtype == KTUNE_F16 ? 1.0 / 512 : 1.0 / 128;
    long long bad = 0;
    *first = -1;
    for (size_t i = 0; i < out.size(); i++) {
        const double got = bits16_value(out[i], p.dtype);
        if (!(fabs(got - p.ref[i]) <= atol + rtol * fabs(p.ref[i]))) {
            if (bad++ == 0)
                *first = (int64_t)i;
        }
    }
    return bad;
}

/* Online adaptation on this device's table: a small tuned key with runner-ups launched often
 * settles (the report names it), its results stay right, and a launch captured into a graph is
 * not timed and replays right. Without a table for this device there is nothing to adapt, and
 * that is all it checks. */
static int adaptation(const ktune_device *dev, cublasHandle_t handle)
{
    const ktune_family *f = ktune__family_find("matmul");
    int table = -1, row = -1;
    for (int t = 0; f && t < f->ntables && row < 0; t++) {
        if (strcmp(f->tables[t]->device, dev->name) != 0)
            continue;
        for (int r = 0; r < f->tables[t]->nrows && row < 0; r++) {
            const int64_t *k = f->tables[t]->rows[r].key;
            if (k[1] <= 64 && k[2] * k[3] <= ((int64_t)1 << 24) && f->table_runner_instances &&
                f->table_runner_instances[t][r * KTUNE_TABLE_RUNNER_UPS] >= 0) {
                table = t;
                row = r;
            }
        }
    }
    if (row < 0) {
        printf("adaptation: no small tuned key with runner-ups for %s; not checked\n", dev->name);
        return 1;
    }
    const int64_t *key = f->tables[table]->rows[row].key;
    problem p;
    p.dtype = (int)key[0];
    p.m = key[1];
    p.n = key[2];
    p.k = key[3];
    p.offset = 0;
    problem_init(p, handle, 4242);
    ktune__select_reset();
    ktune__adapt_reset();
    ktune_adapt_enable(1);
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    int ok = 1;
    for (int call = 0; call < 80 && ok; call++) {
        ok &= ktune_matmul(p.a, p.w, p.c, p.m, p.n, p.k, (ktune_dtype)p.dtype, s) == KTUNE_OK;
        if (call % 8 == 7)
            CHECK(cudaStreamSynchronize(s));
    }
    CHECK(cudaStreamSynchronize(s));
    int64_t first;
    ok &= check_output(p, &first) == 0;
    char report[4096], keytext[160];
    ktune__key_format(f, key, keytext, sizeof keytext);
    char line[256];
    snprintf(line, sizeof line, "\nmatmul %s\n", keytext);
    ok &= ktune_adapt_report(report, sizeof report) > 0 && strstr(report, line) != NULL;
    printf("adaptation of matmul %s (table: %s):\n%s", keytext,
           f->tables[table]->rows[row].config, report);
    /* captured: not timed, replayed right */
    CHECK(cudaMemset(p.c, 0xff, (size_t)(p.m * p.n) * 2));
    ok &= replay_in_graph(s, [&](cudaStream_t gs) {
              return ktune_matmul(p.a, p.w, p.c, p.m, p.n, p.k, (ktune_dtype)p.dtype, gs);
          }) == KTUNE_OK;
    ok &= check_output(p, &first) == 0;
    CHECK(cudaStreamDestroy(s));
    ktune_adapt_enable(0);
    problem_free(p);
    if (!ok)
        printf("FAIL adaptation\n");
    return ok;
}

int main()
{
    gpu_test_begin();
    const ktune_device *dev;
    cublasHandle_t handle;
    if (ktune__device_current(&dev) != KTUNE_OK || cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
        printf("cannot read the device or start cuBLAS\n");
        return 1;
    }
    /* m, n, k, pointer offset */
    const int64_t shapes[][4] = {{1, 1, 1, 0},      {1, 7, 9, 0},       {2, 33, 40, 1},
                                 {3, 100, 1000, 0}, {5, 64, 4096, 0},   {8, 130, 520, 0},
                                 {9, 257, 64, 0},   {16, 300, 777, 0},  {17, 96, 2048, 1},
                                 {32, 512, 3000, 0}, {33, 129, 1024, 0}, {100, 200, 300, 0},
                                 {129, 257, 4104, 0}, {300, 1000, 200, 1}, {1024, 384, 8200, 0},
                                 {70, 72, 24, 0},   {520, 600, 1000, 0}, {271, 4104, 1000, 0},
                                 /* a wave of tiles and some: tailsplit's two launches */
                                 {1001, 2061, 1032, 0}, {1035, 3731, 1032, 0}};
    long long checked = 0, failures = 0;
    for (int dtype = KTUNE_F16; dtype <= KTUNE_BF16; dtype++)
        for (const auto &sh : shapes) {
            problem p;
            p.dtype = dtype;
            p.m = sh[0];
            p.n = sh[1];
            p.k = sh[2];
            p.offset = (int)sh[3];
            problem_init(p, handle, (unsigned)(dtype * 7919 + p.m * 31 + p.n * 7 + p.k));
            const int64_t key[KTUNE_MAX_KEY] = {dtype, p.m, p.n, p.k};
            for (int i = 0; i < ktune__matmul_candidates_count; i++) {
                const ktune_instance *in = &ktune__matmul_candidates[i];
                if (!ktune__matmul_valid(in->variant, in->params, key, dev))
                    continue;
                CHECK(poison_late(p.c, (size_t)(p.m * p.n) * 2));
                cudaError_t e = ((ktune__matmul_launch_t *)in->launch)(p.a, p.w, p.c, p.m, p.n, p.k,
                                                                      dtype, 0);
                if (e == cudaSuccess)
                    e = cudaDeviceSynchronize();
                int64_t first = -1;
                long long bad = e == cudaSuccess ? check_output(p, &first) : -1;
                checked++;
                if (bad != 0) {
                    failures++;
                    printf("FAIL %s %s m=%lld n=%lld k=%lld offset=%d: %s, %lld wrong, first at "
                           "row %lld col %lld\n",
                           in->name, ktune_dtype_name(dtype), (long long)p.m, (long long)p.n,
                           (long long)p.k, p.offset, cudaGetErrorString(e), bad,
                           (long long)(first < 0 ? -1 : first / p.n),
                           (long long)(first < 0 ? -1 : first % p.n));
                    if (e != cudaSuccess && e != cudaErrorInvalidValue)
                        return 1;
                }
            }
            /* the public entry point */
            ktune_choice choice;
            ktune_status st = ktune_matmul_explain(p.m, p.n, p.k, (ktune_dtype)dtype, &choice);
            CHECK(poison_late(p.c, (size_t)(p.m * p.n) * 2));
            if (st == KTUNE_OK)
                st = ktune_matmul(p.a, p.w, p.c, p.m, p.n, p.k, (ktune_dtype)dtype, 0);
            CHECK(cudaDeviceSynchronize());
            int64_t first;
            long long bad = st == KTUNE_OK ? check_output(p, &first) : -1;
            checked++;
            if (st != KTUNE_OK || bad) {
                failures++;
                printf("FAIL ktune_matmul %s m=%lld n=%lld k=%lld: %s, %lld wrong (%s)\n",
                       ktune_dtype_name(dtype), (long long)p.m, (long long)p.n, (long long)p.k,
                       ktune_status_string(st), bad, choice.why);
            }
            problem_free(p);
        }
    printf("%lld checks of %d candidate configs and ktune_matmul, %lld failures\n", checked,
           ktune__matmul_candidates_count, failures);

    ktune_choice c;
    int ok = ktune_matmul_explain(1, 4096, 4096, KTUNE_BF16, &c) == KTUNE_OK;
    printf("explain bf16 m=1 n=4096 k=4096: %s (%s): %s\n", c.config, ktune_reason_string(c.reason),
           c.why);
    ok &= ktune_matmul_explain(3000, 4000, 5000, KTUNE_F16, &c) == KTUNE_OK;
    printf("explain f16 m=3000 n=4000 k=5000: %s (%s): %s\n", c.config,
           ktune_reason_string(c.reason), c.why);
    setenv("KTUNE_FORCE", "matmul=mma_bm128_bn128_bk32_wm2_wn2_stages4_split1", 1);
    ktune__select_reset();
    ok &= ktune_matmul_explain(1, 4096, 4096, KTUNE_BF16, &c) == KTUNE_OK &&
          c.reason == KTUNE_REASON_FORCED;
    printf("forced: %s (%s)\n", c.config ? c.config : "-", ktune_reason_string(c.reason));
    unsetenv("KTUNE_FORCE");
    ktune__select_reset();
    ok &= ktune_matmul(NULL, NULL, NULL, 1, 1, 1, KTUNE_BF16, 0) == KTUNE_ERROR_INVALID_ARGUMENT;
    ok &= ktune_matmul_explain(4, 4, 4, KTUNE_F32, &c) == KTUNE_ERROR_INVALID_ARGUMENT;
    ok &= ktune_matmul_explain(0, 4, 4, KTUNE_F16, &c) == KTUNE_ERROR_INVALID_ARGUMENT;
    if (!ok)
        printf("FAIL explain / KTUNE_FORCE / argument checks\n");
    ok &= adaptation(dev, handle);
    if (!overlap_detected()) {
        printf("FAIL overlapped launches: the poison does not catch a kernel that does not wait\n");
        ok = 0;
    }
    cublasDestroy(handle);
    return failures == 0 && ok ? 0 : 1;
}
