#define _POSIX_C_SOURCE 200809L
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "plot.h"
#include "sweep.h"

#define KTUNE_BIG_BYTES (32.0 * 1024 * 1024)

int ktune_open_device_registry(const ktune_space *s, const char *registry_dir,
                               const ktune_worker_opts *wopts, ktune_worker *w,
                               ktune_registry *reg, char *path, size_t size, ktune_err *err)
{
    int started = ktune_worker_start(w, wopts, err);
    if (started)
        return started;
    char slug[256];
    ktune_device_slug(w->device.name, slug, sizeof slug, '-');
    snprintf(path, size, "%s/%s/%s.yaml", registry_dir, slug, s->family);
    if (ktune_registry_load(path, s, reg, err)) {
        ktune_worker_stop(w);
        return -1;
    }
    return 0;
}

/* The fastest config of each variant the entry names (winner and runner-ups), -1 where none. */
static void variant_champions(const ktune_space *s, const ktune_entry *e, int *champion)
{
    for (int v = 0; v < s->nvariants; v++)
        champion[v] = -1;
    int c = ktune_space_find_config(s, e->config);
    if (c >= 0)
        champion[s->configs[c].variant] = c;
    for (int r = 0; r < e->nrunner_ups; r++) {
        c = ktune_space_find_config(s, e->runner_ups[r].config);
        if (c >= 0 && champion[s->configs[c].variant] < 0)
            champion[s->configs[c].variant] = c;
    }
}

/* Times the champions interleaved; a variant without one (or on failure) gets 0. */
static int measure_champions(const ktune_space *s, ktune_worker *w, const int64_t *key,
                             const int *champion, double timeout_s, double *us, ktune_err *err)
{
    const char *names[64];
    int n = 0;
    for (int v = 0; v < s->nvariants; v++) {
        us[v] = 0;
        if (champion[v] >= 0)
            names[n++] = s->configs[champion[v]].name;
    }
    if (n < 2)
        return 0; /* one variant: its champion is the tuned config, timed by the B request */
    ktune_answer a;
    ktune_reply_kind kind;
    if (ktune_worker_interleave(w, s->nkey, key, names, n, timeout_s * n, &a, &kind, err))
        return -1;
    if (kind != KTUNE_REPLY_OK || a.status != KTUNE_TRIAL_OK)
        return 0;
    for (int v = 0, i = 0; v < s->nvariants; v++)
        if (champion[v] >= 0)
            us[v] = a.entries[i++].median_us;
    return 0;
}

/* The nearest row's answer timed interleaved with the choice: its time and its ratio to the
 * choice's in the same measurement; 0 and 0 where it is the choice, none, or failed. */
static int measure_nearest(const ktune_space *s, ktune_worker *w, const int64_t *key,
                           const ktune_bench_choice *c, double timeout_s, double *us,
                           double *ratio, ktune_err *err)
{
    *us = 0;
    *ratio = 0;
    if (!c->nearest[0] || strcmp(c->nearest, c->config) == 0)
        return 0;
    const char *names[2] = {c->config, c->nearest};
    ktune_answer a;
    ktune_reply_kind kind;
    if (ktune_worker_interleave(w, s->nkey, key, names, 2, timeout_s * 2, &a, &kind, err))
        return -1;
    if (kind == KTUNE_REPLY_OK && a.status == KTUNE_TRIAL_OK && a.entries[0].median_us > 0) {
        *us = a.entries[1].median_us;
        *ratio = a.entries[1].median_us / a.entries[0].median_us;
    }
    return 0;
}

