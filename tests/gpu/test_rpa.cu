/* Every rpa config of the space on odd batches: decode and prefill sequences mixed, KV lengths
 * that are not multiples of the page size, pages placed at random in a cache larger than the
 * batch, grouped-query ratios 1, 4 and 8, head_dim 64, 128 and 256, pages of 8, 16 and 24 tokens,
 * a query that attends to nothing (kv_len < q_len), bf16 and f16, on poisoned outputs, against a
 * host reference in double over the gathered pages; with a workspace (splits and their merge) and
 * without. Then the public entry point: its argument checks, total_q 0, capture in a CUDA graph
 * (with the leading decoding sequences named: a batch in two parts), and lengths and page numbers
 * outside the contract (no fault). Exits 77 without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include "bits16.h"
#include "cuda_check.h"
#include "device.h"
#include "ktune/ktune.h"
#include "rpa_instance.cuh"
#include "rpa_space.h"

extern "C" {
extern const ktune_instance ktune__rpa_candidates[];
extern const int ktune__rpa_candidates_count;
}

struct batch_case {
    int dtype, head_dim, q_heads, kv_heads, page_size;
    std::vector<int> q_lens, kv_lens;
    int decode_first; /* the leading sequences of one query: the entry point's decode_seqs */
};

struct problem {
    batch_case c;
    int64_t total_q = 0, npages = 0;
    int max_pages = 0;
    std::vector<int32_t> cu, table;
    uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
    int32_t *cu_d = nullptr, *kv_d = nullptr, *table_d = nullptr;
    void *workspace = nullptr;
    size_t workspace_bytes = 0;
    std::vector<double> ref;
};

static uint16_t *upload(std::vector<uint16_t> &h, std::vector<double> &vals, int dtype, size_t n)
{
    h.resize(n);
    vals.resize(n);
    for (size_t i = 0; i < n; i++) {
        h[i] = bits16_of((float)rand() / RAND_MAX * 2 - 1, dtype);
        vals[i] = bits16_value(h[i], dtype);
    }
    uint16_t *d;
    CHECK(cudaMalloc(&d, n * 2 + 16));
    CHECK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
    return d;
}

static float scale_of(const batch_case &c) { return 4.f / sqrtf((float)c.head_dim); }

