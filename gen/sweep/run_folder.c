#define _POSIX_C_SOURCE 200809L
#include "run_folder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "registry.h"
#include "yaml_tree.h"

#define MAX_FIELDS 8

/* Splits line at commas into exactly n fields (empty ones kept); col[i]: field i's column. */
static int split(char *line, int n, char **field, int *col)
{
    int count = 0;
    char *p = line;
    for (;;) {
        if (count == n)
            return -1;
        field[count] = p;
        col[count++] = (int)(p - line) + 1;
        char *comma = strchr(p, ',');
        if (!comma)
            break;
        *comma = '\0';
        p = comma + 1;
    }
    return count == n ? 0 : -1;
}

static int bad(ktune_err *err, const char *file, int lineno, int col, const char *what,
               const char *text)
{
    return ktune_fail_at(err, file, lineno, col, "%s, not '%.60s'", what, text);
}

static int int_in(const char *text, int64_t min, int64_t max, int *out)
{
    int64_t v;
    if (!ktune_parse_int(text, &v) || v < min || v > max)
        return 0;
    *out = (int)v;
    return 1;
}

/* Splits a line of a CSV whose header is `header` (n fields) and parses its first field, the key. */
static int line_begin(const ktune_space *s, char *line, const char *header, int n,
                      const char *file, int lineno, char **f, int *col, int64_t *key,
                      ktune_err *err)
{
    ktune_err inner;
    if (split(line, n, f, col))
        return ktune_fail_at(err, file, lineno, 1, "expected %d fields: %s", n, header);
    if (ktune_space_key_parse(s, f[0], key, &inner))
        return ktune_fail_at(err, file, lineno, col[0], "%s", inner.msg);
    return 0;
}

static const char trials_header[] = "key,config,status,median_us,spread,samples,detail";
static const char final_header[] = "key,config,rank,of,us,spread,is_default,is_committed";

int ktune_trial_parse(const ktune_space *s, char *line, const char *file, int lineno,
                      ktune_trial_line *t, ktune_err *err)
{
    char *f[MAX_FIELDS];
    int col[MAX_FIELDS];
    memset(t, 0, sizeof *t);
    if (line_begin(s, line, trials_header, 7, file, lineno, f, col, t->key, err))
        return -1;
    if ((t->config = ktune_space_find_config(s, f[1])) < 0)
        return bad(err, file, lineno, col[1], "a config of the space", f[1]);
    if ((t->status = ktune_trial_status_parse(f[2])) == KTUNE_TRIAL_NONE)
        return bad(err, file, lineno, col[2], "a status (ok, invalid, wrong, failed, timeout)",
                   f[2]);
    if (t->status == KTUNE_TRIAL_OK
            ? !ktune_parse_double(f[3], &t->us) || !(t->us > 0 && t->us <= KTUNE_TIME_MAX_US)
            : strcmp(f[3], "inf") != 0)
        return bad(err, file, lineno, col[3],
                   t->status == KTUNE_TRIAL_OK ? "a time in us, more than 0 and at most 1e9"
                                               : "inf",
                   f[3]);
    if (t->status != KTUNE_TRIAL_OK)
        t->us = INFINITY;
    if (!ktune_parse_double(f[4], &t->spread) || !(t->spread >= 0 && t->spread <= 1e9))
        return bad(err, file, lineno, col[4], "a spread of at least 0", f[4]);
    if (!int_in(f[5], 0, 1000000, &t->samples))
        return bad(err, file, lineno, col[5], "a count of samples", f[5]);
    return 0;
}

