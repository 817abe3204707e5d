/* The bench: the tuned and the default config against its ceilings, in one worker: a copy of the
 * same bytes, the copy ceiling (a 1 GiB device-to-device copy) and the vendor library's paths (on
 * the same problem, and on the family's ceiling key for the compute ceiling). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "worker_state.cuh"

namespace {

/* A device-to-device copy of `bytes` from a to b. */
struct copy_between {
    void *a, *b;
    size_t bytes;
};

cudaError_t copy_call(void *ctx, int, cudaStream_t s)
{
    const copy_between *c = static_cast<const copy_between *>(ctx);
    return cudaMemcpyAsync(c->b, c->a, c->bytes, cudaMemcpyDeviceToDevice, s);
}

cudaError_t family_copy(void *fam, int set, cudaStream_t s)
{
    return static_cast<const ktune_worker_family *>(fam)->copy(set, s);
}

/* A vendor path of the family. */
struct vendor_path {
    const ktune_worker_family *fam;
    int which;
};

cudaError_t vendor_call(void *ctx, int set, cudaStream_t s)
{
    const vendor_path *v = static_cast<const vendor_path *>(ctx);
    return v->fam->vendor(v->which, set, s);
}

} // namespace

/* The copy ceiling (GB/s), measured once. */
cudaError_t ktune_worker_state::measure_ceiling()
{
    if (ceiling_gbps > 0)
        return cudaSuccess;
    copy_between c = {nullptr, nullptr, (size_t)1 << 30};
    cudaError_t e = cudaMalloc(&c.a, c.bytes);
    if (e != cudaSuccess)
        return e;
    e = cudaMalloc(&c.b, c.bytes);
    if (e != cudaSuccess) {
        cudaFree(c.a);
        return e;
    }
    cudaMemsetAsync(c.a, 1, c.bytes, stream);
    run copy;
    copy.call = copy_call;
    copy.ctx = &c;
    std::vector<measurement> m;
    int saved = nsets;
    nsets = 1;
    e = measure({copy}, m, opt.precise, 2.0 * (double)c.bytes, false);
    nsets = saved;
    cudaFree(c.a);
    cudaFree(c.b);
    if (e == cudaSuccess)
        ceiling_gbps = 2.0 * (double)c.bytes / (m[0].median_us * 1e3);
    return e;
}

/* The family's vendor paths on the current key, timed interleaved: names[i] and m[i] a path.
 * False when the answer was sent (a failure). */
bool ktune_worker_state::measure_vendors(long id, const char **names, std::vector<measurement> &m)
{
    m.clear();
    if (!fam.vendors)
        return true;
    cudaError_t e = cudaSuccess;
    const int n = fam.vendors(names, &e);
    if (n < 0 || n > KTUNE_BENCH_MAX_VENDORS) {
        fail(id, "readying the vendor library", n < 0 ? e : cudaErrorInvalidValue);
        return false;
    }
    if (n == 0)
        return true;
    vendor_path paths[KTUNE_BENCH_MAX_VENDORS];
    std::vector<run> runs((size_t)n);
    for (int v = 0; v < n; v++) {
        paths[v] = {&fam, v};
        runs[v].call = vendor_call;
        runs[v].ctx = &paths[v];
    }
    e = measure(runs, m, opt.precise, fam.bytes(current_key));
    if (e != cudaSuccess) {
        fail(id, "timing the vendor library", e);
        return false;
    }
    return true;
}

/* The fastest vendor path's throughput (FLOP/s) on the family's ceiling key for key's types,
 * measured once a ceiling key. False when the answer was sent (a failure). */
