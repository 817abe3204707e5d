/* The qkattn family's side of a sweep worker: the inputs of a key, the fp32 reference on sampled
 * rows, and the accuracy check.
 *
 * Inputs of key (dtype, batch, heads, seq_len, head_dim, mask), from a hash (the same on every run
 * and machine): q, k and v uniform in [-1, 1); in every other (batch, head), counting from the
 * second (and in the only one when there is one), 4 of k's channels (5, 5 + D / 4, ...) are
 * outliers: 50 (x + 1) / 2 for the uniform x, 50 times the others' magnitude with a mean of 25,
 * as keys' outlier channels have. Scale 1 / sqrt(head_dim).
 *
 * The check: fp32 attention over the 16-bit inputs for sampled groups of 16 consecutive queries
 * (every group when there are at most 256, else 256 spread evenly over the (batch, head)s and
 * positions, the first and the last included); on them, for the plain and for the outlier heads
 * apart, cosine similarity >= 0.999 and relative L1 error (sum |out - ref| / sum |ref|) <= 0.03;
 * and no output element left NaN (the poison) or infinite anywhere. Counters (wrong_detail):
 * bad[0] = the elements not finite + the classes out of bounds; bad[1] = the worse class's cosine
 * (high 32 bits) and relative L1 (low 32 bits) as fp32 bits.
 *
 * Bytes one launch moves: q, k and v read, out written (the int8 copies are the call's own);
 * the copy anchor copies as many. Flops: 4 a (query, key attended, element). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "qkattn_instance.cuh"
#include "worker.h"
#include "worker_check.cuh"

extern "C" {
extern const ktune_instance ktune__qkattn_candidates[];
extern const int ktune__qkattn_candidates_count;
}

namespace {

const int max_sets = 64;
const int group_rows = 16, max_groups = 256, outlier_channels = 4;
const float outlier_size = 50.f, min_cosine = 0.999f, max_rel_l1 = 0.03f;

/* A key's sizes, checked. */
struct shape {
    int64_t bh = 0, seq = 0, D = 0, elems = 0;
    int causal = 0;
    ktune_dtype dtype = KTUNE_F16;
};

bool shape_of(const int64_t *key, shape &s)
{
    if ((key[0] != KTUNE_F16 && key[0] != KTUNE_BF16) || (key[4] != 64 && key[4] != 128) ||
        key[1] < 1 || key[2] < 1 || key[1] > 65535 || key[2] > 65535 ||
        key[1] * key[2] > 65535 || key[3] < 1 ||
        key[3] >= (1 << 30) || (key[5] != 1 && key[5] != 2))
        return false;
    s.dtype = (ktune_dtype)key[0];
    s.bh = key[1] * key[2];
    s.seq = key[3];
    s.D = key[4];
    s.causal = key[5] == 2;
    s.elems = s.bh * s.seq * s.D;
    return true;
}

/* Whether (batch, head) bh of `count` has outlier channels in k. */
__host__ __device__ inline bool outlier_head(int64_t bh, int64_t count)
{
    return count == 1 || bh % 2 == 1;
}

struct state {
    int64_t key[6] = {};
    shape s;
    int sets = 0, groups = 0;
    void *q[max_sets] = {}, *k[max_sets] = {}, *v[max_sets] = {}, *out[max_sets] = {};
    void *workspace = nullptr;
    size_t workspace_bytes = 0;
    int64_t *group_first = nullptr; /* a sampled group's first row, of bh x seq */
    float *ref = nullptr;           /* groups x 16 x D */
    void *scratch = nullptr;
    size_t copy_bytes = 0;
    ktune_qkattn_problem problem(int set) const
    {
        ktune_qkattn_problem p = {};
        p.q = q[set];
        p.k = k[set];
        p.v = v[set];
        p.out = out[set];
        p.workspace = workspace;
        p.workspace_bytes = workspace_bytes;
        p.batch = key[1];
        p.heads = key[2];
        p.seq_len = s.seq;
        p.head_dim = s.D;
        p.causal = s.causal;
        p.scale = 1.f / sqrtf((float)s.D);
        p.dtype = s.dtype;
        return p;
    }
} st;

/* Every set's outlier channels of k (sets `stride` elements apart): x -> 50 (x + 1) / 2. */
template <typename T>
__global__ void make_outliers(T *k, int64_t stride, int64_t bh, int64_t seq, int D)
{
    const int64_t rows = bh * seq;
    T *const set = k + blockIdx.y * stride;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * outlier_channels;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = i / outlier_channels;
        if (!outlier_head(row / seq, bh))
            continue;
        T *const x = set + row * D + 5 + (i % outlier_channels) * (D / 4);
        *x = ktune_common::from_float<T>(outlier_size * (ktune_common::to_float(*x) + 1.f) / 2);
    }
}

