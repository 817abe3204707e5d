/* Every softmax config of the space, on odd shapes (odd rows mostly -inf), against a CPU fp64
 * reference, on outputs poisoned late (poison_late), and in place for the variants whose blocks
 * share rows across the device (split parks its partial sums in the output; resident reads its
 * next waves while it writes); then the public entry point: tables, explain, KTUNE_FORCE, in
 * place. Exits 77 without a GPU. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "cuda_check.h"
#include "device.h"
#include "ktune/ktune.h"
#include "select.h"
#include "softmax_instance.cuh"
#include "softmax_space.h"

extern "C" {
extern const ktune_instance ktune__softmax_candidates[];
extern const int ktune__softmax_candidates_count;
}

static size_t esize(int dtype) { return dtype == KTUNE_F32 ? 4 : 2; }

static void to_device_format(const std::vector<float> &in, int dtype, std::vector<unsigned char> &out)
{
    out.resize(in.size() * esize(dtype));
    for (size_t i = 0; i < in.size(); i++) {
        if (dtype == KTUNE_F32)
            memcpy(&out[i * 4], &in[i], 4);
        else if (dtype == KTUNE_F16) {
            __half h = __float2half_rn(in[i]);
            memcpy(&out[i * 2], &h, 2);
        } else {
            __nv_bfloat16 h = __float2bfloat16_rn(in[i]);
            memcpy(&out[i * 2], &h, 2);
        }
    }
}

static float from_device(const unsigned char *p, int dtype)
{
    if (dtype == KTUNE_F32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    if (dtype == KTUNE_F16) {
        __half h;
        memcpy(&h, p, 2);
        return __half2float(h);
    }
    __nv_bfloat16 h;
    memcpy(&h, p, 2);
    return __bfloat162float(h);
}

struct problem {
    int dtype;
    int64_t rows, cols;
    int offset, yoffset; /* elements x and y are shifted by: rows past a vector boundary */
    std::vector<unsigned char> x;
    std::vector<double> ref;
    void *dx = nullptr, *dy = nullptr;
};

static void problem_init(problem &p, unsigned seed)
{
    size_t n = (size_t)(p.rows * p.cols);
    std::vector<float> x(n);
    srand(seed);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)rand() / RAND_MAX * 16.f - 8.f;
    /* odd rows masked as attention masks them: their first three quarters -inf, so that whole
     * blocks and chunks of a row hold nothing else */
    for (int64_t r = 1; r < p.rows; r += 2)
        for (int64_t c = 0; c < p.cols * 3 / 4; c++)
            x[(size_t)(r * p.cols + c)] = -INFINITY;
    to_device_format(x, p.dtype, p.x);
    p.ref.resize(n);
    for (int64_t r = 0; r < p.rows; r++) {
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < p.cols; c++)
            m = fmax(m, from_device(&p.x[(r * p.cols + c) * esize(p.dtype)], p.dtype));
        for (int64_t c = 0; c < p.cols; c++)
            s += exp(from_device(&p.x[(r * p.cols + c) * esize(p.dtype)], p.dtype) - m);
        for (int64_t c = 0; c < p.cols; c++)
            p.ref[r * p.cols + c] =
                exp(from_device(&p.x[(r * p.cols + c) * esize(p.dtype)], p.dtype) - m) / s;
    }
    size_t bytes = (n + 8) * esize(p.dtype);
    CHECK(cudaMalloc(&p.dx, bytes));
    CHECK(cudaMalloc(&p.dy, bytes));
    p.dx = (char *)p.dx + p.offset * esize(p.dtype);
    p.dy = (char *)p.dy + p.yoffset * esize(p.dtype);
    CHECK(cudaMemcpy(p.dx, p.x.data(), n * esize(p.dtype), cudaMemcpyHostToDevice));
}

static void problem_free(problem &p)
{
    cudaFree((char *)p.dx - p.offset * esize(p.dtype));
    cudaFree((char *)p.dy - p.yoffset * esize(p.dtype));
}

