#define _POSIX_C_SOURCE 200809L
#include "registry.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yaml_tree.h"

void ktune_device_slug(const char *device, char *out, size_t size, char sep)
{
    size_t n = 0;
    int pending = 0;
    for (const char *p = device; *p && n + 2 < size; p++) {
        if (isalnum((unsigned char)*p)) {
            if (pending && n > 0)
                out[n++] = sep;
            out[n++] = (char)tolower((unsigned char)*p);
            pending = 0;
        } else {
            pending = 1;
        }
    }
    out[n] = '\0';
}

static int text_field(const char *file, const ktune_node *map, const char *name, char *out,
                      size_t size, ktune_err *err)
{
    const ktune_node *n = ktune_map_get(map, name);
    if (!n)
        return ktune_fail_at(err, file, map->line, map->col, "missing key '%s'", name);
    if (ktune_expect_text(file, n, name, err))
        return -1;
    if (strlen(n->value) >= size)
        return ktune_fail_at(err, file, n->line, n->col, "%s is too long", name);
    snprintf(out, size, "%s", n->value);
    return 0;
}

static int int_field(const char *file, const ktune_node *map, const char *name, int64_t min,
                     int64_t max, int *out, ktune_err *err)
{
    const ktune_node *n = ktune_map_get(map, name);
    int64_t v;
    if (!n)
        return ktune_fail_at(err, file, map->line, map->col, "missing key '%s'", name);
    if (ktune_expect_int(file, n, name, min, max, &v, err))
        return -1;
    *out = (int)v;
    return 0;
}

/* A time of a registry: positive, at most KTUNE_TIME_MAX_US (a spread: 0 to 1e9). */
static int time_field(const char *file, const ktune_node *map, const char *name, int spread,
                      double *out, ktune_err *err)
{
    const ktune_node *n = ktune_map_get(map, name);
    if (!n)
        return ktune_fail_at(err, file, map->line, map->col, "missing key '%s'", name);
    if (ktune_expect_double(file, n, name, out, err))
        return -1;
    if (spread ? !(*out >= 0 && *out <= 1e9) : !(*out > 0 && *out <= KTUNE_TIME_MAX_US))
        return ktune_fail_at(err, file, n->line, n->col, "%s must be %s, not %s", name,
                             spread ? "between 0 and 1e9" : "more than 0 and at most 1e9 (us)",
                             n->value);
    return 0;
}

static int load_run(const char *file, const ktune_node *n, ktune_run_info *run, int with_id,
                    ktune_err *err)
{
    static const char *const allowed[] = {
        "id",   "name", "family", "device", "sms", "cc", "driver", "cuda", "source", "date",
        "command", "flags", "cuda_driver_api", "l2_bytes", "smem_per_block", "samples",
        "min_sample_us", "config_timeout_s", "seed", "patience", "shard", "gpu_state_start",
        "search", "screen_samples", "screen_min_sample_us", "screen_cut", "top", "final_margin",
        "warmup_us", "gpu", "gpu_uuid", "merged", NULL};
    if (ktune_expect(file, n, KTUNE_NODE_MAP, "a run", err) ||
        ktune_expect_keys(file, n, allowed, NULL, err))
        return -1;
    memset(run, 0, sizeof *run);
    if ((with_id && int_field(file, n, "id", 1, 1000000, &run->id, err)) ||
        text_field(file, n, "name", run->name, sizeof run->name, err) ||
        text_field(file, n, "driver", run->driver, sizeof run->driver, err) ||
        text_field(file, n, "cuda", run->cuda, sizeof run->cuda, err) ||
        text_field(file, n, "source", run->source, sizeof run->source, err) ||
        text_field(file, n, "date", run->date, sizeof run->date, err))
        return -1;
    if (!with_id && (text_field(file, n, "family", run->family, sizeof run->family, err) ||
                     text_field(file, n, "device", run->device, sizeof run->device, err) ||
                     int_field(file, n, "sms", 1, 100000, &run->sms, err) ||
                     int_field(file, n, "cc", 10, 1000, &run->cc, err)))
        return -1;
    snprintf(run->search, sizeof run->search, "exhaustive");
    if (!with_id && ktune_map_get(n, "search") &&
        text_field(file, n, "search", run->search, sizeof run->search, err))
        return -1;
    return 0;
}