int ktune_final_parse(const ktune_space *s, char *line, const char *file, int lineno,
                      ktune_final_row *r, ktune_err *err)
{
    char *f[MAX_FIELDS];
    int col[MAX_FIELDS];
    memset(r, 0, sizeof *r);
    if (line_begin(s, line, final_header, 8, file, lineno, f, col, r->key, err))
        return -1;
    if (!int_in(f[2], 0, KTUNE_FINAL_MAX_BLOCK, &r->rank))
        return bad(err, file, lineno, col[2], "a rank from 0 to 64", f[2]);
    if (r->rank == 0) { /* the shape had no winner */
        if (strcmp(f[1], "-") != 0 || strcmp(f[3], "0") != 0)
            return ktune_fail_at(err, file, lineno, col[1], "a row of rank 0 is key,-,0,0,...");
        snprintf(r->config, sizeof r->config, "-");
        return 0;
    }
    if (ktune_space_find_config(s, f[1]) < 0)
        return bad(err, file, lineno, col[1], "a config of the space", f[1]);
    snprintf(r->config, sizeof r->config, "%s", f[1]);
    if (!int_in(f[3], r->rank, KTUNE_FINAL_MAX_BLOCK, &r->of))
        return bad(err, file, lineno, col[3], "a block size from the rank to 64", f[3]);
    if (!ktune_parse_double(f[4], &r->us) || !(r->us > 0 && r->us <= KTUNE_TIME_MAX_US))
        return bad(err, file, lineno, col[4], "a time in us, more than 0 and at most 1e9", f[4]);
    if (!ktune_parse_double(f[5], &r->spread) || !(r->spread >= 0 && r->spread <= 1e9))
        return bad(err, file, lineno, col[5], "a spread of at least 0", f[5]);
    if (!int_in(f[6], 0, 1, &r->is_default))
        return bad(err, file, lineno, col[6], "0 or 1", f[6]);
    if (!int_in(f[7], 0, 1, &r->is_committed))
        return bad(err, file, lineno, col[7], "0 or 1", f[7]);
    return 0;
}

/* Calls each(line, lineno, ctx) for every complete line of path after the header (a last line
 * without its newline was cut short by a kill, and is not read); stops at the first error. */
typedef int (*line_fn)(char *line, int lineno, void *ctx, ktune_err *err);

static int each_line(const char *path, const char *header, line_fn each, void *ctx,
                     ktune_err *err)
{
    size_t len;
    char *data = ktune_file_read(path, &len, err);
    if (!data)
        return -1;
    int rc = 0, lineno = 0;
    for (char *p = data; rc == 0 && p < data + len;) {
        char *nl = memchr(p, '\n', (size_t)(data + len - p));
        if (!nl)
            break;
        *nl = '\0';
        lineno++;
        if (memchr(p, '\0', (size_t)(nl - p)))
            rc = ktune_fail_at(err, path, lineno, 1, "a NUL byte in the line");
        else if (lineno == 1 ? strcmp(p, header) != 0 : 0)
            rc = ktune_fail_at(err, path, 1, 1, "the first line must be '%s'", header);
        else if (lineno > 1)
            rc = each(p, lineno, ctx, err);
        p = nl + 1;
    }
    free(data);
    return rc;
}

typedef struct {
    const ktune_space *space;
    const char *path;
    ktune_final_row *rows;
    int count, cap;
    ktune_buf *copy; /* the lines, for merge */
} lines_ctx;

static int trial_line(char *line, int lineno, void *vctx, ktune_err *err)
{
    lines_ctx *ctx = vctx;
    ktune_trial_line t;
    if (ctx->copy)
        ktune_buf_printf(ctx->copy, "%s\n", line);
    return ktune_trial_parse(ctx->space, line, ctx->path, lineno, &t, err);
}

int ktune_trials_check(const char *run_dir, const ktune_space *s, ktune_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/trials.csv", run_dir);
    lines_ctx ctx = {s, path, NULL, 0, 0, NULL};
    return each_line(path, trials_header, trial_line, &ctx, err);
}

static int final_line(char *line, int lineno, void *vctx, ktune_err *err)
{
    lines_ctx *ctx = vctx;
    if (ctx->count == ctx->cap) {
        ctx->cap = ctx->cap ? ctx->cap * 2 : 256;
        ktune_final_row *grown = realloc(ctx->rows, sizeof *grown * (size_t)ctx->cap);
        if (!grown)
            return ktune_fail(err, "out of memory");
        ctx->rows = grown;
    }
    if (ktune_final_parse(ctx->space, line, ctx->path, lineno, &ctx->rows[ctx->count], err))
        return -1;
    ctx->count++;
    return 0;
}

