/* The packed weight's round trip for every bit width (pack, dequantize, compare with the rule of
 * include/ktune/wqmatmul.h computed here), then every wqmatmul config of the space on odd shapes
 * (tails in m and n, k of an odd number of 32-wide units, groups of 32 to 128), with and without
 * zero points, bf16 and f16, on poisoned outputs, against a host reference in double of the
 * weight as the kernels multiply by it (include/ktune/wqmatmul.h): dequantized and rounded to the
 * dtype, or unrounded for the kernels that scale a group's sums (a launch passes when every output
 * is within the tolerance of one of the two); then the public entry point and its argument checks.
 * Exits 77 without a GPU. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "bits16.h"
#include "cuda_check.h"
#include "device.h"
#include "ktune/ktune.h"
#include "select.h"
#include "wqmatmul_instance.cuh"
#include "wqmatmul_space.h"

extern "C" {
extern const ktune_instance ktune__wqmatmul_candidates[];
extern const int ktune__wqmatmul_candidates_count;
}

static double uniform() { return (double)rand() / RAND_MAX; }

/* A quantized weight and the matrix it stands for, on the host and the device. */
struct weight {
    int dtype, bits, group;
    int64_t n, k;
    bool zeros;
    std::vector<uint8_t> q, z;
    std::vector<uint16_t> s;
    std::vector<double> w;  /* (q - zero) * scale in fp32, rounded once to dtype */
    std::vector<double> wx; /* (q - zero) * scale, unrounded */
    uint8_t *q_d = nullptr, *z_d = nullptr;
    void *packed = nullptr, *s_d = nullptr;
};

