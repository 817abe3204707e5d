/* Every qkattn config of the space on odd shapes: sequence lengths of 1, 37, 200 and 517 (tails
 * of every tile and quantization block), batch 2 x 3 heads and 1 x 1, head_dim 64 and 128, causal
 * and not, bf16 and f16, and 1100 and 1500 tokens (the stream variant's runs then hold several
 * segments, and its tiles are cut between several blocks); inputs uniform in [-1, 1), the same
 * with 4 of k's channels outliers (50 (x + 1) / 2: 50 times larger, a mean of 25), and the same
 * with the keys of the second half of the sequence 16 times larger (a row's running max moves by
 * far more than the walk's slack on a late step, so that its weights and output are rescaled
 * there), on poisoned outputs. Against a host reference in double: no output left NaN or
 * infinite, cosine similarity >= 0.999 and relative L1 <= 0.03 (include/ktune/qkattn.h's
 * promise). Then the public entry point: its argument checks and its capture in a CUDA graph.
 * Prints each case's worst figures as it goes. Exits 77 without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include "bits16.h"
#include "cuda_check.h"
#include "device.h"
#include "ktune/ktune.h"
#include "qkattn_instance.cuh"
#include "qkattn_space.h"

extern "C" {
extern const ktune_instance ktune__qkattn_candidates[];
extern const int ktune__qkattn_candidates_count;
}

struct attn_case {
    int dtype, batch, heads, seq, head_dim, causal;
};

struct problem {
    attn_case c;
    int64_t elems = 0;
    uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
    void *workspace = nullptr;
    size_t workspace_bytes = 0;
    std::vector<double> ref;
};

static float scale_of(const attn_case &c) { return 1.f / sqrtf((float)c.head_dim); }

/* The inputs of a case: uniform; 4 of k's channels 50 (x + 1) / 2; the second half's keys x 16. */
enum input_kind { UNIFORM, OUTLIERS, LATE_KEYS, INPUT_KINDS };
static const char *const input_names[INPUT_KINDS] = {"uniform", "outliers", "late keys"};

/* Random inputs of a kind, uploaded, and the reference. */
static void problem_init(problem &p, unsigned seed, input_kind kind)
{
    srand(seed);
    const attn_case &c = p.c;
    const int D = c.head_dim, S = c.seq, BH = c.batch * c.heads;
    p.elems = (int64_t)BH * S * D;
    std::vector<uint16_t> h[3];
    std::vector<double> val[3];
    uint16_t **dev[3] = {&p.q, &p.k, &p.v};
    for (int t = 0; t < 3; t++) {
        h[t].resize((size_t)p.elems);
        val[t].resize((size_t)p.elems);
        for (int64_t i = 0; i < p.elems; i++) {
            float x = (float)rand() / RAND_MAX * 2 - 1;
            const int ch = (int)(i % D);
            if (t == 1 && kind == OUTLIERS && ch % (D / 4) == 5)
                x = 50.f * (x + 1.f) / 2;
            if (t == 1 && kind == LATE_KEYS && i / D % S >= S / 2)
                x *= 16.f;
            h[t][(size_t)i] = bits16_of(x, c.dtype);
            val[t][(size_t)i] = bits16_value(h[t][(size_t)i], c.dtype);
        }
        CHECK(cudaMalloc(dev[t], (size_t)p.elems * 2));
        CHECK(cudaMemcpy(*dev[t], h[t].data(), (size_t)p.elems * 2, cudaMemcpyHostToDevice));
    }
    CHECK(cudaMalloc(&p.out, (size_t)p.elems * 2));
    p.workspace_bytes = ktune_qkattn_workspace_bytes(c.batch, c.heads, S, D);
    CHECK(cudaMalloc(&p.workspace, p.workspace_bytes));
    p.ref.assign((size_t)p.elems, 0.0);
    std::vector<double> w((size_t)S);
    const double scale = scale_of(c);
    for (int bh = 0; bh < BH; bh++)
        for (int r = 0; r < S; r++) {
            const double *qr = &val[0][((size_t)bh * S + r) * D];
            const int keys = c.causal ? r + 1 : S;
            double top = -INFINITY, sum = 0;
            for (int j = 0; j < keys; j++) {
                const double *kr = &val[1][((size_t)bh * S + j) * D];
                double dot = 0;
                for (int d = 0; d < D; d++)
                    dot += qr[d] * kr[d];
                w[(size_t)j] = dot * scale;
                top = w[(size_t)j] > top ? w[(size_t)j] : top;
            }
            for (int j = 0; j < keys; j++)
                sum += (w[(size_t)j] = exp(w[(size_t)j] - top));
            double *o = &p.ref[((size_t)bh * S + r) * D];
            for (int j = 0; j < keys; j++) {
                const double *vr = &val[2][((size_t)bh * S + j) * D];
                for (int d = 0; d < D; d++)
                    o[d] += w[(size_t)j] / sum * vr[d];
            }
        }
}

