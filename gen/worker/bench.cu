/* The bench: the tuned and the default config against its ceilings, in one worker: a copy of the
 * same bytes, the copy ceiling (a 1 GiB device-to-device copy) and the vendor library (on the
 * same problem, and on the family's ceiling key for the compute ceiling). */
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

cudaError_t family_vendor(void *fam, int set, cudaStream_t s)
{
    return static_cast<const ktune_worker_family *>(fam)->vendor(set, s);
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

/* The vendor library's throughput (FLOP/s) on the family's ceiling key for key's types, measured
 * once a ceiling key. False when the answer was sent (a failure). */
bool ktune_worker_state::measure_flops_ceiling(long id, const int64_t *key, double *flops_per_s)
{
    *flops_per_s = 0;
    if (!fam.vendor)
        return true;
    int64_t ck[KTUNE_MAX_KEY] = {0};
    fam.ceiling_key(key, ck);
    for (int i = 0; i < nvendor_ceilings; i++)
        if (memcmp(vendor_ceilings[i].key, ck, sizeof ck) == 0) {
            *flops_per_s = vendor_ceilings[i].flops_per_s;
            return true;
        }
    if (!use_key(id, ck))
        return false;
    run vendor;
    vendor.call = family_vendor;
    vendor.ctx = const_cast<ktune_worker_family *>(&fam);
    std::vector<measurement> m;
    cudaError_t e = measure({vendor}, m, opt.precise, fam.bytes(ck));
    if (e != cudaSuccess) {
        fail(id, "timing the vendor library's ceiling", e);
        return false;
    }
    *flops_per_s = fam.flops(ck) / (m[0].median_us * 1e-6);
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
    measurement v;
    if (fam.vendor) {
        run vendor;
        vendor.call = family_vendor;
        vendor.ctx = const_cast<ktune_worker_family *>(&fam);
        std::vector<measurement> vm;
        e = measure({vendor}, vm, opt.precise, bytes);
        if (e != cudaSuccess)
            return fail(id, "timing the vendor library", e);
        v = vm[0];
    }
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
                                 v.median_us,
                                 v.spread,
                                 fam.flops ? fam.flops(current_key) : 0.0,
                                 flops_ceiling,
                                 {0}};
    snprintf(a.bench.vendor_name, sizeof a.bench.vendor_name, "%s",
             fam.vendor_name ? fam.vendor_name : "-");
    answer(r.kind, a);
}
