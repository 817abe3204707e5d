#define _POSIX_C_SOURCE 200809L
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep.h"

#define KTUNE_BIG_BYTES (32.0 * 1024 * 1024)

/* Starts the worker and loads the registry of its device. */
static int open_device_registry(const ktune_space *s, const char *registry_dir,
                                const ktune_worker_opts *wopts, ktune_worker *w,
                                ktune_registry *reg, char *path, size_t size, ktune_err *err)
{
    if (ktune_worker_start(w, wopts, err))
        return -1;
    char slug[256];
    ktune_device_slug(w->device.name, slug, sizeof slug, '-');
    snprintf(path, size, "%s/%s/%s.yaml", registry_dir, slug, s->family);
    if (ktune_registry_load(path, s, reg, err)) {
        ktune_worker_stop(w);
        return -1;
    }
    return 0;
}

/* Appends the key's values to a request line. */
static void append_key(const ktune_space *s, const int64_t *key, char *line, size_t size)
{
    size_t len = strlen(line);
    for (int d = 0; d < s->nkey && len < size; d++)
        len += (size_t)snprintf(line + len, size - len, " %lld", (long long)key[d]);
}

int ktune_bench_run(const ktune_space *s, const char *registry_dir,
                    const ktune_worker_opts *wopts, double timeout_s, const char *csv_path,
                    FILE *out, ktune_err *err)
{
    ktune_worker w;
    ktune_registry reg;
    ktune_buf csv = {0};
    int rc = -1;
    char path[4096];
    if (open_device_registry(s, registry_dir, wopts, &w, &reg, path, sizeof path, err))
        return -1;
    int64_t limits[KTUNE_NLIMITS];
    ktune_limits_from(&w.device, limits);
    int dtype_dim = -1;
    for (int d = 0; d < s->nkey; d++)
        if (s->key[d].kind == KTUNE_DIM_DTYPE && dtype_dim < 0)
            dtype_dim = d;
    ktune_buf_printf(&csv, "family,dtype,shape,config,tuned_us,default_us,anchor,anchor_us,gbps,"
                           "pct_of_ceiling,default_config,speedup,ceiling_gbps,bytes,tuned_spread\n");
    fprintf(out, "%-6s %-16s %-28s %10s %10s %8s %10s %8s %6s\n", "dtype", "shape", "config",
            "tuned_us", "default_us", "speedup", "copy_us", "GB/s", "%ceil");
    double log_speedup = 0, worst_big[3] = {INFINITY, INFINITY, INFINITY};
    int n = 0;
    for (int i = 0; i < reg.nentries; i++) {
        const ktune_entry *e = &reg.entries[i];
        int def = ktune_space_default_for(s, e->key, limits);
        if (def < 0) {
            ktune_fail(err, "no default is valid for an entry of %s", path);
            goto cleanup;
        }
        char line[4096], reply[4096], shape[256] = "";
        snprintf(line, sizeof line, "B %d", i);
        append_key(s, e->key, line, sizeof line);
        size_t len = strlen(line);
        snprintf(line + len, sizeof line - len, " %s %s", e->config, s->configs[def].name);
        size_t sl = 0;
        for (int d = 0; d < s->nkey; d++)
            if (d != dtype_dim)
                sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%s%lld", sl ? "x" : "",
                                       (long long)e->key[d]);
        ktune_reply_kind kind;
        if (ktune_worker_request(&w, line, timeout_s, reply, sizeof reply, &kind, err))
            goto cleanup;
        double tu, ts, du, ds, cu, cs, ceil_gbps, bytes;
        if (kind != KTUNE_REPLY_OK ||
            sscanf(reply, "R %*d ok %lf %lf %lf %lf %lf %lf %lf %lf", &tu, &ts, &du, &ds, &cu, &cs,
                   &ceil_gbps, &bytes) != 8) {
            ktune_fail(err, "bench of %s %s failed: %s", shape, e->config, reply);
            goto cleanup;
        }
        if (def == ktune_space_find_config(s, e->config)) {
            du = tu; /* the same config: one measurement, not two draws of the noise */
            ds = ts;
        }
        const char *dt = dtype_dim >= 0 ? ktune_dtype_name(e->key[dtype_dim]) : "-";
        double gbps = bytes / (tu * 1e3), pct = 100 * gbps / ceil_gbps;
        ktune_buf_printf(&csv, "%s,%s,%s,%s,%.4f,%.4f,copy,%.4f,%.1f,%.1f,%s,%.4f,%.1f,%.0f,%.5f\n",
                         s->family, dt, shape, e->config, tu, du, cu, gbps, pct,
                         s->configs[def].name, du / tu, ceil_gbps, bytes, ts);
        fprintf(out, "%-6s %-16s %-28s %10.3f %10.3f %8.3f %10.3f %8.0f %6.1f\n", dt, shape,
                e->config, tu, du, du / tu, cu, gbps, pct);
        log_speedup += log(du / tu);
        n++;
        if (dtype_dim >= 0 && bytes / 2 >= KTUNE_BIG_BYTES)
            worst_big[e->key[dtype_dim]] = fmin(worst_big[e->key[dtype_dim]], pct);
    }
    if (ktune_file_write_if_changed(csv_path, csv.data, csv.len, err) < 0)
        goto cleanup;
    fprintf(out, "ktune bench %s on %s: %d shapes; tuned vs default %.3fx (geomean)", s->family,
            w.device.name, n, n ? exp(log_speedup / n) : 1.0);
    for (int d = 0; d < 3; d++)
        if (isfinite(worst_big[d]))
            fprintf(out, "; %s inputs >= 32 MB: worst %.1f%% of copy", ktune_dtype_name(d),
                    worst_big[d]);
    fprintf(out, "\nktune: wrote %s\n", csv_path);
    rc = 0;