bool ktune_worker_state::measure_flops_ceiling(long id, const int64_t *key, double *flops_per_s)
{
    *flops_per_s = 0;
    if (!fam.vendors || !fam.flops || !fam.ceiling_key)
        return true;
    if (given_flops_per_s > 0) { /* measured by the process that started this one */
        *flops_per_s = given_flops_per_s;
        return true;
    }
    int64_t ck[KTUNE_MAX_KEY] = {0};
    fam.ceiling_key(key, ck);
    for (int i = 0; i < nvendor_ceilings; i++)
        if (memcmp(vendor_ceilings[i].key, ck, sizeof ck) == 0) {
            *flops_per_s = vendor_ceilings[i].flops_per_s;
            return true;
        }
    const char *names[KTUNE_BENCH_MAX_VENDORS];
    std::vector<measurement> m;
    if (!use_key(id, ck) || !measure_vendors(id, names, m))
        return false;
    for (const measurement &x : m)
        if (x.median_us > 0)
            *flops_per_s = fmax(*flops_per_s, fam.flops(ck) / (x.median_us * 1e-6));
    if (nvendor_ceilings < (int)(sizeof vendor_ceilings / sizeof *vendor_ceilings)) {
        memcpy(vendor_ceilings[nvendor_ceilings].key, ck, sizeof ck);
        vendor_ceilings[nvendor_ceilings++].flops_per_s = *flops_per_s;
    }
    return true;
}

void ktune_worker_state::bench(const ktune_request &r)
{
    const long id = r.id;
    ktune_answer a = {};
    cudaError_t e = measure_ceiling();
    if (e != cudaSuccess)
        return fail(id, "measuring the copy ceiling", e);
    double flops_ceiling = 0;
    if (!measure_flops_ceiling(id, r.key, &flops_ceiling) || !use_key(id, r.key))
        return;
    std::vector<trial> ts(2);
    for (int i = 0; i < 2; i++) {
        ts[i].instance = find_instance(r.configs[i]);
        if (ts[i].instance < 0) {
            ktune_answer_fail(&a, id, KTUNE_TRIAL_INVALID, "%s is not compiled into this worker",
                              r.configs[i]);
            return answer(r.kind, a);
        }
    }
    e = check_all(ts);
    if (e != cudaSuccess)
        return fail(id, "check", e);
    for (int i = 0; i < 2; i++)
        if (!ts[i].ok()) {
            ktune_answer_fail(&a, id, ts[i].status, "%s: %s", r.configs[i], ts[i].detail);
            return answer(r.kind, a);
        }
    const double bytes = fam.bytes(current_key);
    std::vector<run> configs(2);
    configs[0].instance = ts[0].instance;
    configs[1].instance = ts[1].instance;
    std::vector<measurement> m;
    e = rest_at_boost();
    if (e == cudaSuccess)
        e = measure(configs, m, opt.precise, bytes);
    if (e != cudaSuccess)
        return fail(id, "timing", e);
    run copy;
    copy.call = family_copy;
    copy.ctx = const_cast<ktune_worker_family *>(&fam);
    std::vector<measurement> c;
    e = measure({copy}, c, opt.precise, bytes, false);
    if (e != cudaSuccess)
        return fail(id, "timing the copy", e);
    const char *names[KTUNE_BENCH_MAX_VENDORS];
    std::vector<measurement> v;
    if (!measure_vendors(id, names, v))
        return;
    a.id = id;
    a.status = KTUNE_TRIAL_OK;
    a.bench = ktune_bench_answer{m[0].median_us,
                                 m[0].spread,
                                 m[1].median_us,
                                 m[1].spread,
                                 c[0].median_us,
                                 c[0].spread,
                                 ceiling_gbps,
                                 bytes,
                                 fam.flops ? fam.flops(current_key) : 0.0,
                                 flops_ceiling,
                                 (int)v.size(),
                                 {}};
    for (size_t i = 0; i < v.size(); i++) {
        ktune_bench_vendor &x = a.bench.vendors[i];
        snprintf(x.name, sizeof x.name, "%s", names[i]);
        x.us = v[i].median_us;
        x.spread = v[i].spread;
    }
    answer(r.kind, a);
}
