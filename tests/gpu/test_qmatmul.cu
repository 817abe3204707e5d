/* Every qmatmul config of the space, on odd shapes (tails in m, n and k; an output not 4-byte
 * aligned), on poisoned outputs, against a host reference: int8 sums exactly (inputs in
 * {-1, 0, 1}, unit scales, f16 output, whose integers up to 2048 are exact), int8 and fp8 e4m3
 * over their range with per-token, per-channel and per-tensor scales and a bias; then the public
 * entry point and its argument checks. Exits 77 without a GPU. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "bits16.h"
#include "cuda_check.h"
#include "device.h"
#include "ktune/ktune.h"
#include "qmatmul_instance.cuh"
#include "qmatmul_space.h"
#include "select.h"

extern "C" {
extern const ktune_instance ktune__qmatmul_candidates[];
extern const int ktune__qmatmul_candidates_count;
}

/* One case: inputs, epilogue and the expected output. */
struct problem {
    int qdtype, out_dtype;
    int64_t m, n, k;
    bool exact, per_token, per_channel, bias;
    unsigned char *a = nullptr, *w = nullptr;
    uint16_t *c = nullptr; /* one element past a 4-byte boundary */
    float *a_scale = nullptr, *w_scale = nullptr;
    uint16_t *bias_d = nullptr;
    std::vector<double> ref;
    double typical = 0;
};

static double uniform() { return (double)rand() / RAND_MAX; }

/* A quantized value drawn for the case, as its byte and its value. */
static unsigned char draw(const problem &p, double *value)
{
    if (p.qdtype == KTUNE_INT8) {
        const int v = p.exact ? rand() % 3 - 1 : rand() % 255 - 127;
        *value = v;
        return (unsigned char)(signed char)v;
    }
    const __nv_fp8_e4m3 q((float)(uniform() * 8 - 4));
    *value = (double)(float)q;
    return *reinterpret_cast<const unsigned char *>(&q);
}

