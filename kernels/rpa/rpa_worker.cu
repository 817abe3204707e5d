/* The rpa family's side of a sweep worker: the batch of a key, its paged KV cache, the fp32
 * reference.
 *
 * The batch of a key (dtype, q_len, page_size, head_dim, q_heads, kv_heads, max_len), drawn by a
 * generator seeded by the key (the same batch on every run and machine):
 *   - seqs = 8192 / q_len sequences, at least 1 and at most 64;
 *   - q_len 1: every sequence decodes (one query); q_len > 1: a mixed batch, seqs / 2 decoding
 *     and the others in prefill with ragged query lengths (at most 4 q_len and max_len each) that
 *     bring the batch's queries to seqs * q_len;
 *   - each sequence's KV length: its queries plus a cached prefix uniform in [0, max_len - its
 *     queries];
 *   - the page table: max_len / page_size pages a sequence, its pages drawn at random from a cache
 *     an eighth larger than the batch needs (ktune_workload_page_table).
 * Inputs uniform in [-1, 1); scale 4 / sqrt(head_dim), so that the softmax is peaked enough for a
 * misplaced key to show in the check. The reference: fp32 attention over the gathered pages
 * (a block a query row), checked within the output's rounding: |out - ref| <= atol + rtol |ref|,
 * (atol, rtol) = (2e-3, 2^-7) for bf16 and (5e-4, 2^-9) for f16: P rounded to 16 bits before P V
 * is off by at most one rounding a weight.
 *
 * Bytes one launch moves: the keys and values of the batch's KV lengths, q, out and the page
 * table's rows; the copy anchor copies as many. */
#include <math.h>
#include <stdio.h>

#include <vector>

#include "rpa_instance.cuh"
#include "worker.h"
#include "worker_check.cuh"
#include "workload.h"

extern "C" {
extern const ktune_instance ktune__rpa_candidates[];
extern const int ktune__rpa_candidates_count;
}