/* fp32 attention of sampled group blockIdx.x (16 queries of one (batch, head)), D threads: the
 * queries in shared memory; for each chunk of 64 keys, a warp a key at a time computes its 16
 * scores (lanes along the row, then a shuffle sum); a thread a row moves the row's running max
 * and sum; the weights exp(score - max) are computed once, and each thread accumulates its
 * element of the 16 rows. */
template <typename T>
__global__ void reference(ktune_qkattn_problem p, const int64_t *group_first, float *ref)
{
    constexpr int CHUNK = 64, R = group_rows;
    extern __shared__ float sh[]; /* R x D queries, R x CHUNK scores, R x 3 (max, sum, corr) */
    const int D = (int)p.head_dim, d = threadIdx.x, warp = d / 32, lane = d % 32, warps = D / 32;
    const int64_t first = group_first[blockIdx.x], seq = p.seq_len;
    const int64_t head = first / seq, r0 = first % seq;
    float *const qv = sh, *const sc = sh + R * D, *const row_m = sc + R * CHUNK;
    float *const row_l = row_m + R, *const row_c = row_l + R;
    const T *const q = static_cast<const T *>(p.q) + head * seq * D;
    const T *const k = static_cast<const T *>(p.k) + head * seq * D;
    const T *const v = static_cast<const T *>(p.v) + head * seq * D;
    for (int r = 0; r < R; r++)
        qv[r * D + d] = r0 + r < seq ? ktune_common::to_float(q[(r0 + r) * D + d]) : 0.f;
    if (d < R) {
        row_m[d] = -INFINITY;
        row_l[d] = 0.f;
    }
    float acc[R] = {};
    const int64_t keys = p.causal ? (r0 + R < seq ? r0 + R : seq) : seq;
    for (int64_t c0 = 0; c0 < keys; c0 += CHUNK) {
        const int cn = keys - c0 < CHUNK ? (int)(keys - c0) : CHUNK;
        __syncthreads();
        for (int i = warp; i < cn; i += warps) {
            float kv[4];
            for (int e = 0; e < D / 32; e++)
                kv[e] = ktune_common::to_float(k[(c0 + i) * D + lane + 32 * e]);
            for (int r = 0; r < R; r++) {
                float dot = 0.f;
                for (int e = 0; e < D / 32; e++)
                    dot += qv[r * D + lane + 32 * e] * kv[e];
                for (int o = 16; o > 0; o >>= 1)
                    dot += __shfl_xor_sync(~0u, dot, o);
                if (lane == 0)
                    sc[r * CHUNK + i] = dot * p.scale;
            }
        }
        __syncthreads();
        if (d < R) { /* row d's keys in this chunk: cn, or up to its position */
            const int64_t lim = p.causal ? r0 + d - c0 + 1 : cn;
            const int n = (int)(lim < 0 ? 0 : lim < cn ? lim : cn);
            float cm = row_m[d];
            for (int i = 0; i < n; i++)
                cm = fmaxf(cm, sc[d * CHUNK + i]);
            const float corr = cm == -INFINITY ? 1.f : expf(row_m[d] - cm);
            float l = row_l[d] * corr;
            for (int i = 0; i < CHUNK; i++) {
                const float w = i < n ? expf(sc[d * CHUNK + i] - cm) : 0.f;
                sc[d * CHUNK + i] = w;
                l += w;
            }
            row_m[d] = cm;
            row_l[d] = l;
            row_c[d] = corr;
        }
        __syncthreads();
        for (int r = 0; r < R; r++)
            acc[r] *= row_c[r];
        for (int i = 0; i < cn; i++) {
            const float x = ktune_common::to_float(v[(c0 + i) * D + d]);
            for (int r = 0; r < R; r++)
                acc[r] += sc[r * CHUNK + i] * x;
        }
    }
    __syncthreads();
    for (int r = 0; r < R; r++)
        ref[((int64_t)blockIdx.x * R + r) * D + d] = row_l[r] > 0.f ? acc[r] / row_l[r] : 0.f;
}

/* bad[0] += the elements of y that are not finite. */
template <typename T>
__global__ void count_nonfinite(const T *y, int64_t n, unsigned long long *bad)
{
    unsigned long long count = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        count += !isfinite(ktune_common::to_float(y[i]));
    for (int o = 16; o > 0; o >>= 1)
        count += __shfl_xor_sync(~0u, count, o);
    if (threadIdx.x % 32 == 0 && count)
        atomicAdd(&bad[0], count);
}

/* The accuracy of the sampled rows, one block of 1024 threads: sums (out . ref, out . out,
 * ref . ref, |out - ref|, |ref|) of the plain and the outlier heads in double, then the verdict
 * (the header's counters). Rows past seq_len are left out. */