int ktune_final_load(const char *run_dir, const ktune_space *s, ktune_final_row **rows_out,
                     int *count_out, ktune_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/final.csv", run_dir);
    lines_ctx ctx = {s, path, NULL, 0, 0, NULL};
    struct stat st;
    if (stat(path, &st) != 0)
        return ktune_fail(err, "%s: cannot open (is %s a run folder?)", path, run_dir);
    if (each_line(path, final_header, final_line, &ctx, err)) {
        free(ctx.rows);
        return -1;
    }
    ktune_final_row *rows = ctx.rows;
    int count = ctx.count;
    /* Blocks: rows 1..of of one key in a row (a shape without a winner is one row of rank 0).
     * Keep complete blocks only (a sweep killed while it wrote one left it short), and of each
     * key the last one. */
    int out = 0;
    for (int i = 0; i < count;) {
        int len = rows[i].rank == 0 ? 1 : rows[i].of, ok = rows[i].rank <= 1 && len >= 1;
        for (int j = 1; ok && j < len; j++)
            ok = i + j < count && rows[i + j].rank == j + 1 && rows[i + j].of == len &&
                 ktune_space_key_compare(s, rows[i + j].key, rows[i].key) == 0;
        if (!ok || i + len > count) {
            i++;
            continue;
        }
        int w = 0;
        for (int k = 0; k < out; k++)
            if (ktune_space_key_compare(s, rows[k].key, rows[i].key) != 0)
                rows[w++] = rows[k];
        out = w;
        for (int j = 0; j < len; j++)
            rows[out++] = rows[i + j];
        i += len;
    }
    *rows_out = rows;
    *count_out = out;
    return 0;
}