static void problem_free(problem &p)
{
    CHECK(cudaFree(p.q));
    CHECK(cudaFree(p.k));
    CHECK(cudaFree(p.v));
    CHECK(cudaFree(p.out));
    CHECK(cudaFree(p.workspace));
}

static ktune_qkattn_problem api_of(const problem &p)
{
    ktune_qkattn_problem a = {};
    a.q = p.q;
    a.k = p.k;
    a.v = p.v;
    a.out = p.out;
    a.workspace = p.workspace;
    a.workspace_bytes = p.workspace_bytes;
    a.batch = p.c.batch;
    a.heads = p.c.heads;
    a.seq_len = p.c.seq;
    a.head_dim = p.c.head_dim;
    a.causal = p.c.causal;
    a.scale = scale_of(p.c);
    a.dtype = (ktune_dtype)p.c.dtype;
    return a;
}

struct accuracy {
    long long nonfinite;
    double cosine, rel_l1;
    bool ok() const { return nonfinite == 0 && cosine >= 0.999 && rel_l1 <= 0.03; }
};

static accuracy check_output(const problem &p)
{
    std::vector<uint16_t> out(p.ref.size());
    CHECK(cudaMemcpy(out.data(), p.out, out.size() * 2, cudaMemcpyDeviceToHost));
    accuracy a = {0, 0, 0};
    double dot = 0, oo = 0, rr = 0, l1 = 0, r1 = 0;
    for (size_t i = 0; i < out.size(); i++) {
        const double got = bits16_value(out[i], p.c.dtype), want = p.ref[i];
        if (!isfinite(got)) {
            a.nonfinite++;
            continue;
        }
        dot += got * want;
        oo += got * got;
        rr += want * want;
        l1 += fabs(got - want);
        r1 += fabs(want);
    }
    a.cosine = dot / sqrt(oo * rr);
    a.rel_l1 = l1 / r1;
    return a;
}

/* Whether the device runs config `in` for this case's head_dim at all (shared memory, registers;
 * the tile's size against seq_len is a tuning choice, not a limit, and is not asked). */
static bool device_runs(const ktune_instance *in, const problem &p, const ktune_device *dev)
{
    const int64_t key[KTUNE_MAX_KEY] = {p.c.dtype, p.c.batch, p.c.heads, 1 << 20, p.c.head_dim,
                                        p.c.causal + 1};
    return ktune__qkattn_valid(in->variant, in->params, key, dev) != 0;
}