/* Number of elements out of tolerance (NaN counts), after poisoning the output. */
static long long check_output(problem &p, void *y)
{
    size_t n = (size_t)(p.rows * p.cols);
    std::vector<unsigned char> out(n * esize(p.dtype));
    CHECK(cudaMemcpy(out.data(), y, out.size(), cudaMemcpyDeviceToHost));
    const double atol[3] = {1e-6, 2e-5, 1e-4}, rtol[3] = {1e-4, 2e-3, 1.6e-2};
    long long bad = 0;
    for (size_t i = 0; i < n; i++) {
        double got = from_device(&out[i * esize(p.dtype)], p.dtype);
        if (!(fabs(got - p.ref[i]) <= atol[p.dtype] + rtol[p.dtype] * fabs(p.ref[i])))
            bad++;
    }
    return bad;
}

int main()
{
    gpu_test_begin();
    const ktune_device *dev;
    if (ktune__device_current(&dev) != KTUNE_OK) {
        printf("cannot read the device\n");
        return 1;
    }
    /* rows, cols, x's and y's offsets in elements: rows of odd widths start anywhere; x and y
     * at different distances past a vector boundary go element by element */
    const int64_t shapes[][4] = {{1, 1, 0, 0},       {3, 7, 0, 0},         {5, 33, 1, 1},
                                 {2, 1000, 0, 0},    {7, 1025, 0, 0},      {4, 1024, 1, 1},
                                 {3, 4099, 0, 0},    {2, 16384, 0, 0},     {2, 65537, 0, 0},
                                 {1, 131072, 0, 0},  {2, 1000000, 0, 0},   {9, 4103, 3, 3},
                                 {1, 262147, 5, 5},  {3, 300001, 1, 0},    {5, 50257, 7, 7},
                                 /* rows enough for the persistent variant */
                                 {300, 8200, 1, 1},  {67, 65537, 0, 0},    {67, 50257, 3, 3},
                                 /* long rows in several waves of resident's grid */
                                 {60, 300001, 2, 2}, {45, 262147, 1, 0}};
    long long checked = 0, failures = 0;
    for (int dtype = 0; dtype < 3; dtype++)
        for (const auto &sh : shapes) {
            problem p;
            p.dtype = dtype;
            p.rows = sh[0];
            p.cols = sh[1];
            p.offset = (int)sh[2];
            p.yoffset = (int)sh[3];
            problem_init(p, (unsigned)(dtype * 1000 + sh[1]));
            const int64_t key[KTUNE_MAX_KEY] = {dtype, p.rows, p.cols};
            int configs = 0;
            for (int i = 0; i < ktune__softmax_candidates_count; i++) {
                const ktune_instance *in = &ktune__softmax_candidates[i];
                if (!ktune__softmax_valid(in->variant, in->params, key, dev))
                    continue;
                configs++;
                const size_t bytes = (size_t)(p.rows * p.cols) * esize(dtype);
                const bool shared = strncmp(in->name, "split", 5) == 0 ||
                                    strncmp(in->name, "resident", 8) == 0;
                for (int inplace = 0; inplace <= (int)shared; inplace++) {
                    if (inplace)
                        CHECK(cudaMemcpy(p.dy, p.dx, bytes, cudaMemcpyDeviceToDevice));
                    else
                        CHECK(poison_late(p.dy, bytes));
                    cudaError_t e = ((ktune__softmax_launch_t *)in->launch)(
                        inplace ? p.dy : p.dx, p.dy, p.rows, p.cols, dtype, 0);
                    if (e == cudaSuccess)
                        e = cudaDeviceSynchronize();
                    long long bad = e == cudaSuccess ? check_output(p, p.dy) : -1;
                    checked++;
                    if (bad != 0) {
                        failures++;
                        printf("FAIL %s %s rows=%lld cols=%lld offsets=%d,%d%s: %s, %lld wrong\n",
                               in->name, ktune_dtype_name(dtype), (long long)p.rows,
                               (long long)p.cols, p.offset, p.yoffset, inplace ? " in place" : "",
                               cudaGetErrorString(e), bad);
                        if (e != cudaSuccess && e != cudaErrorInvalidValue)
                            return 1;
                    }
                }
            }
            /* the public entry point, out of place then in place */
            ktune_choice choice;
            ktune_status st = ktune_softmax_explain(p.rows, p.cols, (ktune_dtype)dtype, &choice);
            CHECK(poison_late(p.dy, (size_t)(p.rows * p.cols) * esize(dtype)));
            if (st == KTUNE_OK)
                st = ktune_softmax(p.dx, p.dy, p.rows, p.cols, (ktune_dtype)dtype, 0);
            CHECK(cudaDeviceSynchronize());
            long long bad = st == KTUNE_OK ? check_output(p, p.dy) : -1;
            if (st == KTUNE_OK)
                st = ktune_softmax(p.dx, p.dx, p.rows, p.cols, (ktune_dtype)dtype, 0);
            CHECK(cudaDeviceSynchronize());
            long long bad_inplace = st == KTUNE_OK ? check_output(p, p.dx) : -1;
            checked += 2;
            if (st != KTUNE_OK || bad || bad_inplace) {
                failures++;
                printf("FAIL ktune_softmax %s rows=%lld cols=%lld: %s, %lld/%lld wrong (%s)\n",
                       ktune_dtype_name(dtype), (long long)p.rows, (long long)p.cols,
                       ktune_status_string(st), bad, bad_inplace, choice.why);
            }
            /* a line a shape as it is done, so that a test that dies shows how far it got */
            printf("%s %lld x %lld, offsets %d,%d: %d configs; %lld failures so far\n",
                   ktune_dtype_name(dtype), (long long)p.rows, (long long)p.cols, p.offset,
                   p.yoffset, configs, failures);
            problem_free(p);
        }
    printf("%lld checks of %d candidate configs and ktune_softmax, %lld failures\n", checked,
           ktune__softmax_candidates_count, failures);

    /* explain, KTUNE_FORCE, bad arguments */
    ktune_choice c;
    int ok = ktune_softmax_explain(4096, 1000, KTUNE_F16, &c) == KTUNE_OK;
    printf("explain f16 4096x1000: %s (%s): %s\n", c.config, ktune_reason_string(c.reason), c.why);
    /* a default is always compiled in, and online is valid for every key */
    setenv("KTUNE_FORCE", "matmul=x,softmax=online_threads256_vec1_unroll1_per_sm0", 1);
    ktune__select_reset();
    ok &= ktune_softmax_explain(4096, 1000, KTUNE_F16, &c) == KTUNE_OK &&
          c.reason == KTUNE_REASON_FORCED && strcmp(c.config, "online_threads256_vec1_unroll1_per_sm0") == 0;
    printf("forced: %s (%s)\n", c.config ? c.config : "-", ktune_reason_string(c.reason));
    setenv("KTUNE_FORCE", "softmax=no_such_config", 1);
    ktune__select_reset();
    ok &= ktune_softmax_explain(4096, 1000, KTUNE_F16, &c) == KTUNE_ERROR_FORCED_CONFIG;
    printf("forced unknown: %s\n", c.why);
    unsetenv("KTUNE_FORCE");
    ktune__select_reset();
    ok &= ktune_softmax(NULL, NULL, 1, 1, KTUNE_F32, 0) == KTUNE_ERROR_INVALID_ARGUMENT;
    ok &= ktune_softmax_explain(0, 5, KTUNE_F32, &c) == KTUNE_ERROR_INVALID_ARGUMENT;
    if (!ok)
        printf("FAIL explain / KTUNE_FORCE / argument checks\n");
    return failures == 0 && ok ? 0 : 1;
}