namespace {

const int max_sets = 64;
const uint64_t batch_seed = 0x727061; /* the batch of a key, the same on every machine */

/* A key's batch on the host. */
struct batch {
    int seqs = 0, max_pages = 0;
    int64_t npages = 0, total_q = 0;
    std::vector<int32_t> cu_q, kv_lens, table;
};

/* The batch of key (the header's rule); false where the key is not one the worker can build. */
bool batch_of(const int64_t *key, batch &b)
{
    const int64_t q_len = key[1], page = key[2], hd = key[3], qh = key[4], kvh = key[5],
                  max_len = key[6];
    if (page < 8 || page > 1024 || max_len < page || max_len % page != 0 || max_len > (1 << 20) ||
        q_len < 1 || q_len > max_len || kvh < 1 || qh % kvh != 0 ||
        (hd != 64 && hd != 128 && hd != 256))
        return false;
    ktune_rng rng;
    ktune_rng_seed(&rng, batch_seed, key, 7);
    const int seqs = (int)(q_len >= 8192 ? 1 : 8192 / q_len > 64 ? 64 : 8192 / q_len);
    b.seqs = seqs;
    b.max_pages = (int)(max_len / page);
    std::vector<int32_t> q(seqs, 1);
    if (q_len > 1 && seqs > 1) {
        const int decode = seqs / 2, prefill = seqs - decode;
        const int64_t want = (int64_t)seqs * q_len - decode;
        const int64_t cap = 4 * q_len < max_len ? 4 * q_len : max_len;
        if (ktune_workload_lengths(&rng, prefill, want, cap, q.data() + decode) != 0)
            return false;
        for (int i = seqs - 1; i > 0; i--) { /* decode and prefill sequences in no order */
            const int j = (int)ktune_rng_below(&rng, i + 1);
            const int32_t t = q[i];
            q[i] = q[j];
            q[j] = t;
        }
    } else if (q_len > 1) {
        q[0] = (int32_t)q_len;
    }
    b.cu_q.assign((size_t)seqs + 1, 0);
    b.kv_lens.assign((size_t)seqs, 0);
    int64_t pages = 0;
    for (int s = 0; s < seqs; s++) {
        b.cu_q[s + 1] = b.cu_q[s] + q[s];
        b.kv_lens[s] = q[s] + (int32_t)ktune_rng_below(&rng, max_len - q[s] + 1);
        pages += (b.kv_lens[s] + page - 1) / page;
    }
    b.total_q = b.cu_q[seqs];
    b.npages = pages + pages / 8 + 1;
    b.table.assign((size_t)seqs * b.max_pages, -1);
    return ktune_workload_page_table(&rng, seqs, b.kv_lens.data(), (int)page, b.max_pages,
                                     b.npages, b.table.data()) >= 0;
}

struct state {
    int64_t key[7] = {};
    batch b;
    int sets = 0;
    void *q[max_sets] = {}, *k[max_sets] = {}, *v[max_sets] = {}, *out[max_sets] = {};
    int32_t *table = nullptr, *cu_q = nullptr, *kv_lens = nullptr;
    void *workspace = nullptr;
    size_t workspace_bytes = 0;
    float *ref = nullptr;
    void *scratch = nullptr;
    size_t copy_bytes = 0;
    ktune_rpa_problem problem(int set) const
    {
        ktune_rpa_problem p = {};
        p.q = q[set];
        p.k_cache = k[set];
        p.v_cache = v[set];
        p.page_table = table;
        p.cu_q_lens = cu_q;
        p.kv_lens = kv_lens;
        p.out = out[set];
        p.workspace = workspace;
        p.workspace_bytes = workspace_bytes;
        p.total_q = b.total_q;
        p.seqs = b.seqs;
        p.q_heads = key[4];
        p.kv_heads = key[5];
        p.head_dim = key[3];
        p.page_size = key[2];
        p.num_pages = b.npages;
        p.max_pages = b.max_pages;
        p.scale = 4.f / sqrtf((float)key[3]);
        p.dtype = (ktune_dtype)key[0];
        return p;
    }
} st;

/* fp32 attention of query row (blockIdx.x: a query token, blockIdx.y: a q head) over the gathered
 * pages, D threads a block: the scores of a chunk of 64 keys in shared memory (a warp a key at a
 * time, its lanes along the row), then each thread's output element. */
template <typename T>
__global__ void reference(ktune_rpa_problem p, float *ref)
{
    constexpr int CHUNK = 64;
    extern __shared__ float sh[]; /* D query values, then CHUNK scores */
    const int D = (int)p.head_dim, d = threadIdx.x, tok = blockIdx.x, h = blockIdx.y;
    const int warp = d / 32, lane = d % 32, warps = D / 32;
    float *qv = sh, *sc = sh + D;
    int lo = 0, hi = (int)p.seqs - 1; /* the sequence of tok: the last s with cu_q[s] <= tok */
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (p.cu_q_lens[mid] <= tok)
            lo = mid;
        else
            hi = mid - 1;
    }
    const int s = lo, q_len = p.cu_q_lens[s + 1] - p.cu_q_lens[s], kv_len = p.kv_lens[s];
    const int n = kv_len - q_len + (tok - p.cu_q_lens[s]) + 1, G = (int)(p.q_heads / p.kv_heads);
    const T *q = static_cast<const T *>(p.q), *kc = static_cast<const T *>(p.k_cache),
            *vc = static_cast<const T *>(p.v_cache);
    auto row = [&](int t) {
        const int64_t page = p.page_table[(int64_t)s * p.max_pages + t / p.page_size];
        return ((page * p.page_size + t % p.page_size) * p.kv_heads + h / G) * D;
    };
    qv[d] = (float)q[((int64_t)tok * p.q_heads + h) * D + d];
    float m = -INFINITY, l = 0.f, acc = 0.f;
    for (int c0 = 0; c0 < n; c0 += CHUNK) {
        const int cn = n - c0 < CHUNK ? n - c0 : CHUNK;
        __syncthreads();
        for (int i = warp; i < cn; i += warps) {
            const T *kr = kc + row(c0 + i);
            float dot = 0.f;
            for (int e = lane; e < D; e += 32)
                dot += qv[e] * (float)kr[e];
            for (int o = 16; o > 0; o >>= 1)
                dot += __shfl_xor_sync(~0u, dot, o);
            if (lane == 0)
                sc[i] = dot * p.scale;
        }
        __syncthreads();
        float cm = m;
        for (int i = 0; i < cn; i++)
            cm = fmaxf(cm, sc[i]);
        const float corr = expf(m - cm);
        l *= corr;
        acc *= corr;
        for (int i = 0; i < cn; i++) {
            const float w = expf(sc[i] - cm);
            l += w;
            acc += w * (float)vc[row(c0 + i) + d];
        }
        m = cm;
    }
    ref[((int64_t)tok * p.q_heads + h) * D + d] = l > 0.f ? acc / l : 0.f;
}