int ktune_run_info_load(const char *path, ktune_run_info *run, ktune_err *err)
{
    ktune_node *root = ktune_yaml_load(path, err);
    if (!root)
        return -1;
    int rc = load_run(path, root, run, 0, err);
    ktune_node_free(root);
    return rc;
}

static int load_entry(const char *file, const ktune_node *n, const ktune_space *s,
                      const ktune_registry *reg, ktune_entry *e, ktune_err *err)
{
    const char *allowed[KTUNE_MAX_KEY + 8] = {"config", "us", "spread", "default_us", "run",
                                              "runner_ups"};
    for (int d = 0; d < s->nkey; d++)
        allowed[6 + d] = s->key[d].name;
    if (ktune_expect(file, n, KTUNE_NODE_MAP, "an entry", err) ||
        ktune_expect_keys(file, n, allowed, allowed, err))
        return -1;
    memset(e, 0, sizeof *e);
    for (int d = 0; d < s->nkey; d++) {
        const ktune_node *v = ktune_map_get(n, s->key[d].name);
        if (s->key[d].kind == KTUNE_DIM_DTYPE) {
            if (ktune_expect(file, v, KTUNE_NODE_SCALAR, "a dtype", err))
                return -1;
            if (!ktune_dtype_parse(v->value, &e->key[d]))
                return ktune_fail_at(err, file, v->line, v->col, "unknown dtype '%s'", v->value);
        } else if (ktune_expect_int(file, v, s->key[d].name, 1, (int64_t)1 << 40, &e->key[d],
                                    err)) {
            return -1;
        }
    }
    const ktune_node *cfg = ktune_map_get(n, "config");
    if (ktune_expect(file, cfg, KTUNE_NODE_SCALAR, "config", err))
        return -1;
    if (ktune_space_find_config(s, cfg->value) < 0)
        return ktune_fail_at(err, file, cfg->line, cfg->col, "config '%s' is not in %s",
                             cfg->value, s->path);
    snprintf(e->config, sizeof e->config, "%s", cfg->value);
    if (time_field(file, n, "us", 0, &e->us, err) ||
        time_field(file, n, "spread", 1, &e->spread, err) ||
        time_field(file, n, "default_us", 0, &e->default_us, err) ||
        int_field(file, n, "run", 1, 1000000, &e->run, err))
        return -1;
    int known = 0;
    for (int r = 0; r < reg->nruns; r++)
        known |= reg->runs[r].id == e->run;
    if (!known) {
        const ktune_node *rn = ktune_map_get(n, "run");
        return ktune_fail_at(err, file, rn->line, rn->col, "run %d is not listed under runs",
                             e->run);
    }
    const ktune_node *ru = ktune_map_get(n, "runner_ups");
    if (ktune_expect(file, ru, KTUNE_NODE_SEQ, "runner_ups", err))
        return -1;
    if (ru->count > KTUNE_RUNNER_UPS)
        return ktune_fail_at(err, file, ru->line, ru->col, "at most %d runner-ups",
                             KTUNE_RUNNER_UPS);
    static const char *const ru_keys[] = {"config", "us", NULL};
    for (int i = 0; i < ru->count; i++) {
        const ktune_node *m = ru->items[i];
        ktune_runner_up *r = &e->runner_ups[i];
        if (ktune_expect(file, m, KTUNE_NODE_MAP, "a runner-up", err) ||
            ktune_expect_keys(file, m, ru_keys, ru_keys, err))
            return -1;
        const ktune_node *rc = ktune_map_get(m, "config");
        if (ktune_expect(file, rc, KTUNE_NODE_SCALAR, "config", err))
            return -1;
        if (ktune_space_find_config(s, rc->value) < 0)
            return ktune_fail_at(err, file, rc->line, rc->col, "config '%s' is not in %s",
                                 rc->value, s->path);
        snprintf(r->config, sizeof r->config, "%s", rc->value);
        if (time_field(file, m, "us", 0, &r->us, err))
            return -1;
        e->nrunner_ups++;
    }
    return 0;
}