static void problem_init(problem &p, unsigned seed)
{
    srand(seed);
    const batch_case &c = p.c;
    const int seqs = (int)c.q_lens.size(), D = c.head_dim, G = c.q_heads / c.kv_heads;
    p.cu.assign((size_t)seqs + 1, 0);
    int max_kv = 1;
    for (int s = 0; s < seqs; s++) {
        p.cu[s + 1] = p.cu[s] + c.q_lens[s];
        max_kv = c.kv_lens[s] > max_kv ? c.kv_lens[s] : max_kv;
    }
    p.total_q = p.cu[seqs];
    p.max_pages = (max_kv + c.page_size - 1) / c.page_size + 1; /* a spare column */
    int64_t used = 0;
    for (int s = 0; s < seqs; s++)
        used += (c.kv_lens[s] + c.page_size - 1) / c.page_size;
    p.npages = used * 2 + 3; /* pages at random among twice as many */
    std::vector<int32_t> order((size_t)p.npages);
    for (int64_t i = 0; i < p.npages; i++)
        order[(size_t)i] = (int32_t)i;
    for (int64_t i = p.npages - 1; i > 0; i--) {
        const int64_t j = rand() % (i + 1);
        const int32_t t = order[(size_t)i];
        order[(size_t)i] = order[(size_t)j];
        order[(size_t)j] = t;
    }
    p.table.assign((size_t)seqs * p.max_pages, -1);
    int64_t next = 0;
    for (int s = 0; s < seqs; s++)
        for (int pg = 0; pg < (c.kv_lens[s] + c.page_size - 1) / c.page_size; pg++)
            p.table[(size_t)s * p.max_pages + pg] = order[(size_t)next++];
    std::vector<uint16_t> qh, kh, vh;
    std::vector<double> qv, kv, vv;
    const size_t cache = (size_t)(p.npages * c.page_size * c.kv_heads * D);
    p.q = upload(qh, qv, c.dtype, (size_t)(p.total_q * c.q_heads * D));
    p.k = upload(kh, kv, c.dtype, cache);
    p.v = upload(vh, vv, c.dtype, cache);
    CHECK(cudaMalloc(&p.out, (size_t)(p.total_q * c.q_heads * D) * 2 + 16));
    CHECK(cudaMalloc(&p.cu_d, p.cu.size() * 4));
    CHECK(cudaMalloc(&p.kv_d, (size_t)seqs * 4));
    CHECK(cudaMalloc(&p.table_d, p.table.size() * 4));
    CHECK(cudaMemcpy(p.cu_d, p.cu.data(), p.cu.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(p.kv_d, c.kv_lens.data(), (size_t)seqs * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(p.table_d, p.table.data(), p.table.size() * 4, cudaMemcpyHostToDevice));
    p.workspace_bytes = ktune_rpa_workspace_bytes(p.total_q, c.q_heads, D, KTUNE_RPA_MAX_SPLITS);
    CHECK(cudaMalloc(&p.workspace, p.workspace_bytes + 16));

    /* the reference, in double over the gathered pages */
    const double scale = scale_of(c);
    p.ref.assign((size_t)(p.total_q * c.q_heads * D), 0);
    std::vector<double> w;
    for (int s = 0; s < seqs; s++)
        for (int j = 0; j < c.q_lens[s]; j++)
            for (int h = 0; h < c.q_heads; h++) {
                const int n = c.kv_lens[s] - c.q_lens[s] + j + 1;
                const double *qr = &qv[(size_t)(((p.cu[s] + j) * (int64_t)c.q_heads + h) * D)];
                w.assign(n > 0 ? (size_t)n : 0, 0);
                double top = -INFINITY, sum = 0;
                auto row = [&](int t) {
                    const int64_t page = p.table[(size_t)s * p.max_pages + t / c.page_size];
                    return ((page * c.page_size + t % c.page_size) * c.kv_heads + h / G) * D;
                };
                for (int t = 0; t < n; t++) {
                    double dot = 0;
                    for (int d = 0; d < D; d++)
                        dot += qr[d] * kv[(size_t)(row(t) + d)];
                    w[(size_t)t] = dot * scale;
                    top = w[(size_t)t] > top ? w[(size_t)t] : top;
                }
                for (int t = 0; t < n; t++)
                    sum += (w[(size_t)t] = exp(w[(size_t)t] - top));
                double *o = &p.ref[(size_t)(((p.cu[s] + j) * (int64_t)c.q_heads + h) * D)];
                for (int t = 0; t < n; t++)
                    for (int d = 0; d < D; d++)
                        o[d] += w[(size_t)t] / sum * vv[(size_t)(row(t) + d)];
            }
}

static void problem_free(problem &p)
{
    for (void *x : {(void *)p.q, (void *)p.k, (void *)p.v, (void *)p.out, (void *)p.cu_d,
                    (void *)p.kv_d, (void *)p.table_d, p.workspace})
        cudaFree(x);
}

static ktune_rpa_problem api_of(const problem &p, bool workspace)
{
    ktune_rpa_problem a = {};
    a.q = p.q;
    a.k_cache = p.k;
    a.v_cache = p.v;
    a.page_table = p.table_d;
    a.cu_q_lens = p.cu_d;
    a.kv_lens = p.kv_d;
    a.out = p.out;
    a.workspace = workspace ? p.workspace : nullptr;
    a.workspace_bytes = workspace ? p.workspace_bytes : 0;
    a.total_q = p.total_q;
    a.seqs = (int64_t)p.c.q_lens.size();
    a.q_heads = p.c.q_heads;
    a.kv_heads = p.c.kv_heads;
    a.head_dim = p.c.head_dim;
    a.page_size = p.c.page_size;
    a.num_pages = p.npages;
    a.max_pages = p.max_pages;
    a.scale = scale_of(p.c);
    a.dtype = (ktune_dtype)p.c.dtype;
    return a;
}

/* Elements out of tolerance (NaN counts): P and the output rounded to 16 bits. */
static long long check_output(const problem &p, int64_t *first)
{
    std::vector<uint16_t> out(p.ref.size());
    CHECK(cudaMemcpy(out.data(), p.out, out.size() * 2, cudaMemcpyDeviceToHost));
    const bool f16 = p.c.dtype == KTUNE_F16;
    const double rtol = f16 ? 1.0 / 512 : 1.0 / 128, atol = f16 ? 5e-4 : 2e-3;
    long long bad = 0;
    *first = -1;
    for (size_t i = 0; i < out.size(); i++) {
        const double got = bits16_value(out[i], p.c.dtype);
        if (!(fabs(got - p.ref[i]) <= atol + rtol * fabs(p.ref[i])) && bad++ == 0)
            *first = (int64_t)i;
    }
    return bad;
}

/* The key of a case, for the validity of a config on this device (shared memory). */
static void key_of(const problem &p, int64_t *key)
{
    const int64_t q_len = (p.total_q + (int64_t)p.c.q_lens.size() - 1) / (int64_t)p.c.q_lens.size();
    const int64_t k[7] = {p.c.dtype,   q_len,         p.c.page_size, p.c.head_dim,
                          p.c.q_heads, p.c.kv_heads, (int64_t)p.max_pages * p.c.page_size};
    for (int i = 0; i < 7; i++)
        key[i] = k[i];
}

/* Whether the device runs config `in` for this head_dim at all (any q_len): its shared memory
 * and registers; the space's constraint on tile size versus the batch is a tuning choice, not a
 * limit, and is not asked. */
static bool device_runs(const ktune_instance *in, const problem &p, const ktune_device *dev)
{
    int64_t key[KTUNE_MAX_KEY] = {0};
    key_of(p, key);
    key[1] = 1 << 20;
    return ktune__rpa_valid(in->variant, in->params, key, dev) != 0;
}

int main()
{
    gpu_test_begin();
    const ktune_device *dev;
    if (ktune__device_current(&dev) != KTUNE_OK) {
        printf("cannot read the device\n");
        return 1;
    }
    std::vector<batch_case> cases = {
        /* decode only, GQA 8, pages of 16 */
        {KTUNE_BF16, 128, 8, 1, 16, {1, 1, 1, 1, 1}, {1, 17, 300, 64, 129}, 5},
        /* decode only, long and ragged (the balanced split's pieces cross sequences and cut
         * items in many shares), a sequence without keys, GQA 32 (two row tiles of 16) */
        {KTUNE_F16, 64, 32, 1, 16, {1, 1, 1, 1, 1, 1, 1}, {3001, 0, 1, 4097, 17, 2500, 640}, 7},
        /* mixed: prefill with a cached prefix, decode, a prefill of the whole sequence */
        {KTUNE_F16, 128, 32, 8, 16, {37, 1, 5, 1, 70}, {100, 250, 5, 1, 70}, 0},
        /* MHA, pages of 24 tokens, head_dim 64 */
        {KTUNE_BF16, 64, 6, 6, 24, {1, 19, 3}, {95, 19, 400}, 1},
        /* head_dim 256, GQA 2, pages of 8 */
        {KTUNE_F16, 256, 4, 2, 8, {9, 1}, {40, 77}, 0},
        /* a long prefill (tiles of many steps) and a query that attends to nothing */
        {KTUNE_BF16, 128, 16, 2, 16, {130, 3}, {700, 2}, 0},
        /* decoding sequences first, then prefills: the entry point runs them as two parts */
        {KTUNE_F16, 128, 16, 2, 16, {1, 1, 1, 40, 9, 1}, {300, 20, 77, 100, 9, 33}, 3},
    };
    long long checked = 0, failures = 0, refused = 0;
    for (size_t ci = 0; ci < cases.size(); ci++) {
        problem p;
        p.c = cases[ci];
        problem_init(p, (unsigned)(ci * 7919 + 13));
        for (int withws = 0; withws < 2; withws++) {
            const ktune_rpa_problem a = api_of(p, withws != 0);
            for (int i = 0; i < ktune__rpa_candidates_count; i++) {
                const ktune_instance *in = &ktune__rpa_candidates[i];
                if (!device_runs(in, p, dev)) {
                    refused++;
                    continue;
                }
                CHECK(poison_late(p.out, p.ref.size() * 2));
                cudaError_t e = ((ktune__rpa_launch_t *)in->launch)(&a, 0);
                if (e == cudaSuccess)
                    e = cudaDeviceSynchronize();
                int64_t first = -1;
                const long long bad = e == cudaSuccess ? check_output(p, &first) : -1;
                checked++;
                if (bad != 0) {
                    failures++;
                    const int64_t D = p.c.head_dim;
                    printf("FAIL %s case %zu (%s hd%d %d/%d heads, page %d, %s workspace): %s, "
                           "%lld wrong, first at token %lld head %lld element %lld\n",
                           in->name, ci, ktune_dtype_name(p.c.dtype), p.c.head_dim, p.c.q_heads,
                           p.c.kv_heads, p.c.page_size, withws ? "with" : "without",
                           cudaGetErrorString(e), bad,
                           (long long)(first < 0 ? -1 : first / D / p.c.q_heads),
                           (long long)(first < 0 ? -1 : first / D % p.c.q_heads),
                           (long long)(first < 0 ? -1 : first % D));
                    if (e != cudaSuccess && e != cudaErrorInvalidValue &&
                        e != cudaErrorNotSupported)
                        return 1;
                }
            }
        }
        /* the public entry point, captured in a graph and replayed, with the case's leading
         * decoding sequences named (two parts where they are some of the sequences) */
        cudaStream_t s;
        CHECK(cudaStreamCreate(&s));
        ktune_rpa_problem a = api_of(p, true);
        a.decode_seqs = p.c.decode_first;
        const ktune_status st = replay_in_graph(s, [&](cudaStream_t gs) {
            CHECK(poison_late(p.out, p.ref.size() * 2, gs));
            return ktune_rpa(&a, gs);
        });
        int64_t first;
        const long long bad = st == KTUNE_OK ? check_output(p, &first) : -1;
        checked++;
        if (st != KTUNE_OK || bad) {
            failures++;
            printf("FAIL ktune_rpa case %zu (decode_seqs %d) in a graph: %s, %lld wrong\n", ci,
                   p.c.decode_first, ktune_status_string(st), bad);
        }
        CHECK(cudaStreamDestroy(s));

        if (ci == 2) {
            /* argument checks */
            struct bad_case {
                const char *what;
                void (*spoil)(ktune_rpa_problem &);
            } bads[] = {
                {"head_dim 96", [](ktune_rpa_problem &x) { x.head_dim = 96; }},
                {"q_heads not a multiple of kv_heads",
                 [](ktune_rpa_problem &x) { x.q_heads = 30; }},
                {"page_size 12", [](ktune_rpa_problem &x) { x.page_size = 12; }},
                {"seqs 0", [](ktune_rpa_problem &x) { x.seqs = 0; }},
                {"q misaligned", [](ktune_rpa_problem &x) { x.q = (const char *)x.q + 2; }},
                {"no page table", [](ktune_rpa_problem &x) { x.page_table = nullptr; }},
                {"workspace misaligned",
                 [](ktune_rpa_problem &x) { x.workspace = (char *)x.workspace + 4; }},
                {"scale NaN", [](ktune_rpa_problem &x) { x.scale = NAN; }},
                {"dtype f32", [](ktune_rpa_problem &x) { x.dtype = KTUNE_F32; }},
                {"decode_seqs past seqs", [](ktune_rpa_problem &x) { x.decode_seqs = x.seqs + 1; }},
                {"decode_seqs -1", [](ktune_rpa_problem &x) { x.decode_seqs = -1; }},
            };
            for (const bad_case &b : bads) {
                ktune_rpa_problem x = api_of(p, true);
                b.spoil(x);
                checked++;
                const ktune_status got = ktune_rpa(&x, 0);
                if (got != KTUNE_ERROR_INVALID_ARGUMENT) {
                    failures++;
                    printf("FAIL ktune_rpa with %s: %s, not invalid argument\n", b.what,
                           ktune_status_string(got));
                }
            }
            ktune_rpa_problem empty = api_of(p, true);
            empty.total_q = 0;
            checked++;
            if (ktune_rpa(&empty, 0) != KTUNE_OK) {
                failures++;
                printf("FAIL ktune_rpa with total_q 0\n");
            }
        }
        if (ci <= 2) {
            /* lengths and pages outside the contract, for a decode batch (its balanced split)
             * and a mixed one: unspecified output, no fault */
            ktune_rpa_problem a = api_of(p, true);
            std::vector<int32_t> cu = p.cu, kv = p.c.kv_lens, table = p.table;
            cu[1] = -5;
            cu[2] = 1 << 30;
            kv[0] = 1 << 30;
            kv[3] = -7;
            for (size_t i = 0; i < table.size(); i += 3)
                table[i] = (int32_t)(i % 2 ? -100 : 1 << 29);
            CHECK(cudaMemcpy(p.cu_d, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice));
            CHECK(cudaMemcpy(p.kv_d, kv.data(), kv.size() * 4, cudaMemcpyHostToDevice));
            CHECK(cudaMemcpy(p.table_d, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
            for (int i = 0; i < ktune__rpa_candidates_count; i++) {
                const ktune_instance *in = &ktune__rpa_candidates[i];
                if (!device_runs(in, p, dev))
                    continue;
                cudaError_t e = ((ktune__rpa_launch_t *)in->launch)(&a, 0);
                if (e == cudaSuccess)
                    e = cudaDeviceSynchronize();
                checked++;
                if (e != cudaSuccess && e != cudaErrorNotSupported) {
                    printf("FAIL %s on hostile lengths and pages: %s\n", in->name,
                           cudaGetErrorString(e));
                    return 1;
                }
            }
            CHECK(cudaMemcpy(p.cu_d, p.cu.data(), p.cu.size() * 4, cudaMemcpyHostToDevice));
            CHECK(cudaMemcpy(p.kv_d, p.c.kv_lens.data(), kv.size() * 4, cudaMemcpyHostToDevice));
            CHECK(cudaMemcpy(p.table_d, p.table.data(), table.size() * 4, cudaMemcpyHostToDevice));
        }
        problem_free(p);
    }
    printf("%lld checks of %d candidate configs and ktune_rpa, %lld failures; %lld launches of "
           "configs this device cannot run skipped\n",
           checked, ktune__rpa_candidates_count, failures, refused);
    return failures ? 1 : 0;
}