/* Each set's q (qn elements), k and v (cn each), `stride` elements from a set's to the next's,
 * uniform in [-1, 1) from the seed. */
template <typename T> void fill(int64_t qn, int64_t cn, int64_t stride, int sets, uint64_t seed)
{
    using ktune_worker_check::fill_sets;
    fill_sets((T *)st.q[0], qn, stride, sets, seed, 3, -1.f, 1.f);
    fill_sets((T *)st.k[0], cn, stride, sets, seed + 1, 3, -1.f, 1.f);
    fill_sets((T *)st.v[0], cn, stride, sets, seed + 2, 3, -1.f, 1.f);
}

void release() /* the buffers are the worker's arena */
{
    st = state();
}

int64_t kv_bytes(const int64_t *key, const batch &b)
{
    int64_t tokens = 0;
    for (int s = 0; s < b.seqs; s++)
        tokens += b.kv_lens[s];
    return tokens * key[5] * key[3] * 2 * 2;
}

/* Bytes a launch moves on batch b of key: the keys and values it reads, q, out, the page
 * table's rows. */
double bytes_of(const int64_t *key, const batch &b)
{
    return (double)kv_bytes(key, b) + 2.0 * 2 * b.total_q * key[4] * key[3] +
           4.0 * b.seqs * b.max_pages;
}

double bytes(const int64_t *key)
{
    batch b;
    return batch_of(key, b) ? bytes_of(key, b) : 0;
}

/* 4 flops a (query, head, key attended, element): Q K^T and P V. */
double flops(const int64_t *key)
{
    batch b;
    if (!batch_of(key, b))
        return 0;
    double pairs = 0;
    for (int s = 0; s < b.seqs; s++) {
        const int64_t q = b.cu_q[s + 1] - b.cu_q[s], kv = b.kv_lens[s];
        pairs += (double)q * (kv - q) + (double)q * (q + 1) / 2;
    }
    return 4.0 * pairs * key[4] * key[3];
}