/* Whether two paths name the same existing folder. */
static int same_folder(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

static const ktune_space *merge_space; /* qsort has no context argument in C11 */

static int final_row_cmp(const void *a, const void *b)
{
    const ktune_final_row *x = a, *y = b;
    int c = ktune_space_key_compare(merge_space, x->key, y->key);
    return c ? c : x->rank - y->rank;
}

/* src made fit for a YAML double-quoted string: printable ASCII, " and a backslash as ', at most max
 * characters. */
static void yaml_text(char *dst, size_t size, const char *src, size_t max)
{
    size_t n = 0;
    for (const char *c = src ? src : ""; *c && n + 1 < size && n < max; c++)
        dst[n++] = *c == '"' || *c == '\\' ? '\'' : *c >= 32 && *c < 127 ? *c : '?';
    dst[n] = '\0';
}

/* A scalar of a run's meta.yaml, as yaml_text, or "unknown" where it has none. */
static void meta_text(const ktune_node *meta, const char *key, char *dst, size_t size)
{
    const ktune_node *v = ktune_map_get(meta, key);
    yaml_text(dst, size, v && v->kind == KTUNE_NODE_SCALAR ? v->value : "unknown", 200);
}

/* One entry of a merged run's list: a run's own metadata (item: its meta.yaml, or an entry of the
 * list of a run that was itself merged). */
static void merged_entry(const ktune_node *item, ktune_buf *b)
{
    char run_name[256], shard[64], gpu[64], uuid[64], state[256];
    meta_text(item, "name", run_name, sizeof run_name);
    meta_text(item, "shard", shard, sizeof shard);
    meta_text(item, "gpu", gpu, sizeof gpu);
    meta_text(item, "gpu_uuid", uuid, sizeof uuid);
    meta_text(item, "gpu_state_start", state, sizeof state);
    ktune_buf_printf(b,
                     "  - {name: \"%s\", shard: \"%s\", gpu: \"%s\", gpu_uuid: \"%s\", "
                     "gpu_state_start: \"%s\"}\n",
                     run_name, shard, gpu, uuid, state);
}

/* The merged run's meta.yaml: the first run's, named after out, without what was one run's own
 * (its shard, GPU and the GPU's state, or its own list of merged runs), and a list of the merged
 * runs with those (a merged run's list in place of that run). */
static int merged_meta(const char *out, const char *const *runs, int count, ktune_buf *b,
                       ktune_err *err)
{
    char path[4096];
    size_t len;
    snprintf(path, sizeof path, "%s/meta.yaml", runs[0]);
    char *first = ktune_file_read(path, &len, err);
    if (!first)
        return -1;
    static const char *const own[] = {"shard:",  "gpu:", "gpu_uuid:", "gpu_state_start:",
                                      "merged:", "  - ", NULL};
    const char *base = strrchr(out, '/');
    char name[256];
    yaml_text(name, sizeof name, base ? base + 1 : out, 200);
    char *save = NULL;
    for (char *line = strtok_r(first, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int drop = 0;
        for (int i = 0; own[i]; i++)
            drop |= strncmp(line, own[i], strlen(own[i])) == 0;
        if (strncmp(line, "# Generated by ktune sweep.", 27) == 0)
            ktune_buf_printf(b, "# Generated by ktune merge. DO NOT EDIT.\n");
        else if (strncmp(line, "name:", 5) == 0)
            ktune_buf_printf(b, "name: \"%s\"\n", name);
        else if (!drop)
            ktune_buf_printf(b, "%s\n", line);
    }
    free(first);
    ktune_buf_printf(b, "merged:\n");
    for (int r = 0; r < count; r++) {
        snprintf(path, sizeof path, "%s/meta.yaml", runs[r]);
        ktune_node *meta = ktune_yaml_load(path, err);
        if (!meta)
            return -1;
        const ktune_node *list = ktune_map_get(meta, "merged");
        if (list && list->kind == KTUNE_NODE_SEQ)
            for (int i = 0; i < list->count; i++)
                merged_entry(list->items[i], b);
        else
            merged_entry(meta, b);
        ktune_node_free(meta);
    }
    return 0;
}

/* The merged run's summary.txt: what was merged, then each run's summary (its times, counts and
 * the GPU's state at its end), a line each prefixed with the run's folder. */
static void merged_summary(const char *out, const char *const *runs, int count, int shapes,
                           ktune_buf *b)
{
    ktune_buf_printf(b, "ktune: %s: merged %d runs, %d shapes with a final block\n", out, count,
                     shapes);
    for (int r = 0; r < count; r++) {
        char path[4096], line[1024];
        snprintf(path, sizeof path, "%s/summary.txt", runs[r]);
        FILE *f = fopen(path, "r");
        if (!f) {
            ktune_buf_printf(b, "[%.200s] no summary.txt (the run did not finish)\n", runs[r]);
            continue;
        }
        for (int n = 0; n < 64 && fgets(line, sizeof line, f); n++) {
            char text[1024];
            line[strcspn(line, "\n")] = '\0';
            yaml_text(text, sizeof text, line, 1000);
            ktune_buf_printf(b, "[%.200s] %s\n", runs[r], text);
        }
        fclose(f);
    }
}

int ktune_merge_runs(const ktune_space *s, const char *out, const char *const *runs, int count,
                     ktune_err *err)
{
    ktune_run_info first, info;
    char path[4096];
    ktune_final_row *all = NULL;
    int nall = 0, rc = -1;
    ktune_buf trials = {0}, final = {0}, meta = {0}, summary = {0};
    memset(&first, 0, sizeof first);
    if (count < 1)
        return ktune_fail(err, "merge: no run to merge");
    for (int r = 0; r < count; r++) {
        if (same_folder(out, runs[r]) || strcmp(out, runs[r]) == 0)
            return ktune_fail(err, "merge: the output %s is also a run to merge (%s); name a new "
                                   "folder",
                              out, runs[r]);
        for (int q = 0; q < r; q++)
            if (same_folder(runs[q], runs[r]) || strcmp(runs[q], runs[r]) == 0)
                return ktune_fail(err, "merge: %s and %s are the same run", runs[q], runs[r]);
        snprintf(path, sizeof path, "%s/meta.yaml", runs[r]);
        if (ktune_run_info_load(path, r ? &info : &first, err))
            return -1;
        if (r && (strcmp(info.device, first.device) != 0 || info.sms != first.sms ||
                  strcmp(info.family, first.family) != 0))
            return ktune_fail(err, "%s (%s on %s, %d SMs) does not go with %s (%s on %s, %d SMs)",
                              runs[r], info.family, info.device, info.sms, runs[0], first.family,
                              first.device, first.sms);
    }
    if (strcmp(first.family, s->family) != 0)
        return ktune_fail(err, "%s holds a %s run, not %s", runs[0], first.family, s->family);
    /* everything is read and checked before anything is written */
    ktune_buf_printf(&trials, "%s\n", trials_header);
    ktune_buf_printf(&final, "%s\n", final_header);
    for (int r = 0; r < count; r++) {
        ktune_final_row *rows;
        int n;
        snprintf(path, sizeof path, "%s/trials.csv", runs[r]);
        lines_ctx ctx = {s, path, NULL, 0, 0, &trials};
        if (each_line(path, trials_header, trial_line, &ctx, err) ||
            ktune_final_load(runs[r], s, &rows, &n, err))
            goto cleanup;
        /* a later run's block for a key replaces an earlier one */
        int w = 0;
        for (int i = 0; i < nall; i++) {
            int later = 0;
            for (int j = 0; j < n && !later; j++)
                later = ktune_space_key_compare(s, all[i].key, rows[j].key) == 0;
            if (!later)
                all[w++] = all[i];
        }
        ktune_final_row *grown = realloc(all, sizeof *all * (size_t)(w + n + 1));
        if (!grown) {
            free(rows);
            ktune_fail(err, "out of memory");
            goto cleanup;
        }
        all = grown;
        memcpy(all + w, rows, sizeof *rows * (size_t)n);
        nall = w + n;
        free(rows);
    }
    merge_space = s;
    qsort(all, (size_t)nall, sizeof *all, final_row_cmp);
    for (int i = 0; i < nall; i++) {
        char key[256];
        ktune_space_key_format(s, all[i].key, key, sizeof key);
        ktune_buf_printf(&final, "%s,%s,%d,%d,%.4f,%.5f,%d,%d\n", key, all[i].config, all[i].rank,
                         all[i].of, all[i].us, all[i].spread, all[i].is_default,
                         all[i].is_committed);
    }
    int shapes = 0;
    for (int i = 0; i < nall; i++)
        shapes += i == 0 || ktune_space_key_compare(s, all[i].key, all[i - 1].key) != 0;
    merged_summary(out, runs, count, shapes, &summary);
    if (merged_meta(out, runs, count, &meta, err) || ktune_mkdirs(out, err))
        goto cleanup;
    snprintf(path, sizeof path, "%s/meta.yaml", out);
    if (ktune_file_write_if_changed(path, meta.data, meta.len, err) < 0)
        goto cleanup;
    snprintf(path, sizeof path, "%s/trials.csv", out);
    if (ktune_file_write_if_changed(path, trials.data, trials.len, err) < 0)
        goto cleanup;
    snprintf(path, sizeof path, "%s/final.csv", out);
    if (ktune_file_write_if_changed(path, final.data, final.len, err) < 0)
        goto cleanup;
    snprintf(path, sizeof path, "%s/summary.txt", out);
    if (ktune_file_write_if_changed(path, summary.data, summary.len, err) < 0)
        goto cleanup;
    rc = 0;
cleanup:
    ktune_buf_free(&meta);
    ktune_buf_free(&summary);
    ktune_buf_free(&trials);
    ktune_buf_free(&final);
    free(all);
    return rc;
}