int main()
{
    gpu_test_begin();
    const ktune_device *dev;
    if (ktune__device_current(&dev) != KTUNE_OK) {
        printf("cannot read the device\n");
        return 1;
    }
    const std::vector<attn_case> cases = {
        {KTUNE_F16, 2, 3, 200, 128, 0},  {KTUNE_BF16, 2, 3, 200, 128, 1},
        {KTUNE_F16, 1, 1, 517, 64, 1},   {KTUNE_BF16, 1, 1, 517, 64, 0},
        {KTUNE_F16, 1, 2, 37, 128, 1},   {KTUNE_BF16, 1, 1, 1, 128, 0},
        {KTUNE_F16, 2, 1, 1, 64, 1},     {KTUNE_F16, 1, 2, 1500, 128, 0},
        {KTUNE_BF16, 1, 3, 1100, 64, 1},
    };
    long long checked = 0, failures = 0, refused = 0;
    double worst_cos[INPUT_KINDS] = {1, 1, 1}, worst_l1[INPUT_KINDS] = {0, 0, 0};
    for (size_t ci = 0; ci < cases.size(); ci++)
        for (int kind = 0; kind < INPUT_KINDS; kind++) {
            problem p;
            p.c = cases[ci];
            problem_init(p, (unsigned)(ci * 7919 + 13 + kind), (input_kind)kind);
            const ktune_qkattn_problem a = api_of(p);
            const attn_case &c = p.c;
            int ran = 0;
            double case_cos = 1, case_l1 = 0;
            for (int i = 0; i < ktune__qkattn_candidates_count; i++) {
                const ktune_instance *in = &ktune__qkattn_candidates[i];
                if (!device_runs(in, p, dev)) {
                    refused++;
                    continue;
                }
                CHECK(cudaMemset(p.out, 0xff, (size_t)p.elems * 2));
                cudaError_t e = ((ktune__qkattn_launch_t *)in->launch)(&a, 0);
                if (e == cudaSuccess)
                    e = cudaDeviceSynchronize();
                checked++;
                ran++;
                const accuracy acc = e == cudaSuccess ? check_output(p) : accuracy{-1, 0, 1};
                if (e == cudaSuccess) {
                    case_cos = fmin(case_cos, acc.cosine);
                    case_l1 = fmax(case_l1, acc.rel_l1);
                }
                if (!acc.ok()) {
                    failures++;
                    printf("FAIL %s case %zu (%s %dx%d heads, seq %d, hd%d, %s, %s): %s, "
                           "%lld not finite, cosine %.6f, relative L1 %.5f\n",
                           in->name, ci, ktune_dtype_name(c.dtype), c.batch, c.heads, c.seq,
                           c.head_dim, c.causal ? "causal" : "full", input_names[kind],
                           cudaGetErrorString(e),
                           acc.nonfinite, acc.cosine, acc.rel_l1);
                    if (e != cudaSuccess && e != cudaErrorNotSupported)
                        return 1;
                }
            }
            worst_cos[kind] = fmin(worst_cos[kind], case_cos);
            worst_l1[kind] = fmax(worst_l1[kind], case_l1);
            printf("case %zu (%s %dx%d heads, seq %d, hd%d, %s), %s: %d configs, worst cosine "
                   "%.6f, relative L1 %.5f\n",
                   ci, ktune_dtype_name(c.dtype), c.batch, c.heads, c.seq, c.head_dim,
                   c.causal ? "causal" : "full", input_names[kind], ran, case_cos, case_l1);
            /* the public entry point, captured in a graph and replayed */
            cudaStream_t s;
            CHECK(cudaStreamCreate(&s));
            CHECK(cudaMemset(p.out, 0xff, (size_t)p.elems * 2));
            const ktune_status st =
                replay_in_graph(s, [&](cudaStream_t gs) { return ktune_qkattn(&a, gs); });
            const accuracy acc = st == KTUNE_OK ? check_output(p) : accuracy{-1, 0, 1};
            checked++;
            if (st != KTUNE_OK || !acc.ok()) {
                failures++;
                printf("FAIL ktune_qkattn case %zu in a graph: %s, cosine %.6f, relative L1 "
                       "%.5f\n",
                       ci, ktune_status_string(st), acc.cosine, acc.rel_l1);
            }
            CHECK(cudaStreamDestroy(s));

            if (ci == 0 && kind == UNIFORM) {
                struct bad_case {
                    const char *what;
                    void (*spoil)(ktune_qkattn_problem &);
                } bads[] = {
                    {"head_dim 96", [](ktune_qkattn_problem &x) { x.head_dim = 96; }},
                    {"seq_len 0", [](ktune_qkattn_problem &x) { x.seq_len = 0; }},
                    {"batch 0", [](ktune_qkattn_problem &x) { x.batch = 0; }},
                    {"batch x heads 65536", [](ktune_qkattn_problem &x) {
                         x.batch = 256;
                         x.heads = 256;
                     }},
                    {"causal 2", [](ktune_qkattn_problem &x) { x.causal = 2; }},
                    {"scale 0", [](ktune_qkattn_problem &x) { x.scale = 0.f; }},
                    {"scale NaN", [](ktune_qkattn_problem &x) { x.scale = NAN; }},
                    {"dtype f32", [](ktune_qkattn_problem &x) { x.dtype = KTUNE_F32; }},
                    {"q misaligned", [](ktune_qkattn_problem &x) { x.q = (const char *)x.q + 2; }},
                    {"no out", [](ktune_qkattn_problem &x) { x.out = nullptr; }},
                    {"no workspace", [](ktune_qkattn_problem &x) { x.workspace = nullptr; }},
                    {"workspace short",
                     [](ktune_qkattn_problem &x) { x.workspace_bytes -= 256; }},
                    {"workspace misaligned",
                     [](ktune_qkattn_problem &x) { x.workspace = (char *)x.workspace + 16; }},
                };
                for (const bad_case &b : bads) {
                    ktune_qkattn_problem x = a;
                    b.spoil(x);
                    checked++;
                    const ktune_status got = ktune_qkattn(&x, 0);
                    if (got != KTUNE_ERROR_INVALID_ARGUMENT) {
                        failures++;
                        printf("FAIL ktune_qkattn with %s: %s, not invalid argument\n", b.what,
                               ktune_status_string(got));
                    }
                }
                checked++;
                if (ktune_qkattn_workspace_bytes(1, 1, 0, 128) != 0 ||
                    ktune_qkattn_workspace_bytes(1, 1, 1, 128) < 2 * 128) {
                    failures++;
                    printf("FAIL ktune_qkattn_workspace_bytes on 0 and 1 tokens\n");
                }
            }
            problem_free(p);
        }
    printf("%lld checks of %d candidate configs and ktune_qkattn, %lld failures; %lld launches of "
           "configs this device cannot run skipped; worst cosine",
           checked, ktune__qkattn_candidates_count, failures, refused);
    for (int kind = 0; kind < INPUT_KINDS; kind++)
        printf(" %.6f (%s)", worst_cos[kind], input_names[kind]);
    printf(", worst relative L1");
    for (int kind = 0; kind < INPUT_KINDS; kind++)
        printf(" %.5f (%s)", worst_l1[kind], input_names[kind]);
    printf("\n");
    return failures ? 1 : 0;
}