static void weight_init(weight &x)
{
    const int64_t groups = x.k / x.group;
    x.q.resize((size_t)(x.n * x.k));
    x.s.resize((size_t)(x.n * groups));
    x.z.assign(x.zeros ? (size_t)(x.n * groups) : 0, 0);
    for (auto &v : x.q)
        v = (uint8_t)(rand() % (1 << x.bits));
    for (auto &v : x.s)
        v = bits16_of((float)((0.5 + uniform()) / (1 << (x.bits - 1))), x.dtype);
    for (auto &v : x.z)
        v = (uint8_t)(rand() % (1 << x.bits));
    x.w.resize(x.q.size());
    x.wx.resize(x.q.size());
    for (int64_t j = 0; j < x.n; j++)
        for (int64_t l = 0; l < x.k; l++) {
            const size_t gi = (size_t)(j * groups + l / x.group);
            const float zero = x.zeros ? (float)x.z[gi] : (float)(1 << (x.bits - 1));
            const float v = ((float)x.q[(size_t)(j * x.k + l)] - zero) * bits16_value(x.s[gi], x.dtype);
            x.w[(size_t)(j * x.k + l)] = bits16_value(bits16_of(v, x.dtype), x.dtype);
            x.wx[(size_t)(j * x.k + l)] =
                ((double)x.q[(size_t)(j * x.k + l)] - zero) * bits16_value(x.s[gi], x.dtype);
        }
    CHECK(cudaMalloc(&x.q_d, x.q.size()));
    CHECK(cudaMalloc(&x.packed, ktune_qweight_packed_bytes(x.n, x.k, x.bits, KTUNE_QWEIGHT_K32)));
    CHECK(cudaMalloc(&x.s_d, x.s.size() * 2));
    CHECK(cudaMemcpy(x.q_d, x.q.data(), x.q.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(x.s_d, x.s.data(), x.s.size() * 2, cudaMemcpyHostToDevice));
    if (x.zeros) {
        CHECK(cudaMalloc(&x.z_d, x.z.size()));
        CHECK(cudaMemcpy(x.z_d, x.z.data(), x.z.size(), cudaMemcpyHostToDevice));
    }
    if (ktune_qweight_pack(x.q_d, x.packed, x.n, x.k, x.bits, KTUNE_QWEIGHT_K32, 0) != KTUNE_OK) {
        printf("FAIL ktune_qweight_pack n=%lld k=%lld bits=%d\n", (long long)x.n, (long long)x.k,
               x.bits);
        exit(1);
    }
}

static ktune_qweight qweight_of(const weight &x)
{
    return {x.packed, x.s_d, x.z_d, x.bits, x.group, KTUNE_QWEIGHT_K32};
}

static void weight_free(weight &x)
{
    cudaFree(x.q_d);
    cudaFree(x.z_d);
    cudaFree(x.packed);
    cudaFree(x.s_d);
}

/* Pack, dequantize on the device, compare bit for bit with the rule computed on the host. */
static long long round_trip(weight &x)
{
    uint16_t *out;
    CHECK(cudaMalloc(&out, (size_t)(x.n * x.k) * 2));
    CHECK(cudaMemset(out, 0xff, (size_t)(x.n * x.k) * 2));
    const ktune_qweight qw = qweight_of(x);
    long long bad = 0;
    if (ktune_qweight_dequantize(&qw, out, x.n, x.k, (ktune_dtype)x.dtype, 0) != KTUNE_OK)
        bad = -1;
    CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> got((size_t)(x.n * x.k));
    CHECK(cudaMemcpy(got.data(), out, got.size() * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; bad >= 0 && i < got.size(); i++)
        bad += bits16_value(got[i], x.dtype) != x.w[i];
    cudaFree(out);
    return bad;
}

/* Elements out of tolerance (NaN counts) against the double reference: the output's rounding,
 * fp32 sums in another order and, for f16, 16-bit sums over a unit or a slab. */
/* The outputs off ref (rounded weights) and, where that is not 0, the fewer of those and of the
 * outputs off refx (unrounded); first: the first output off ref. */
static long long check_output(const uint16_t *c, const std::vector<double> &ref,
                              const std::vector<double> &refx, int dtype, int64_t k, int64_t *first)
{
    std::vector<uint16_t> out(ref.size());
    CHECK(cudaMemcpy(out.data(), c, out.size() * 2, cudaMemcpyDeviceToHost));
    const double rtol = dtype == KTUNE_F16 ? 1.0 / 512 : 1.0 / 128;
    const double atol = (dtype == KTUNE_F16 ? 4e-3 : 1e-3) * sqrt((double)k);
    long long bad = 0, badx = 0;
    *first = -1;
    for (size_t i = 0; i < out.size(); i++) {
        const double got = bits16_value(out[i], dtype);
        if (!(fabs(got - ref[i]) <= atol + rtol * fabs(ref[i])) && bad++ == 0)
            *first = (int64_t)i;
        badx += !(fabs(got - refx[i]) <= atol + rtol * fabs(refx[i]));
    }
    return bad < badx ? bad : badx;
}

int main()
{
    gpu_test_begin();
    const ktune_device *dev;
    if (ktune__device_current(&dev) != KTUNE_OK) {
        printf("cannot read the device\n");
        return 1;
    }
    long long checked = 0, failures = 0;
    srand(7);

    /* the round trip of every bit width, groups of 32 and 64, with and without zero points */
    for (int bits : {2, 3, 4, 8})
        for (int dtype : {KTUNE_BF16, KTUNE_F16})
            for (bool zeros : {false, true}) {
                weight x{dtype, bits, zeros ? 32 : 64, 37, 320, zeros};
                if (!zeros)
                    x.k = 384;
                weight_init(x);
                const long long bad = round_trip(x);
                checked++;
                if (bad != 0) {
                    failures++;
                    printf("FAIL round trip bits=%d %s%s: %lld values differ\n", bits,
                           ktune_dtype_name(dtype), zeros ? " zeros" : "", bad);
                }
                weight_free(x);
            }
    printf("round trip of 2, 3, 4 and 8 bits: %lld failures\n", failures);

    /* m, n, k, group */
    const int64_t shapes[][4] = {{1, 1, 32, 32},     {1, 17, 64, 64},     {2, 100, 1024, 128},
                                 {4, 257, 96, 32},   {3, 64, 4096, 128},  {9, 130, 320, 64},
                                 {16, 300, 768, 128}, {17, 96, 2048, 128}, {25, 33, 160, 32},
                                 {33, 129, 1024, 64}, {100, 200, 384, 128}, {129, 257, 4224, 128},
                                 {300, 1000, 256, 128}, {70, 136, 576, 64},  {257, 200, 640, 128}};
    for (int bits : {2, 3, 4, 8})
        for (int dtype : {KTUNE_BF16, KTUNE_F16})
            for (const auto &sh : shapes) {
                const int64_t m = sh[0], n = sh[1], k = sh[2];
                weight x{dtype, bits, (int)sh[3], n, k, (m + n) % 2 == 1};
                weight_init(x);
                std::vector<uint16_t> a((size_t)(m * k));
                std::vector<double> av(a.size()), ref((size_t)(m * n), 0), refx(ref.size(), 0);
                for (size_t i = 0; i < a.size(); i++) {
                    a[i] = bits16_of((float)(uniform() * 2 - 1), dtype);
                    av[i] = bits16_value(a[i], dtype);
                }
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        double sum = 0, sumx = 0;
                        for (int64_t l = 0; l < k; l++) {
                            sum += av[(size_t)(i * k + l)] * x.w[(size_t)(j * k + l)];
                            sumx += av[(size_t)(i * k + l)] * x.wx[(size_t)(j * k + l)];
                        }
                        ref[(size_t)(i * n + j)] = sum;
                        refx[(size_t)(i * n + j)] = sumx;
                    }
                uint16_t *a_d, *c_d;
                CHECK(cudaMalloc(&a_d, a.size() * 2));
                CHECK(cudaMalloc(&c_d, (size_t)(m * n + 2) * 2));
                uint16_t *c = c_d + 1; /* not 4-byte aligned */
                CHECK(cudaMemcpy(a_d, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
                const ktune_qweight qw = qweight_of(x);
                const int64_t key[KTUNE_MAX_KEY] = {dtype, bits, sh[3], m, n, k};
                for (int i = 0; i < ktune__wqmatmul_candidates_count; i++) {
                    const ktune_instance *in = &ktune__wqmatmul_candidates[i];
                    if (!ktune__wqmatmul_valid(in->variant, in->params, key, dev))
                        continue;
                    CHECK(poison_late(c, (size_t)(m * n) * 2));
                    cudaError_t e = ((ktune__wqmatmul_launch_t *)in->launch)(a_d, &qw, c, m, n, k,
                                                                            dtype, 0);
                    if (e == cudaSuccess)
                        e = cudaDeviceSynchronize();
                    int64_t first = -1;
                    const long long bad =
                        e == cudaSuccess ? check_output(c, ref, refx, dtype, k, &first) : -1;
                    checked++;
                    if (bad != 0) {
                        failures++;
                        printf("FAIL %s %s bits=%d group=%lld%s m=%lld n=%lld k=%lld: %s, %lld "
                               "wrong, first at row %lld col %lld\n",
                               in->name, ktune_dtype_name(dtype), bits, (long long)sh[3],
                               x.zeros ? " zeros" : "", (long long)m, (long long)n, (long long)k,
                               cudaGetErrorString(e), bad, (long long)(first < 0 ? -1 : first / n),
                               (long long)(first < 0 ? -1 : first % n));
                        if (e != cudaSuccess && e != cudaErrorInvalidValue)
                            return 1;
                    }
                }
                /* the public entry point */
                ktune_choice choice;
                ktune_status st = ktune_wqmatmul_explain(m, n, k, bits, (int)sh[3],
                                                         (ktune_dtype)dtype, &choice);
                CHECK(poison_late(c, (size_t)(m * n) * 2));
                if (st == KTUNE_OK)
                    st = ktune_wqmatmul(a_d, &qw, c, m, n, k, (ktune_dtype)dtype, 0);
                CHECK(cudaDeviceSynchronize());
                int64_t first;
                const long long bad =
                    st == KTUNE_OK ? check_output(c, ref, refx, dtype, k, &first) : -1;
                checked++;
                if (st != KTUNE_OK || bad) {
                    failures++;
                    printf("FAIL ktune_wqmatmul %s bits=%d m=%lld n=%lld k=%lld: %s, %lld wrong "
                           "(%s)\n",
                           ktune_dtype_name(dtype), bits, (long long)m, (long long)n, (long long)k,
                           ktune_status_string(st), bad, choice.why);
                }
                cudaFree(a_d);
                cudaFree(c_d);
                weight_free(x);
            }
    printf("%lld checks of %d candidate configs, the round trip and ktune_wqmatmul, %lld failures\n",
           checked, ktune__wqmatmul_candidates_count, failures);

    ktune_choice c;
    int ok = ktune_wqmatmul_explain(1, 4096, 4096, 4, 128, KTUNE_BF16, &c) == KTUNE_OK;
    printf("explain bf16 bits=4 group=128 m=1 n=4096 k=4096: %s (%s): %s\n", c.config,
           ktune_reason_string(c.reason), c.why);
    /* the rules */
    const ktune_qweight none = {nullptr, nullptr, nullptr, 4, 128, KTUNE_QWEIGHT_K32};
    ok &= ktune_wqmatmul(NULL, &none, NULL, 1, 16, 128, KTUNE_BF16, 0) == KTUNE_ERROR_INVALID_ARGUMENT;
    ok &= ktune_wqmatmul_explain(4, 4, 96, 4, 64, KTUNE_BF16, &c) == KTUNE_ERROR_INVALID_ARGUMENT;
    ok &= ktune_wqmatmul_explain(4, 4, 128, 5, 128, KTUNE_BF16, &c) == KTUNE_ERROR_INVALID_ARGUMENT;
    ok &= ktune_wqmatmul_explain(4, 4, 128, 4, 48, KTUNE_BF16, &c) == KTUNE_ERROR_INVALID_ARGUMENT;
    ok &= ktune_wqmatmul_explain(4, 4, 128, 4, 128, KTUNE_INT8, &c) == KTUNE_ERROR_INVALID_ARGUMENT;
    ok &= ktune_qweight_packed_bytes(4, 48, 4, KTUNE_QWEIGHT_K32) == 0;
    ok &= ktune_qweight_packed_bytes(4, 64, 3, KTUNE_QWEIGHT_K32) == 96;
    ok &= ktune_qweight_packed_bytes(4, 64, 6, KTUNE_QWEIGHT_K32) == 0;
    ok &= ktune_qweight_pack(NULL, NULL, 4, 64, 4, KTUNE_QWEIGHT_K32, 0) == KTUNE_ERROR_INVALID_ARGUMENT;
    if (!ok)
        printf("FAIL explain / argument checks\n");
    return failures == 0 && ok ? 0 : 1;
}