template <typename T>
__global__ void __launch_bounds__(1024)
    accuracy(const T *y, const float *ref, const int64_t *group_first, int groups, int64_t seq,
             int64_t bh, int D, unsigned long long *bad)
{
    __shared__ double part[32][2][5];
    double s[2][5] = {};
    const int64_t n = (int64_t)groups * group_rows * D;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const int64_t g = i / (group_rows * D), r = i / D % group_rows;
        const int64_t row = group_first[g] + r;
        if ((group_first[g] % seq) + r >= seq)
            continue;
        const int c = outlier_head(row / seq, bh);
        const double got = ktune_common::to_float(y[row * D + i % D]), want = ref[i];
        s[c][0] += got * want;
        s[c][1] += got * got;
        s[c][2] += want * want;
        s[c][3] += fabs(got - want);
        s[c][4] += fabs(want);
    }
    for (int c = 0; c < 2; c++)
        for (int j = 0; j < 5; j++) {
            double x = s[c][j];
            for (int o = 16; o > 0; o >>= 1)
                x += __shfl_xor_sync(~0u, x, o);
            if (threadIdx.x % 32 == 0)
                part[threadIdx.x / 32][c][j] = x;
        }
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    float worst_cos = 1.f, worst_l1 = 0.f;
    unsigned long long fails = 0;
    for (int c = 0; c < 2; c++) {
        double t[5] = {};
        for (int w = 0; w < 32; w++)
            for (int j = 0; j < 5; j++)
                t[j] += part[w][c][j];
        if (t[4] == 0.0 && t[1] == 0.0)
            continue; /* no row of this class sampled */
        const float cosine = (float)(t[0] / sqrt(t[1] * t[2]));
        const float l1 = (float)(t[3] / t[4]);
        const bool ok = cosine >= min_cosine && l1 <= max_rel_l1;
        fails += !ok;
        if (!ok || (fails == 0 && (cosine < worst_cos || l1 > worst_l1))) {
            worst_cos = cosine;
            worst_l1 = l1;
        }
    }
    atomicAdd(&bad[0], fails);
    bad[1] = (unsigned long long)__float_as_uint(worst_cos) << 32 | __float_as_uint(worst_l1);
}

void wrong_detail(const unsigned long long *bad, int64_t rows, int64_t cols, char *detail,
                  size_t size)
{
    float cosine, l1;
    const uint32_t c = (uint32_t)(bad[1] >> 32), r = (uint32_t)bad[1];
    memcpy(&cosine, &c, sizeof c);
    memcpy(&l1, &r, sizeof r);
    snprintf(detail, size,
             "against fp32 attention on %d sampled rows: cosine %.5f (at least %.3f), relative "
             "L1 %.4f (at most %.2f); %llu = input classes out of bounds + outputs not finite "
             "(of %lld)",
             st.groups * group_rows, cosine, min_cosine, l1, max_rel_l1, bad[0],
             (long long)(rows * cols));
}

void release() /* the buffers are the worker's arena */
{
    st = state();
}

double bytes(const int64_t *key)
{
    shape s;
    return shape_of(key, s) ? 4.0 * 2 * s.elems : 0;
}

double flops(const int64_t *key)
{
    shape s;
    if (!shape_of(key, s))
        return 0;
    const double pairs = s.causal ? s.seq * (s.seq + 1.0) / 2 : (double)s.seq * s.seq;
    return 4.0 * s.bh * pairs * s.D;
}

template <typename T> cudaError_t fill(int64_t stride, int sets, uint64_t seed)
{
    using ktune_worker_check::fill_sets;
    const shape &s = st.s;
    fill_sets((T *)st.q[0], s.elems, stride, sets, seed, 3, -1.f, 1.f);
    fill_sets((T *)st.k[0], s.elems, stride, sets, seed + 1, 3, -1.f, 1.f);
    fill_sets((T *)st.v[0], s.elems, stride, sets, seed + 2, 3, -1.f, 1.f);
    make_outliers<T><<<dim3(512, sets), 256>>>((T *)st.k[0], stride, s.bh, s.seq, (int)s.D);
    return cudaGetLastError();
}

template <typename T> cudaError_t reference_run()
{
    const ktune_qkattn_problem p = st.problem(0);
    const size_t sh = (size_t)(group_rows * st.s.D + group_rows * 64 + group_rows * 3) * 4;
    reference<T><<<st.groups, (unsigned)st.s.D, sh>>>(p, st.group_first, st.ref);
    return cudaGetLastError();
}