int ktune_registry_load(const char *path, const ktune_space *s, ktune_registry *reg,
                        ktune_err *err)
{
    static const char *const allowed[] = {"family", "device", "runs", "entries", NULL};
    static const char *const dev_keys[] = {"name", "sms", "cc", NULL};
    memset(reg, 0, sizeof *reg);
    ktune_node *root = ktune_yaml_load(path, err);
    if (!root)
        return -1;
    int rc = -1;
    if (ktune_expect(path, root, KTUNE_NODE_MAP, "a registry", err) ||
        ktune_expect_keys(path, root, allowed, allowed, err))
        goto cleanup;
    const ktune_node *fam = ktune_map_get(root, "family");
    if (ktune_expect_identifier(path, fam, "family", err))
        goto cleanup;
    if (strcmp(fam->value, s->family) != 0) {
        ktune_fail_at(err, path, fam->line, fam->col, "family '%s' is not %s's '%s'", fam->value,
                      s->path, s->family);
        goto cleanup;
    }
    snprintf(reg->family, sizeof reg->family, "%s", fam->value);
    const ktune_node *dev = ktune_map_get(root, "device");
    if (ktune_expect(path, dev, KTUNE_NODE_MAP, "device", err) ||
        ktune_expect_keys(path, dev, dev_keys, dev_keys, err) ||
        text_field(path, dev, "name", reg->device, sizeof reg->device, err) ||
        int_field(path, dev, "sms", 1, 100000, &reg->sms, err) ||
        int_field(path, dev, "cc", 10, 1000, &reg->cc, err))
        goto cleanup;
    const ktune_node *runs = ktune_map_get(root, "runs");
    if (ktune_expect_list(path, runs, "runs", err))
        goto cleanup;
    reg->runs = calloc((size_t)runs->count, sizeof *reg->runs);
    for (int i = 0; i < runs->count; i++) {
        if (load_run(path, runs->items[i], &reg->runs[i], 1, err))
            goto cleanup;
        for (int j = 0; j < i; j++)
            if (reg->runs[j].id == reg->runs[i].id) {
                const ktune_node *id = ktune_map_get(runs->items[i], "id");
                ktune_fail_at(err, path, id->line, id->col, "run %d is listed twice",
                              reg->runs[i].id);
                goto cleanup;
            }
        reg->nruns++;
    }
    const ktune_node *entries = ktune_map_get(root, "entries");
    if (ktune_expect(path, entries, KTUNE_NODE_SEQ, "entries", err))
        goto cleanup;
    reg->entries = calloc((size_t)entries->count + 1, sizeof *reg->entries);
    for (int i = 0; i < entries->count; i++) {
        if (load_entry(path, entries->items[i], s, reg, &reg->entries[i], err))
            goto cleanup;
        if (i > 0 && ktune_space_key_compare(s, reg->entries[i - 1].key, reg->entries[i].key) >= 0) {
            ktune_fail_at(err, path, entries->items[i]->line, entries->items[i]->col,
                          "entries must be sorted by key, without repeats");
            goto cleanup;
        }
        reg->nentries++;
    }
    rc = 0;
cleanup:
    ktune_node_free(root);
    if (rc)
        ktune_registry_free(reg);
    return rc;
}

void ktune_registry_free(ktune_registry *reg)
{
    free(reg->runs);
    free(reg->entries);
    memset(reg, 0, sizeof *reg);
}

