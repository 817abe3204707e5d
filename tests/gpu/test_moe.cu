/* Every moe config of the space, on odd shapes (tails in rows, n and k; groups of one row, empty
 * groups, one group holding every row, many groups), bf16 and f16, on poisoned outputs, against a
 * host reference in double; whatever the space's constraints say of the shape, since a config
 * must be correct wherever it is launched (configs this device cannot run at all, as sm_90a code
 * elsewhere or more shared memory than it has, are skipped). Then the public entry point: its
 * argument checks, rows 0, capture in a CUDA graph (no host sync, offsets read on the device) and
 * offsets outside the contract (no fault). Exits 77 without a GPU. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include "bits16.h"
#include "cuda_check.h"
#include "device.h"
#include "ktune/ktune.h"
#include "moe_instance.cuh"
#include "moe_space.h"

extern "C" {
extern const ktune_instance ktune__moe_candidates[];
extern const int ktune__moe_candidates_count;
}

/* How a case spreads its rows over the groups. */
enum routing { RANDOM, ONE_GROUP, SINGLES, ROUTINGS };
static const char *const routing_names[] = {"random", "one group", "single rows"};

struct problem {
    int dtype;
    int64_t rows, n, k, groups;
    std::vector<int32_t> offsets;
    uint16_t *a = nullptr, *w = nullptr, *c = nullptr;
    int32_t *offsets_d = nullptr;
    std::vector<double> ref;
};

static void offsets_make(problem &p, routing r)
{
    std::vector<int64_t> count((size_t)p.groups, 0);
    if (r == ONE_GROUP)
        count[(size_t)(p.groups - 1)] = p.rows; /* every group before it empty */
    else if (r == SINGLES)
        for (int64_t i = 0; i < p.rows; i++) /* one row a group, every other group, then more */
            count[(size_t)((2 * i + 1) % p.groups)]++;
    else
        for (int64_t i = 0; i < p.rows; i++)
            count[(size_t)(rand() % p.groups)]++;
    p.offsets.assign((size_t)p.groups + 1, 0);
    for (int64_t g = 0; g < p.groups; g++)
        p.offsets[(size_t)g + 1] = p.offsets[(size_t)g] + (int32_t)count[(size_t)g];
}