int prepare(const int64_t *key, int64_t l2_bytes, cudaError_t *error)
{
    static uint64_t seed = 1;
    memcpy(st.key, key, sizeof st.key);
    cudaError_t e = shape_of(key, st.s) ? cudaSuccess : cudaErrorInvalidValue;
    const shape &s = st.s;
    const size_t tensor = (size_t)s.elems * 2;
    st.workspace_bytes = ktune_qkattn_impl::workspace_bytes(key[1], key[2], s.seq, s.D);
    if (e == cudaSuccess && st.workspace_bytes == 0)
        e = cudaErrorInvalidValue;
    /* the sampled groups: all, or max_groups spread evenly (the first and the last among them) */
    const int64_t per_head = (s.seq + group_rows - 1) / group_rows, all = s.bh * per_head;
    std::vector<int64_t> first;
    const int64_t groups = all < max_groups ? all : max_groups;
    for (int64_t i = 0; i < groups && e == cudaSuccess; i++) {
        const int64_t g = groups == all ? i : i * (all - 1) / (groups - 1);
        first.push_back(g / per_head * s.seq + g % per_head * group_rows);
    }
    using ktune_worker_check::carver;
    const size_t set_bytes = carver::round(tensor) * 4;
    const int sets = ktune_worker_check::rotating_sets((int64_t)set_bytes, l2_bytes, max_sets);
    const size_t ref_bytes = first.size() * group_rows * (size_t)s.D * 4;
    st.copy_bytes = (size_t)bytes(key);
    carver c{e == cudaSuccess ? (char *)ktune_worker_arena(
                                    (size_t)sets * set_bytes + carver::round(st.workspace_bytes) +
                                        carver::round(first.size() * 8) +
                                        carver::round(ref_bytes) +
                                        carver::round(st.copy_bytes),
                                    &e)
                              : nullptr};
    if (c.at) {
        for (int i = 0; i < sets; i++) { /* a set's q, k, v and out together: the copy's source */
            st.q[i] = c.take(tensor);
            st.k[i] = c.take(tensor);
            st.v[i] = c.take(tensor);
            st.out[i] = c.take(tensor);
        }
        st.workspace = c.take(st.workspace_bytes);
        st.group_first = (int64_t *)c.take(first.size() * 8);
        st.ref = (float *)c.take(ref_bytes);
        st.scratch = c.take(st.copy_bytes);
        st.sets = sets;
        st.groups = (int)first.size();
        seed += 3;
        const int64_t stride = (int64_t)(set_bytes / 2); /* elements from a set's to the next's */
        e = s.dtype == KTUNE_F16 ? fill<__half>(stride, sets, seed)
                                 : fill<__nv_bfloat16>(stride, sets, seed);
        if (e == cudaSuccess)
            e = cudaMemcpy(st.group_first, first.data(), first.size() * 8, cudaMemcpyHostToDevice);
        if (e == cudaSuccess)
            e = s.dtype == KTUNE_F16 ? reference_run<__half>() : reference_run<__nv_bfloat16>();
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
    ktune__qkattn_launch_t *fn =
        (ktune__qkattn_launch_t *)ktune__qkattn_candidates[instance].launch;
    const ktune_qkattn_problem p = st.problem(set);
    return fn(&p, stream);
}

cudaError_t check_poison(cudaStream_t stream)
{
    return cudaMemsetAsync(st.out[0], 0xff, (size_t)st.s.elems * 2, stream); /* NaN */
}

template <typename T>
cudaError_t compare_as(cudaStream_t stream, unsigned long long *bad)
{
    const T *y = (const T *)st.out[0];
    count_nonfinite<T><<<1024, 256, 0, stream>>>(y, st.s.elems, bad);
    accuracy<T><<<1, 1024, 0, stream>>>(y, st.ref, st.group_first, st.groups, st.s.seq, st.s.bh,
                                        (int)st.s.D, bad);
    return cudaGetLastError();
}

cudaError_t check_compare(cudaStream_t stream, unsigned long long *bad, int64_t *rows,
                          int64_t *cols)
{
    *rows = st.s.bh * st.s.seq;
    *cols = st.s.D;
    return st.s.dtype == KTUNE_F16 ? compare_as<__half>(stream, bad)
                                   : compare_as<__nv_bfloat16>(stream, bad);
}

cudaError_t copy(int set, cudaStream_t stream)
{
    /* as many bytes as a launch moves, from this set's q on (its k, v and out follow) */
    return cudaMemcpyAsync(st.scratch, st.q[set], st.copy_bytes, cudaMemcpyDeviceToDevice, stream);
}

} // namespace

const ktune_worker_family ktune_worker_family_def = {
    "qkattn", 6,       ktune__qkattn_candidates, ktune__qkattn_candidates_count, prepare, launch,
    check_poison, check_compare, copy, bytes, release, nullptr, nullptr, flops, nullptr,
    wrong_detail};