void ktune_registry_format(const ktune_registry *reg, const ktune_space *s, ktune_buf *out)
{
    ktune_buf_printf(out,
                     "# Generated by ktune from the runs listed below. DO NOT EDIT: ktune apply "
                     "writes it, ktune emit turns it into %s.h.\n",
                     reg->family);
    ktune_buf_printf(out, "family: %s\n", reg->family);
    ktune_buf_printf(out, "device: {name: \"%s\", sms: %d, cc: %d}\n", reg->device, reg->sms,
                     reg->cc);
    ktune_buf_printf(out, "runs:\n");
    for (int i = 0; i < reg->nruns; i++) {
        const ktune_run_info *r = &reg->runs[i];
        ktune_buf_printf(out,
                         "  - {id: %d, name: \"%s\", driver: \"%s\", cuda: \"%s\", source: \"%s\", "
                         "date: \"%s\"}\n",
                         r->id, r->name, r->driver, r->cuda, r->source, r->date);
    }
    ktune_buf_printf(out, "entries:%s\n", reg->nentries ? "" : " []");
    for (int i = 0; i < reg->nentries; i++) {
        const ktune_entry *e = &reg->entries[i];
        ktune_buf_printf(out, "  - {");
        for (int d = 0; d < s->nkey; d++) {
            if (s->key[d].kind == KTUNE_DIM_DTYPE)
                ktune_buf_printf(out, "%s: %s, ", s->key[d].name, ktune_dtype_name(e->key[d]));
            else
                ktune_buf_printf(out, "%s: %lld, ", s->key[d].name, (long long)e->key[d]);
        }
        ktune_buf_printf(out, "config: %s, us: %.3f, spread: %.4f, default_us: %.3f, run: %d, "
                              "runner_ups: [",
                         e->config, e->us, e->spread, e->default_us, e->run);
        for (int r = 0; r < e->nrunner_ups; r++)
            ktune_buf_printf(out, "%s{config: %s, us: %.3f}", r ? ", " : "",
                             e->runner_ups[r].config, e->runner_ups[r].us);
        ktune_buf_printf(out, "]}\n");
    }
}

typedef struct {
    const ktune_space *space;
    const ktune_registry *expected;
} readback_ctx;

/* The file just written must load, and hold what was meant to be written. */
static int registry_readback(const char *path, void *vctx, ktune_err *err)
{
    const readback_ctx *ctx = vctx;
    ktune_registry back;
    if (ktune_registry_load(path, ctx->space, &back, err))
        return -1;
    int same = back.nentries == ctx->expected->nentries && back.nruns == ctx->expected->nruns &&
               back.sms == ctx->expected->sms && strcmp(back.device, ctx->expected->device) == 0;
    for (int i = 0; same && i < back.nentries; i++)
        same = strcmp(back.entries[i].config, ctx->expected->entries[i].config) == 0 &&
               ktune_space_key_compare(ctx->space, back.entries[i].key,
                                       ctx->expected->entries[i].key) == 0;
    ktune_registry_free(&back);
    return same ? 0 : ktune_fail(err, "%s: reads back other entries than were written", path);
}

int ktune_registry_write(const char *path, const ktune_registry *reg, const ktune_space *s,
                         ktune_err *err)
{
    ktune_buf out = {0};
    ktune_registry_format(reg, s, &out);
    readback_ctx ctx = {s, reg};
    int rc = ktune_file_write_validated(path, out.data, out.len, registry_readback, &ctx, err);
    ktune_buf_free(&out);
    return rc;
}

int ktune_registry_find(const ktune_registry *reg, const ktune_space *s, const int64_t *key)
{
    for (int i = 0; i < reg->nentries; i++)
        if (ktune_space_key_compare(s, reg->entries[i].key, key) == 0)
            return i;
    return -1;
}

void ktune_registry_put(ktune_registry *reg, const ktune_space *s, const ktune_entry *entry)
{
    int i = ktune_registry_find(reg, s, entry->key);
    if (i >= 0) {
        reg->entries[i] = *entry;
        return;
    }
    reg->entries = realloc(reg->entries, sizeof *reg->entries * (size_t)(reg->nentries + 1));
    int at = reg->nentries;
    while (at > 0 && ktune_space_key_compare(s, reg->entries[at - 1].key, entry->key) > 0) {
        reg->entries[at] = reg->entries[at - 1];
        at--;
    }
    reg->entries[at] = *entry;
    reg->nentries++;
}

int ktune_registry_next_run_id(const ktune_registry *reg)
{
    int id = 1;
    for (int i = 0; i < reg->nruns; i++)
        if (reg->runs[i].id >= id)
            id = reg->runs[i].id + 1;
    return id;
}

int ktune_registry_add_run(ktune_registry *reg, const ktune_run_info *run)
{
    int id = ktune_registry_next_run_id(reg);
    reg->runs = realloc(reg->runs, sizeof *reg->runs * (size_t)(reg->nruns + 1));
    reg->runs[reg->nruns] = *run;
    reg->runs[reg->nruns].id = id;
    reg->nruns++;
    return id;
}