int ktune_bench_run(const ktune_space *s, const char *registry_dir,
                    const ktune_worker_opts *wopts, const ktune_bench_keys *keys,
                    double timeout_s, const char *csv_path, const char *plot_png, FILE *out,
                    ktune_err *err)
{
    ktune_worker w;
    ktune_registry reg;
    memset(&reg, 0, sizeof reg);
    ktune_buf csv = {0};
    ktune_bench_choice *choice = NULL;
    int rc = -1;
    char path[4096];
    /* the vendor paths seen, in order of first appearance, and the log of tuned's speedup over
     * each, summed over the shapes it ran */
    char vendor[KTUNE_PLOT_MAX_VENDORS][32];
    const char *vendor_names[KTUNE_PLOT_MAX_VENDORS];
    double log_vendor[KTUNE_PLOT_MAX_VENDORS] = {0};
    int vendor_shapes[KTUNE_PLOT_MAX_VENDORS] = {0}, nvendors = 0;
    if (s->nvariants > 64)
        return ktune_fail(err, "bench: %s has more than 64 variants", s->family);
    /* keys: the library's choices need no registry (a device without a table has defaults) */
    int opened = keys ? ktune_worker_start(&w, wopts, err)
                      : ktune_open_device_registry(s, registry_dir, wopts, &w, &reg, path,
                                                   sizeof path, err);
    if (opened)
        return opened;
    if (keys)
        snprintf(path, sizeof path, "the keys given");
    const int nitems = keys ? s->nshapes : reg.nentries;
    int64_t limits[KTUNE_NLIMITS];
    ktune_limits_from(&w.device, limits);
    int dtype_dim = -1;
    for (int d = 0; d < s->nkey; d++)
        if (s->key[d].kind == KTUNE_DIM_DTYPE && dtype_dim < 0)
            dtype_dim = d;
    ktune_plot_point *points = calloc((size_t)nitems + 1, sizeof *points);
    double *variant_us = calloc((size_t)(nitems + 1) * (size_t)s->nvariants, sizeof *variant_us);
    int champion[64];
    if (!points || !variant_us) {
        ktune_fail(err, "out of memory");
        goto cleanup;
    }
    if (keys) {
        choice = calloc((size_t)nitems + 1, sizeof *choice);
        if (!choice) {
            ktune_fail(err, "out of memory");
            goto cleanup;
        }
        if (keys->choose(keys->ctx, &w.device, nitems, s->shapes, choice, err))
            goto cleanup;
    }
    ktune_buf_printf(&csv, "family,dtype,shape,config,tuned_us,default_us,anchor,anchor_us,gbps,"
                           "pct_of_ceiling,default_config,speedup,ceiling_gbps,bytes,tuned_spread,"
                           "copy_us,vs_anchor,tflops,ceiling_tflops,pct_of_tflops,variants,"
                           "vendors%s\n",
                     keys ? ",reason,nearest_config,nearest_us" : "");
    double log_speedup = 0, worst_big[KTUNE_DTYPE_COUNT], log_nearest = 0, worst_anchor = INFINITY;
    int nearest_shapes = 0, slower = 0;
    char worst_anchor_shape[256] = "";
    /* tuned entries slower than the default beyond the noise: the worst, as a --key */
    double worst_default = INFINITY;
    char worst_default_key[256] = "";
    for (int d = 0; d < KTUNE_DTYPE_COUNT; d++)
        worst_big[d] = INFINITY;
    int n = 0, alone = 0, alone_ok = 1;
    for (int i = 0; i < nitems; i++) {
        const ktune_entry *e = keys ? NULL : &reg.entries[i];
        const int64_t *key = keys ? s->shapes[i].key : e->key;
        const char *config = keys ? choice[i].config : e->config;
        int def = ktune_space_default_for(s, key, limits);
        if (def < 0) {
            ktune_fail(err, "no default is valid for an entry of %s", path);
            goto cleanup;
        }
        char shape[256] = "";
        size_t sl = 0;
        for (int d = 0; d < s->nkey; d++)
            if (d != dtype_dim)
                sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%s%lld", sl ? "x" : "",
                                       (long long)key[d]);
        ktune_answer a;
        ktune_reply_kind kind;
        if (ktune_worker_bench(&w, s->nkey, key, config, s->configs[def].name, timeout_s,
                               &a, &kind, err))
            goto cleanup;
        /* a key of a few microseconds: benched again alone, in the launch context the sweep
         * recorded it in (README: What a recorded time means) */
        if (kind == KTUNE_REPLY_OK && a.status == KTUNE_TRIAL_OK &&
            a.bench.tuned_us < KTUNE_ALONE_BELOW_US && alone_ok) {
            ktune_err why;
            ktune_worker_opts alone_opts = w.opts; /* the ceilings of this run, measured once */
            alone_opts.copy_ceiling_gbps = a.bench.ceiling_gbps;
            alone_opts.flops_ceiling = a.bench.vendor_flops_per_s;
            if (ktune_worker_bench_alone(&alone_opts, s->nkey, key, config, s->configs[def].name,
                                         timeout_s, &a, &kind, NULL, &why) == 0) {
                alone++;
            } else {
                alone_ok = 0; /* the long-lived worker's times stand, said once */
                fprintf(out, "ktune: warning: no worker for an alone bench (%s): rows under %g us "
                             "keep the times of the long-lived worker\n",
                        why.msg, KTUNE_ALONE_BELOW_US);
            }
        }
        if (kind != KTUNE_REPLY_OK || a.status != KTUNE_TRIAL_OK) {
            ktune_fail(err, "bench of %s %s failed: %s %s", shape, config,
                       ktune_trial_status_names[a.status], a.detail);
            goto cleanup;
        }
        const ktune_bench_answer *b = &a.bench;
        const double tu = b->tuned_us, ts = b->tuned_spread;
        double du = b->default_us;
        const double cu = b->copy_us, ceil_gbps = b->ceiling_gbps, bytes = b->bytes;
        const double flops = b->flops, ceil_flops = b->vendor_flops_per_s;
        if (def == ktune_space_find_config(s, config))
            du = tu; /* the same config: one measurement, not two draws of the noise */
        double *vus = variant_us + (size_t)i * (size_t)s->nvariants;
        double nearest_us = 0, nearest_ratio = 0;
        if (e) {
            variant_champions(s, e, champion);
            if (s->nvariants > 1 &&
                measure_champions(s, &w, key, champion, timeout_s, vus, err))
                goto cleanup;
            /* a variant whose champion is the tuned config and was not timed again: its time */
            for (int v = 0; v < s->nvariants; v++)
                if (vus[v] == 0 && champion[v] == ktune_space_find_config(s, config))
                    vus[v] = tu;
        } else if (measure_nearest(s, &w, key, &choice[i], timeout_s, &nearest_us,
                                   &nearest_ratio, err)) {
            goto cleanup;
        }
        if (!e && choice[i].nearest[0]) { /* the choice itself (not timed twice): a ratio of 1 */
            log_nearest += nearest_ratio > 0 ? log(nearest_ratio) : 0;
            nearest_shapes++;
        }
        char variants[1024] = "";
        size_t vl = 0;
        for (int v = 0; v < s->nvariants; v++)
            if (vus[v] > 0)
                vl += (size_t)snprintf(variants + vl, sizeof variants - vl, "%s%s=%.4f",
                                       vl ? " " : "", s->variants[v].name, vus[v]);
        const char *dt = dtype_dim >= 0 ? ktune_dtype_name(key[dtype_dim]) : "-";
        /* each vendor path: its place among those seen, its time for the plot and the CSV */
        char vendors_col[512] = "";
        size_t vcl = 0;
        memset(points[n].vendor_us, 0, sizeof points[n].vendor_us);
        for (int v = 0; v < b->nvendors; v++) {
            const ktune_bench_vendor *x = &b->vendors[v];
            if (!ktune_is_identifier(x->name, sizeof vendor[0] - 1) || !(x->us > 0)) {
                ktune_fail(err, "bench of %s: the worker named a vendor path '%.31s' (%.4f us)",
                           shape, x->name, x->us);
                goto cleanup;
            }
            int at = 0;
            while (at < nvendors && strcmp(vendor[at], x->name) != 0)
                at++;
            if (at == nvendors && nvendors < KTUNE_PLOT_MAX_VENDORS) {
                snprintf(vendor[at], sizeof vendor[at], "%s", x->name);
                vendor_names[at] = vendor[at];
                nvendors++;
            }
            if (at < nvendors) {
                points[n].vendor_us[at] = x->us;
                log_vendor[at] += log(x->us / tu);
                vendor_shapes[at]++;
            }
            vcl += (size_t)snprintf(vendors_col + vcl, sizeof vendors_col - vcl, "%s%s=%.4f",
                                    vcl ? " " : "", x->name, x->us);
        }
        const int has_vendor = b->nvendors > 0;
        const char *anchor = has_vendor ? b->vendors[0].name : "copy";
        const double vu = has_vendor ? b->vendors[0].us : 0, anchor_us = has_vendor ? vu : cu;
        const double gbps = bytes / (tu * 1e3), pct = 100 * gbps / ceil_gbps;
        const double tflops = flops / (tu * 1e6), ceil_tflops = ceil_flops / 1e12;
        ktune_buf_printf(&csv,
                         "%s,%s,%s,%s,%.4f,%.4f,%s,%.4f,%.1f,%.1f,%s,%.4f,%.1f,%.0f,%.5f,%.4f,"
                         "%.4f,%.2f,%.1f,%.1f,%s,%s",
                         s->family, dt, shape, config, tu, du, anchor, anchor_us, gbps, pct,
                         s->configs[def].name, du / tu, ceil_gbps, bytes, ts, cu, anchor_us / tu,
                         tflops, ceil_tflops, ceil_tflops > 0 ? 100 * tflops / ceil_tflops : 0.0,
                         variants, vendors_col);
        if (!e) /* the nearest row's answer: its time interleaved with the choice (0: the same) */
            ktune_buf_printf(&csv, ",%s,%s,%.4f", choice[i].reason,
                             choice[i].nearest[0] ? choice[i].nearest : "-", nearest_us);
        ktune_buf_printf(&csv, "\n");
        if (has_vendor && vu / tu < worst_anchor) {
            worst_anchor = vu / tu;
            snprintf(worst_anchor_shape, sizeof worst_anchor_shape, "%s %s", dt, shape);
        }
        if (n == 0)
            fprintf(out, "%-5s %-18s %-40s %9s %9s %7s %9s %7s %6s %6s %7s %6s\n", "dtype", "shape",
                    "config", "tuned_us", "dflt_us", "speedup", has_vendor ? anchor : "copy_us",
                    has_vendor ? "vs" : "", "GB/s", "%bw", "TFLOP/s", "%peak");
        char ratio[16] = "";
        if (has_vendor)
            snprintf(ratio, sizeof ratio, "%.3fx", vu / tu);
        fprintf(out, "%-5s %-18s %-40s %9.3f %9.3f %7.3f %9.3f %7s %6.0f %6.1f %7.1f %6.1f\n", dt,
                shape, config, tu, du, du / tu, anchor_us, ratio, gbps, pct, tflops,
                ceil_tflops > 0 ? 100 * tflops / ceil_tflops : 0.0);
        /* slower than the family's default beyond apply's noise: a stale entry, or one a sweep
         * recorded without timing the default (the bench's times of both are interleaved) */
        if (!keys && tu > du * (1 + fmax(KTUNE_NOISE_FLOOR, 2 * ts)) + KTUNE_NOISE_FLOOR_US) {
            slower++;
            if (du / tu < worst_default) {
                worst_default = du / tu;
                ktune_space_key_format(s, key, worst_default_key, sizeof worst_default_key);
                for (char *c = worst_default_key; *c; c++)
                    *c = *c == ' ' ? ',' : *c;
            }
        }
        log_speedup += log(du / tu);
        memcpy(points[n].key, key, sizeof points[n].key);
        points[n].tuned_us = tu;
        points[n].variant_us = vus;
        n++;
        if (dtype_dim >= 0 && bytes / 2 >= KTUNE_BIG_BYTES)
            if (key[dtype_dim] >= 0 && key[dtype_dim] < KTUNE_DTYPE_COUNT)
                worst_big[key[dtype_dim]] = fmin(worst_big[key[dtype_dim]], pct);
    }
    if (ktune_file_write_if_changed(csv_path, csv.data, csv.len, err) < 0)
        goto cleanup;
    fprintf(out, "ktune bench %s on %s: %d shapes (%d alone); tuned vs default %.3fx (geomean)",
            s->family, w.device.name, n, alone, n ? exp(log_speedup / n) : 1.0);
    for (int v = 0; v < nvendors; v++)
        fprintf(out, "; tuned vs %s %.3fx (geomean of %d)", vendor[v],
                exp(log_vendor[v] / vendor_shapes[v]), vendor_shapes[v]);
    if (nvendors > 0 && isfinite(worst_anchor))
        fprintf(out, "; worst vs %s %.3fx (%s)", vendor[0], worst_anchor, worst_anchor_shape);
    if (keys && nearest_shapes > 0)
        fprintf(out, "; tuned vs the nearest row's answer %.3fx (geomean of %d)",
                exp(log_nearest / nearest_shapes), nearest_shapes);
    if (nvendors == 0)
        for (int d = 0; d < KTUNE_DTYPE_COUNT; d++)
            if (isfinite(worst_big[d]))
                fprintf(out, "; %s inputs >= 32 MB: worst %.1f%% of copy", ktune_dtype_name(d),
                        worst_big[d]);
    fprintf(out, "\nktune: wrote %s\n", csv_path);
    if (slower > 0)
        fprintf(out,
                "ktune: warning: %d of %d entries ran slower than the family's default beyond the "
                "noise (the worst %.3fx): stale, or recorded by a sweep that never timed the "
                "default; to re-tune the worst: ktune sweep %s --key '%s' --force-retune\n",
                slower, n, worst_default, s->family, worst_default_key);
    if (plot_png && n > 0) {
        int64_t dtype = dtype_dim >= 0 ? points[0].key[dtype_dim] : -1;
        for (int i = 0; i < n && dtype_dim >= 0; i++)
            if (points[i].key[dtype_dim] == KTUNE_BF16)
                dtype = KTUNE_BF16;
        const int x_dim = ktune_plot_axis(s, points, n, dtype);
        if (x_dim < 0) {
            ktune_fail(err, "--plot: %s has no integer key dimension", s->family);
            goto cleanup;
        }
        if (ktune_plot_write(s, points, n, x_dim, dtype, vendor_names, nvendors, w.device.name,
                             plot_png, err))
            goto cleanup;
        fprintf(out, "ktune: wrote %s\n", plot_png);
    }
    rc = 0;
cleanup:
    ktune_worker_stop(&w);
    ktune_registry_free(&reg);
    ktune_buf_free(&csv);
    free(choice);
    free(points);
    free(variant_us);
    return rc;
}