static void problem_init(problem &p, routing r, unsigned seed)
{
    srand(seed);
    offsets_make(p, r);
    std::vector<uint16_t> a((size_t)(p.rows * p.k)), w((size_t)(p.groups * p.n * p.k));
    std::vector<double> av(a.size()), wv(w.size());
    for (size_t i = 0; i < a.size(); i++) {
        a[i] = bits16_of((float)rand() / RAND_MAX * 2 - 1, p.dtype);
        av[i] = bits16_value(a[i], p.dtype);
    }
    for (size_t i = 0; i < w.size(); i++) {
        w[i] = bits16_of((float)rand() / RAND_MAX * 2 - 1, p.dtype);
        wv[i] = bits16_value(w[i], p.dtype);
    }
    CHECK(cudaMalloc(&p.a, a.size() * 2 + 16));
    CHECK(cudaMalloc(&p.w, w.size() * 2 + 16));
    CHECK(cudaMalloc(&p.c, (size_t)(p.rows * p.n + 2) * 2));
    p.c += 1; /* not 4-byte aligned */
    CHECK(cudaMalloc(&p.offsets_d, p.offsets.size() * 4));
    CHECK(cudaMemcpy(p.a, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(p.w, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(p.offsets_d, p.offsets.data(), p.offsets.size() * 4, cudaMemcpyHostToDevice));
    p.ref.assign((size_t)(p.rows * p.n), 0);
    for (int64_t g = 0; g < p.groups; g++)
        for (int64_t i = p.offsets[(size_t)g]; i < p.offsets[(size_t)g + 1]; i++)
            for (int64_t j = 0; j < p.n; j++) {
                double sum = 0;
                const double *x = &av[(size_t)(i * p.k)], *y = &wv[(size_t)((g * p.n + j) * p.k)];
                for (int64_t l = 0; l < p.k; l++)
                    sum += x[l] * y[l];
                p.ref[(size_t)(i * p.n + j)] = sum;
            }
}

static void problem_free(problem &p)
{
    cudaFree(p.a);
    cudaFree(p.w);
    cudaFree(p.c - 1);
    cudaFree(p.offsets_d);
}

/* Elements out of tolerance (NaN counts): the output's rounding and fp32 sums in another order. */
static long long check_output(const problem &p, int64_t *first)
{
    std::vector<uint16_t> out((size_t)(p.rows * p.n));
    CHECK(cudaMemcpy(out.data(), p.c, out.size() * 2, cudaMemcpyDeviceToHost));
    const double rtol = p.dtype == KTUNE_F16 ? 1.0 / 512 : 1.0 / 128,
                 atol = 1e-3 * sqrt((double)p.k);
    long long bad = 0;
    *first = -1;
    for (size_t i = 0; i < out.size(); i++) {
        const double got = bits16_value(out[i], p.dtype);
        if (!(fabs(got - p.ref[i]) <= atol + rtol * fabs(p.ref[i])) && bad++ == 0)
            *first = (int64_t)i;
    }
    return bad;
}

static ktune_moe_impl::problem problem_of(const problem &p)
{
    return {p.a, p.w, p.offsets_d, p.c, p.rows, p.n, p.k, p.groups};
}

/* Whether the device can run config `in` at all: valid for some shape (a config whose shared
 * memory is beyond the device's is compiled for other devices and refused on this one). The rows
 * of one group span every variant's regime: 3 (dot's tiles of up to 4 rows), 8 and 16 (decode,
 * wgemv), 4096 (the GEMM tiles). */
static bool device_runs(const ktune_instance *in, const ktune_device *dev)
{
    for (int64_t rows : {3, 8, 16, 4096}) {
        const int64_t key[KTUNE_MAX_KEY] = {KTUNE_BF16, rows, 4096, 4096, 1};
        if (ktune__moe_valid(in->variant, in->params, key, dev))
            return true;
    }
    return false;
}

int main()
{
    gpu_test_begin();
    const ktune_device *dev;
    if (ktune__device_current(&dev) != KTUNE_OK) {
        printf("cannot read the device\n");
        return 1;
    }
    /* rows, n, k, groups */
    const int64_t shapes[][4] = {{1, 17, 48, 4},     {5, 100, 136, 8},   {37, 257, 1032, 3},
                                 {300, 200, 264, 5}, {64, 96, 128, 1024}, {520, 600, 1024, 4},
                                 {2000, 130, 520, 7}};
    long long checked = 0, failures = 0, refused = 0;
    for (int dtype : {KTUNE_BF16, KTUNE_F16})
        for (const auto &sh : shapes)
            for (int r = 0; r < ROUTINGS; r++) {
                problem p;
                p.dtype = dtype;
                p.rows = sh[0];
                p.n = sh[1];
                p.k = sh[2];
                p.groups = sh[3];
                problem_init(p, (routing)r, (unsigned)(dtype * 7919 + r * 101 + p.rows * 31 + p.n));
                const ktune_moe_impl::problem pb = problem_of(p);
                for (int i = 0; i < ktune__moe_candidates_count; i++) {
                    const ktune_instance *in = &ktune__moe_candidates[i];
                    if (!device_runs(in, dev)) {
                        refused++;
                        continue;
                    }
                    CHECK(poison_late(p.c, (size_t)(p.rows * p.n) * 2));
                    cudaError_t e = ((ktune__moe_launch_t *)in->launch)(&pb, dtype, 0);
                    if (e == cudaSuccess)
                        e = cudaDeviceSynchronize();
                    int64_t first = -1;
                    const long long bad = e == cudaSuccess ? check_output(p, &first) : -1;
                    checked++;
                    if (bad != 0) {
                        failures++;
                        printf("FAIL %s %s rows=%lld n=%lld k=%lld groups=%lld (%s): %s, %lld "
                               "wrong, first at row %lld col %lld\n",
                               in->name, ktune_dtype_name(dtype), (long long)p.rows, (long long)p.n,
                               (long long)p.k, (long long)p.groups, routing_names[r],
                               cudaGetErrorString(e), bad,
                               (long long)(first < 0 ? -1 : first / p.n),
                               (long long)(first < 0 ? -1 : first % p.n));
                        if (e != cudaSuccess && e != cudaErrorInvalidValue)
                            return 1;
                    }
                }
                /* the public entry point, captured in a graph and replayed */
                cudaStream_t s;
                CHECK(cudaStreamCreate(&s));
                ktune_status st = replay_in_graph(s, [&](cudaStream_t gs) {
                    CHECK(poison_late(p.c, (size_t)(p.rows * p.n) * 2, gs));
                    return ktune_moe(p.a, p.w, p.offsets_d, p.c, p.rows, p.n, p.k, p.groups,
                                     (ktune_dtype)dtype, gs);
                });
                int64_t first;
                const long long bad = st == KTUNE_OK ? check_output(p, &first) : -1;
                checked++;
                if (st != KTUNE_OK || bad) {
                    failures++;
                    printf("FAIL ktune_moe in a graph %s rows=%lld n=%lld k=%lld groups=%lld: %s, "
                           "%lld wrong\n",
                           ktune_dtype_name(dtype), (long long)p.rows, (long long)p.n,
                           (long long)p.k, (long long)p.groups, ktune_status_string(st), bad);
                }
                CHECK(cudaStreamDestroy(s));
                problem_free(p);
            }
    printf("%lld checks of %d candidate configs and ktune_moe, %lld failures; %lld launches of "
           "configs this device cannot run skipped\n",
           checked, ktune__moe_candidates_count, failures, refused);

    int ok = 1;
    {
        /* offsets outside the contract: decreasing, negative, beyond rows; no fault, any values */
        problem p;
        p.dtype = KTUNE_BF16;
        p.rows = 300;
        p.n = 200;
        p.k = 264;
        p.groups = 5;
        problem_init(p, RANDOM, 7);
        const int32_t hostile[] = {50, -7, 1000000, 20, INT32_MIN, 300};
        CHECK(cudaMemcpy(p.offsets_d, hostile, sizeof hostile, cudaMemcpyHostToDevice));
        const ktune_moe_impl::problem pb = problem_of(p);
        for (int i = 0; i < ktune__moe_candidates_count; i++) {
            const ktune_instance *in = &ktune__moe_candidates[i];
            if (!device_runs(in, dev))
                continue;
            cudaError_t e = ((ktune__moe_launch_t *)in->launch)(&pb, p.dtype, 0);
            if (e == cudaSuccess)
                e = cudaDeviceSynchronize();
            if (e != cudaSuccess) {
                printf("FAIL %s on offsets outside the contract: %s\n", in->name,
                       cudaGetErrorString(e));
                return 1;
            }
        }
        problem_free(p);
    }

    ktune_choice c;
    ok &= ktune_moe_explain(2, 28672, 4096, 8, KTUNE_BF16, &c) == KTUNE_OK;
    printf("explain bf16 rows=2 n=28672 k=4096 groups=8: %s (%s): %s\n", c.config,
           ktune_reason_string(c.reason), c.why);
    ok &= ktune_moe_explain(8192, 28672, 4096, 8, KTUNE_BF16, &c) == KTUNE_OK;
    printf("explain bf16 rows=8192 n=28672 k=4096 groups=8: %s (%s): %s\n", c.config,
           ktune_reason_string(c.reason), c.why);
    /* the rules */
    char *base;
    CHECK(cudaMalloc(&base, 4096));
    const int32_t *off = (const int32_t *)base;
    ok &= ktune_moe(base, base, off, base, 0, 16, 16, 4, KTUNE_BF16, 0) == KTUNE_OK; /* rows 0 */
    ok &= ktune_moe(base + 2, base, off, base, 1, 16, 16, 4, KTUNE_BF16, 0) ==
          KTUNE_ERROR_INVALID_ARGUMENT; /* a not 16-byte aligned */
    ok &= ktune_moe(base, base, nullptr, base, 1, 16, 16, 4, KTUNE_BF16, 0) ==
          KTUNE_ERROR_INVALID_ARGUMENT;
    ok &=
        ktune_moe_explain(4, 16, 20, 4, KTUNE_BF16, &c) == KTUNE_ERROR_INVALID_ARGUMENT; /* k % 8 */
    ok &= ktune_moe_explain(4, 16, 16, 0, KTUNE_BF16, &c) == KTUNE_ERROR_INVALID_ARGUMENT;
    ok &= ktune_moe_explain(4, 16, 16, KTUNE_MOE_MAX_GROUPS + 1, KTUNE_BF16, &c) ==
          KTUNE_ERROR_INVALID_ARGUMENT;
    ok &= ktune_moe_explain(4, 16, 16, 4, KTUNE_INT8, &c) == KTUNE_ERROR_INVALID_ARGUMENT;
    ok &= ktune_moe_explain(4, (int64_t)1 << 30, 16, 4, KTUNE_BF16, &c) ==
          KTUNE_ERROR_INVALID_ARGUMENT; /* groups x n beyond int */
    CHECK(cudaDeviceSynchronize());
    cudaFree(base);
    if (!ok)
        printf("FAIL explain / argument checks\n");
    return failures == 0 && ok ? 0 : 1;
}