static void problem_init(problem &p, unsigned seed)
{
    srand(seed);
    std::vector<unsigned char> a((size_t)(p.m * p.k)), w((size_t)(p.n * p.k));
    std::vector<double> av(a.size()), wv(w.size());
    for (size_t i = 0; i < a.size(); i++)
        a[i] = draw(p, &av[i]);
    for (size_t i = 0; i < w.size(); i++)
        w[i] = draw(p, &wv[i]);
    const double s = p.exact ? 0 : p.qdtype == KTUNE_INT8 ? 1.0 / 127 : 1.0;
    std::vector<float> as((size_t)(p.per_token ? p.m : 1)), ws((size_t)(p.per_channel ? p.n : 1));
    for (auto &x : as)
        x = p.exact ? 1.f : (float)(s * (0.5 + uniform()));
    for (auto &x : ws)
        x = p.exact ? 1.f : (float)(s * (0.5 + uniform()));
    std::vector<uint16_t> bias((size_t)p.n);
    for (auto &x : bias)
        x = bits16_of((float)(uniform() * 2 - 1), p.out_dtype);
    CHECK(cudaMalloc(&p.a, a.size() + 16));
    CHECK(cudaMalloc(&p.w, w.size() + 16));
    CHECK(cudaMalloc(&p.c, (size_t)(p.m * p.n + 2) * 2));
    p.c += 1;
    CHECK(cudaMalloc(&p.a_scale, as.size() * 4));
    CHECK(cudaMalloc(&p.w_scale, ws.size() * 4));
    CHECK(cudaMalloc(&p.bias_d, bias.size() * 2));
    CHECK(cudaMemcpy(p.a, a.data(), a.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(p.w, w.data(), w.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(p.a_scale, as.data(), as.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(p.w_scale, ws.data(), ws.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(p.bias_d, bias.data(), bias.size() * 2, cudaMemcpyHostToDevice));
    p.ref.assign((size_t)(p.m * p.n), 0);
    for (int64_t i = 0; i < p.m; i++)
        for (int64_t j = 0; j < p.n; j++) {
            double sum = 0; /* exact: integers, and fp8 products summed in double */
            for (int64_t l = 0; l < p.k; l++)
                sum += av[(size_t)(i * p.k + l)] * wv[(size_t)(j * p.k + l)];
            double v = sum * as[p.per_token ? (size_t)i : 0] * ws[p.per_channel ? (size_t)j : 0];
            if (p.bias)
                v += bits16_value(bias[(size_t)j], p.out_dtype);
            p.ref[(size_t)(i * p.n + j)] = v;
        }
    const double amax = p.exact ? 1 : p.qdtype == KTUNE_INT8 ? 127 : 4;
    p.typical = amax * amax / 3 * (p.exact ? 1 : 2.25 * s * s) * sqrt((double)p.k);
}

static void problem_free(problem &p)
{
    cudaFree(p.a);
    cudaFree(p.w);
    cudaFree(p.c - 1);
    cudaFree(p.a_scale);
    cudaFree(p.w_scale);
    cudaFree(p.bias_d);
}

static ktune_qmatmul_epilogue epilogue_of(const problem &p)
{
    return {p.a_scale, p.w_scale, p.per_token, p.per_channel, p.bias ? p.bias_d : nullptr,
            (ktune_dtype)p.out_dtype};
}

/* Elements out of tolerance (NaN counts): exact cases none; int8, whose sums are exact, the
 * output's rounding; fp8 that and the tensor cores' fp32 sums. */
static long long check_output(const problem &p, int64_t *first)
{
    std::vector<uint16_t> out((size_t)(p.m * p.n));
    CHECK(cudaMemcpy(out.data(), p.c, out.size() * 2, cudaMemcpyDeviceToHost));
    const double rtol = p.exact ? 0 : p.out_dtype == KTUNE_F16 ? 1.0 / 1024 : 1.0 / 256;
    const double atol = p.exact ? 0 : p.typical * (p.qdtype == KTUNE_INT8 ? 1e-6 : 1.0 / 1024);
    long long bad = 0;
    *first = -1;
    for (size_t i = 0; i < out.size(); i++) {
        const double got = bits16_value(out[i], p.out_dtype);
        if (!(fabs(got - p.ref[i]) <= atol + rtol * fabs(p.ref[i])) && bad++ == 0)
            *first = (int64_t)i;
    }
    return bad;
}

/* Whether the fp8 form of a config is refused by design: tiles of more than 64 accumulators a
 * thread on mma.sync (qmatmul_mma.cuh), of more than 96 on wgmma (qmatmul_wgmma.cuh). */
static bool fp8_refused(const ktune_instance *in)
{
    const int64_t *p = in->params;
    if (in->variant == KTUNE_QMATMUL_VARIANT_MMA) /* bm, bn, bk, wm, wn, stages, split */
        return (p[0] / p[3]) * (p[1] / p[4]) / 32 > 64;
    if (in->variant == KTUNE_QMATMUL_VARIANT_WGMMA) /* bm, bn, consumers, stages */
        return p[0] / p[2] / 64 * p[1] > 192;
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
    /* m, n, k */
    const int64_t shapes[][3] = {{1, 1, 16},     {1, 17, 48},    {3, 100, 1008}, {8, 64, 4096},
                                 {9, 257, 64},   {16, 300, 784}, {17, 96, 2048}, {33, 129, 1024},
                                 {100, 200, 304}, {129, 257, 4112}, {300, 1000, 208},
                                 {70, 72, 16},   {520, 600, 1024}};
    /* qdtype, out dtype, exact, per token, per channel, bias */
    const int cases[][6] = {{KTUNE_INT8, KTUNE_F16, 1, 0, 0, 0},
                            {KTUNE_INT8, KTUNE_BF16, 0, 1, 1, 1},
                            {KTUNE_FP8_E4M3, KTUNE_F16, 0, 0, 1, 0},
                            {KTUNE_FP8_E4M3, KTUNE_BF16, 0, 1, 0, 1}};
    long long checked = 0, failures = 0, refused = 0;
    for (const auto &cs : cases)
        for (const auto &sh : shapes) {
            problem p;
            p.qdtype = cs[0];
            p.out_dtype = cs[1];
            p.exact = cs[2];
            p.per_token = cs[3];
            p.per_channel = cs[4];
            p.bias = cs[5];
            p.m = sh[0];
            p.n = sh[1];
            p.k = sh[2];
            if (p.exact && p.k > 2048)
                continue; /* sums beyond f16's exact integers */
            if (p.qdtype == KTUNE_FP8_E4M3 && dev->cc < 89)
                continue;
            problem_init(p, (unsigned)(cs[0] * 7919 + cs[2] * 13 + p.m * 31 + p.n * 7 + p.k));
            const ktune_qmatmul_epilogue ep = epilogue_of(p);
            const int64_t key[KTUNE_MAX_KEY] = {p.qdtype, p.m, p.n, p.k};
            for (int i = 0; i < ktune__qmatmul_candidates_count; i++) {
                const ktune_instance *in = &ktune__qmatmul_candidates[i];
                if (!ktune__qmatmul_valid(in->variant, in->params, key, dev))
                    continue;
                CHECK(poison_late(p.c, (size_t)(p.m * p.n) * 2));
                cudaError_t e = ((ktune__qmatmul_launch_t *)in->launch)(p.a, p.w, p.c, p.m, p.n,
                                                                       p.k, p.qdtype, &ep, 0);
                if (e == cudaErrorNotSupported && p.qdtype == KTUNE_FP8_E4M3 && fp8_refused(in)) {
                    refused++;
                    continue;
                }
                if (e == cudaSuccess)
                    e = cudaDeviceSynchronize();
                int64_t first = -1;
                const long long bad = e == cudaSuccess ? check_output(p, &first) : -1;
                checked++;
                if (bad != 0) {
                    failures++;
                    printf("FAIL %s %s->%s%s m=%lld n=%lld k=%lld: %s, %lld wrong, first at row "
                           "%lld col %lld\n",
                           in->name, ktune_dtype_name(p.qdtype), ktune_dtype_name(p.out_dtype),
                           p.exact ? " exact" : "", (long long)p.m, (long long)p.n, (long long)p.k,
                           cudaGetErrorString(e), bad, (long long)(first < 0 ? -1 : first / p.n),
                           (long long)(first < 0 ? -1 : first % p.n));
                    if (e != cudaSuccess && e != cudaErrorInvalidValue)
                        return 1;
                }
            }
            /* the public entry point */
            ktune_choice choice;
            ktune_status st = ktune_qmatmul_explain(p.m, p.n, p.k, (ktune_dtype)p.qdtype, &choice);
            CHECK(poison_late(p.c, (size_t)(p.m * p.n) * 2));
            if (st == KTUNE_OK)
                st = ktune_qmatmul(p.a, p.w, p.c, p.m, p.n, p.k, (ktune_dtype)p.qdtype, &ep, 0);
            CHECK(cudaDeviceSynchronize());
            int64_t first;
            const long long bad = st == KTUNE_OK ? check_output(p, &first) : -1;
            checked++;
            if (st != KTUNE_OK || bad) {
                failures++;
                printf("FAIL ktune_qmatmul %s m=%lld n=%lld k=%lld: %s, %lld wrong (%s)\n",
                       ktune_dtype_name(p.qdtype), (long long)p.m, (long long)p.n, (long long)p.k,
                       ktune_status_string(st), bad, choice.why);
            }
            problem_free(p);
        }
    printf("%lld checks of %d candidate configs and ktune_qmatmul, %lld failures; %lld fp8 launches "
           "of large tiles refused as documented\n",
           checked, ktune__qmatmul_candidates_count, failures, refused);

    ktune_choice c;
    int ok = ktune_qmatmul_explain(1, 4096, 4096, KTUNE_INT8, &c) == KTUNE_OK;
    printf("explain int8 m=1 n=4096 k=4096: %s (%s): %s\n", c.config,
           ktune_reason_string(c.reason), c.why);
    ok &= ktune_qmatmul_explain(3000, 4000, 5008, KTUNE_FP8_E4M3, &c) == KTUNE_OK;
    printf("explain fp8_e4m3 m=3000 n=4000 k=5008: %s (%s): %s\n", c.config,
           ktune_reason_string(c.reason), c.why);
    /* the alignment rules and the types */
    const ktune_qmatmul_epilogue none = {nullptr, nullptr, 0, 0, nullptr, KTUNE_BF16};
    ok &= ktune_qmatmul(NULL, NULL, NULL, 1, 16, 16, KTUNE_INT8, &none, 0) ==
          KTUNE_ERROR_INVALID_ARGUMENT;
    ok &= ktune_qmatmul_explain(4, 4, 24, KTUNE_INT8, &c) == KTUNE_ERROR_INVALID_ARGUMENT;
    ok &= ktune_qmatmul_explain(4, 4, 32, KTUNE_BF16, &c) == KTUNE_ERROR_INVALID_ARGUMENT;
    ok &= ktune_qmatmul_explain(0, 4, 32, KTUNE_INT8, &c) == KTUNE_ERROR_INVALID_ARGUMENT;
    if (!ok)
        printf("FAIL explain / argument checks\n");
    return failures == 0 && ok ? 0 : 1;
}