int prepare(const int64_t *key, int64_t l2_bytes, cudaError_t *error)
{
    static uint64_t seed = 1;
    for (int i = 0; i < 7; i++)
        st.key[i] = key[i];
    cudaError_t e = (key[0] == KTUNE_F16 || key[0] == KTUNE_BF16) && batch_of(key, st.b)
                        ? cudaSuccess
                        : cudaErrorInvalidValue;
    const batch &b = st.b;
    const int64_t hd = key[3], qh = key[4], kvh = key[5];
    const size_t qbytes = (size_t)(b.total_q * qh * hd * 2),
                 cache = (size_t)(b.npages * key[2] * kvh * hd * 2),
                 tbytes = b.table.size() * 4, sbytes = (b.cu_q.size() + b.kv_lens.size()) * 4;
    /* the workspace of the most splits any config takes for this batch (the largest tiles, at
     * most 32 blocks an SM) */
    ktune_rpa_problem probe = st.problem(0);
    probe.workspace_bytes = SIZE_MAX;
    int sms = 0, device = 0;
    if (e == cudaSuccess)
        e = cudaGetDevice(&device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    const int splits =
        e == cudaSuccess
            ? ktune_rpa_impl::splits_for(probe, 128, KTUNE_RPA_MAX_SPLITS, (int64_t)sms * 32)
            : 1;
    st.workspace_bytes = ktune_rpa_impl::workspace_bytes(b.total_q, qh, hd, splits);
    using ktune_worker_check::carver;
    const size_t set_bytes = carver::round(qbytes) * 2 + carver::round(cache) * 2;
    const int sets = ktune_worker_check::rotating_sets((int64_t)set_bytes, l2_bytes, max_sets);
    st.copy_bytes = e == cudaSuccess ? (size_t)bytes_of(key, b) : 0;
    const size_t ref_bytes = (size_t)(b.total_q * qh * hd) * 4;
    carver c{e == cudaSuccess
                 ? (char *)ktune_worker_arena((size_t)sets * set_bytes + carver::round(tbytes) +
                                                  carver::round(sbytes) * 2 +
                                                  carver::round(st.workspace_bytes) +
                                                  carver::round(ref_bytes) +
                                                  carver::round(st.copy_bytes),
                                              &e)
                 : nullptr};
    if (c.at) {
        for (int s = 0; s < sets; s++) { /* a set's k, v, q and out together: the copy's source */
            st.k[s] = c.take(cache);
            st.v[s] = c.take(cache);
            st.q[s] = c.take(qbytes);
            st.out[s] = c.take(qbytes);
        }
        st.table = (int32_t *)c.take(tbytes);
        st.cu_q = (int32_t *)c.take(sbytes);
        st.kv_lens = (int32_t *)c.take(sbytes);
        st.workspace = st.workspace_bytes ? c.take(st.workspace_bytes) : nullptr;
        st.ref = (float *)c.take(ref_bytes);
        st.scratch = c.take(st.copy_bytes);
        st.sets = sets;
        seed += 3;
        /* each set's q, k and v, from the seed */
        const int64_t qn = b.total_q * qh * hd, cn = b.npages * key[2] * kvh * hd;
        const int64_t stride = (int64_t)(set_bytes / 2); /* elements from a set's to the next's */
        if (key[0] == KTUNE_F16)
            fill<__half>(qn, cn, stride, sets, seed);
        else
            fill<__nv_bfloat16>(qn, cn, stride, sets, seed);
        e = cudaMemcpy(st.table, b.table.data(), tbytes, cudaMemcpyHostToDevice);
        if (e == cudaSuccess)
            e = cudaMemcpy(st.cu_q, b.cu_q.data(), b.cu_q.size() * 4, cudaMemcpyHostToDevice);
        if (e == cudaSuccess)
            e = cudaMemcpy(st.kv_lens, b.kv_lens.data(), b.kv_lens.size() * 4,
                           cudaMemcpyHostToDevice);
        if (e == cudaSuccess && b.total_q > 0) {
            const ktune_rpa_problem p = st.problem(0);
            const dim3 grid((unsigned)b.total_q, (unsigned)qh);
            const size_t sh = (size_t)(hd + 64) * 4;
            if (key[0] == KTUNE_F16)
                reference<__half><<<grid, (unsigned)hd, sh>>>(p, st.ref);
            else
                reference<__nv_bfloat16><<<grid, (unsigned)hd, sh>>>(p, st.ref);
            e = cudaGetLastError();
        }
        if (e == cudaSuccess)
            e = cudaDeviceSynchronize();
    }
    if (e != cudaSuccess) {
        *error = e;
        release();
        return -1;
    }
    return st.sets;
}

cudaError_t launch(int instance, int set, cudaStream_t stream)
{
    ktune__rpa_launch_t *fn = (ktune__rpa_launch_t *)ktune__rpa_candidates[instance].launch;
    const ktune_rpa_problem p = st.problem(set);
    return fn(&p, stream);
}

cudaError_t check_poison(cudaStream_t stream)
{
    return cudaMemsetAsync(st.out[0], 0xff, (size_t)(st.b.total_q * st.key[4] * st.key[3] * 2),
                           stream); /* NaN */
}

cudaError_t check_compare(cudaStream_t stream, unsigned long long *bad, int64_t *rows,
                          int64_t *cols)
{
    *rows = st.b.total_q * st.key[4];
    *cols = st.key[3];
    const int64_t n = *rows * *cols;
    if (st.key[0] == KTUNE_F16)
        return ktune_worker_check::compare_launch((const __half *)st.out[0], st.ref, n, 5e-4f,
                                                  1.f / 512, bad, stream);
    return ktune_worker_check::compare_launch((const __nv_bfloat16 *)st.out[0], st.ref, n, 2e-3f,
                                              1.f / 128, bad, stream);
}

cudaError_t copy(int set, cudaStream_t stream)
{
    /* as many bytes as a launch moves, from this set's keys on (its values, q and out follow, then
     * the next set's or the page table) */
    return cudaMemcpyAsync(st.scratch, st.k[set], st.copy_bytes, cudaMemcpyDeviceToDevice, stream);
}

} // namespace

const ktune_worker_family ktune_worker_family_def = {
    "rpa",        7,     ktune__rpa_candidates, ktune__rpa_candidates_count, prepare, launch,
    check_poison, check_compare, copy,           bytes,  release, nullptr, nullptr,
    flops,        nullptr};