cleanup:
    ktune_worker_stop(&w);
    ktune_registry_free(&reg);
    ktune_buf_free(&csv);
    return rc;
}

int ktune_verify_run(const ktune_space *s, const char *registry_dir,
                     const ktune_worker_opts *wopts, double timeout_s, double threshold, FILE *out,
                     ktune_err *err)
{
    ktune_worker w;
    ktune_registry reg;
    char path[4096];
    if (open_device_registry(s, registry_dir, wopts, &w, &reg, path, sizeof path, err))
        return -1;
    int rc = 0, slower = 0, broken = 0;
    fprintf(out, "%-36s %-36s %12s %12s %8s  %s\n", "key", "config", "committed_us", "now_us",
            "ratio", "verdict");
    for (int i = 0; i < reg.nentries; i++) {
        const ktune_entry *e = &reg.entries[i];
        char line[4096], reply[4096], key[256], status[32] = "";
        snprintf(line, sizeof line, "T %d %s", i, e->config);
        append_key(s, e->key, line, sizeof line);
        ktune_space_key_format(s, e->key, key, sizeof key);
        ktune_reply_kind kind;
        if (ktune_worker_request(&w, line, timeout_s, reply, sizeof reply, &kind, err)) {
            rc = -1;
            break;
        }
        double us = 0;
        if (kind != KTUNE_REPLY_OK || sscanf(reply, "R %*d %31s %lf", status, &us) != 2 ||
            strcmp(status, "ok") != 0) {
            fprintf(out, "%-36s %-36s %12.3f %12s %8s  FAILED: %s\n", key, e->config, e->us, "-",
                    "-", kind == KTUNE_REPLY_OK ? reply : "the worker died or hung");
            broken++;
            continue;
        }
        double ratio = us / e->us;
        int bad = ratio > 1 + threshold;
        slower += bad;
        fprintf(out, "%-36s %-36s %12.3f %12.3f %8.3f  %s\n", key, e->config, e->us, us, ratio,
                bad ? "SLOWER" : "ok");
    }
    if (rc == 0) {
        fprintf(out, "ktune verify %s on %s: %d entries, %d slower than recorded by more than "
                     "%.1f%%, %d failed\n",
                s->family, w.device.name, reg.nentries, slower, threshold * 100, broken);
        rc = slower || broken ? 1 : 0;
    }
    ktune_worker_stop(&w);
    ktune_registry_free(&reg);
    return rc;
}
