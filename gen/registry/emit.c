#define _POSIX_C_SOURCE 200809L
#include "emit.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs m4 -P over the definitions and a template; the output goes to out. */
static int m4_run(const ktune_emit_tools *tools, const ktune_buf *defs, const char *template_name,
                  ktune_buf *out, ktune_err *err)
{
    char defs_path[] = "/tmp/ktune-m4-XXXXXX";
    char template_path[4096];
    snprintf(template_path, sizeof template_path, "%s/%s", tools->templates, template_name);
    int fd = mkstemp(defs_path);
    if (fd < 0)
        return ktune_fail(err, "cannot create a temporary file: %s", strerror(errno));
    int rc = -1, status;
    FILE *f = fdopen(fd, "w");
    if (!f || fwrite(defs->data, 1, defs->len, f) != defs->len || fclose(f) != 0) {
        ktune_fail(err, "%s: write failed", defs_path);
        goto cleanup;
    }
    char *const argv[] = {(char *)tools->m4, "-P", "--fatal-warnings", defs_path, template_path,
                          NULL};
    if (ktune_run_capture(argv, out, &status, err))
        goto cleanup;
    if (status != 0) {
        ktune_fail(err, "%s: m4 failed on %s (status %d)", tools->m4, template_path, status);
        goto cleanup;
    }
    rc = 0;
cleanup:
    unlink(defs_path);
    return rc;
}

/* The last two components of a path: "spaces/softmax.yaml", the same on every machine. */
static const char *path_label(const char *path)
{
    const char *p = path + strlen(path);
    int slashes = 0;
    while (p > path && slashes < 2)
        if (*--p == '/')
            slashes++;
    return slashes == 2 ? p + 1 : path;
}

/* How every value reaches m4: as the Bison skeletons do it, quoted. A scalar macro expands to its
 * value in quotes, which the rescan strips, so the value is output as it is; a list macro's items
 * are calls whose arguments are quoted, and the templates quote each $n they output. The values
 * are validated before (identifiers, numbers, or text without m4's quotes [[ ]] or $, which m4
 * substitutes even inside quotes), so no value can end a quote, and no name reaches m4 unquoted:
 * a device named "m4_m4exit" is text, as is a key named "kt4_keys". */
static void def_text(ktune_buf *d, const char *macro, const char *value)
{
    ktune_buf_printf(d, "m4_define([[%s]], [[[[%s]]]])\n", macro, value);
}

static void defs_begin(ktune_buf *d, const ktune_space *s, const char *source)
{
    char upper[KTUNE_NAME_MAX + 1], prefix[KTUNE_NAME_MAX + 8];
    size_t i = 0;
    for (; s->family[i]; i++)
        upper[i] = (char)toupper((unsigned char)s->family[i]);
    upper[i] = '\0';
    ktune_buf_printf(d, "m4_changequote([[,]])m4_changecom()m4_divert(-1)\n");
    def_text(d, "kt4_source", source);
    def_text(d, "kt4_family", s->family);
    snprintf(prefix, sizeof prefix, "ktune__%s", s->family); /* the library's own symbols */
    def_text(d, "kt4_prefix", prefix);
    snprintf(prefix, sizeof prefix, "KTUNE_%s", upper);
    def_text(d, "kt4_PREFIX", prefix);
}

static int emit_file(const ktune_emit_tools *tools, ktune_buf *defs, const char *template_name,
                     const char *path, ktune_err *err)
{
    ktune_buf out = {0};
    ktune_buf_printf(defs, "m4_divert(0)m4_dnl\n");
    int rc = m4_run(tools, defs, template_name, &out, err);
    if (rc == 0)
        rc = ktune_file_write_if_changed(path, out.data ? out.data : "", out.len, err) < 0 ? -1 : 0;
    ktune_buf_free(&out);
    return rc;
}

static void upper_into(const char *in, char *out, size_t size)
{
    size_t i = 0;
    for (; in[i] && i + 1 < size; i++)
        out[i] = (char)toupper((unsigned char)in[i]);
    out[i] = '\0';
}

typedef struct {
    const ktune_space *space;
    const ktune_space_variant *variant;
    char buf[KTUNE_NAME_MAX + 16];
} c_names;

static const char *c_name(void *vctx, ktune_ref_kind kind, int index)
{
    c_names *ctx = vctx;
    switch (kind) {
    case KTUNE_REF_PARAM:
        snprintf(ctx->buf, sizeof ctx->buf, "p_%s", ctx->variant->params[index].name);
        break;
    case KTUNE_REF_KEY:
        snprintf(ctx->buf, sizeof ctx->buf, "k_%s", ctx->space->key[index].name);
        break;
    case KTUNE_REF_KEY_BYTES:
        snprintf(ctx->buf, sizeof ctx->buf, "k_%s_bytes", ctx->space->key[index].name);
        break;
    case KTUNE_REF_KEY_BITS:
        snprintf(ctx->buf, sizeof ctx->buf, "k_%s_bits", ctx->space->key[index].name);
        break;
    case KTUNE_REF_LIMIT:
        snprintf(ctx->buf, sizeof ctx->buf, "d_%s", ktune_limit_names[index]);
        break;
    case KTUNE_REF_KEY_IS:
        snprintf(ctx->buf, sizeof ctx->buf, "(k_%s == %dLL)", ctx->space->key[index / 64].name,
                 index % 64);
        break;
    }
    return ctx->buf;
}

static int check_space_path(const ktune_space *s, ktune_err *err)
{
    if (!ktune_is_safe_path(path_label(s->path)))
        return ktune_fail(err, "'%s': a space path may hold only [A-Za-z0-9_./+-]", s->path);
    return 0;
}

int ktune_emit_space(const ktune_space *s, const ktune_emit_tools *tools, const char *out_dir,
                     ktune_err *err)
{
    if (check_space_path(s, err))
        return -1;
    ktune_buf d = {0};
    defs_begin(&d, s, path_label(s->path));
    ktune_buf_printf(&d, "m4_define([[kt4_nkey]], [[%d]])\n", s->nkey);
    int nparams = 0;
    for (int v = 0; v < s->nvariants; v++)
        nparams = s->variants[v].nparams > nparams ? s->variants[v].nparams : nparams;
    ktune_buf_printf(&d, "m4_define([[kt4_nparams]], [[%d]])\n", nparams);
    ktune_buf_printf(&d, "m4_define([[kt4_keys]], [[");
    for (int k = 0; k < s->nkey; k++)
        ktune_buf_printf(&d, "kt4_key([[%s]], [[%s]], [[%d]], [[%s]])", s->key[k].name,
                         s->key[k].kind == KTUNE_DIM_DTYPE ? "KTUNE_DIM_DTYPE" : "KTUNE_DIM_INT",
                         k, s->key[k].kind == KTUNE_DIM_DTYPE ? "1" : "0");
    ktune_buf_printf(&d, "]])\n");
    ktune_buf_printf(&d, "m4_define([[kt4_defaults]], [[");
    for (int i = 0; i < s->ndefaults; i++)
        ktune_buf_printf(&d, "kt4_default([[%s]])", s->configs[s->defaults[i]].name);
    ktune_buf_printf(&d, "]])\n");
    ktune_buf_printf(&d, "m4_define([[kt4_limits]], [[");
    for (int i = 0; i < KTUNE_NLIMITS; i++) /* a limit's name is its ktune_device field's */
        ktune_buf_printf(&d, "kt4_limit([[%s]], [[%s]])", ktune_limit_names[i], ktune_limit_names[i]);
    ktune_buf_printf(&d, "]])\n");
    ktune_buf_printf(&d, "m4_define([[kt4_variants]], [[");
    for (int v = 0; v < s->nvariants; v++) {
        const ktune_space_variant *var = &s->variants[v];
        char upper[KTUNE_NAME_MAX + 1];
        upper_into(var->name, upper, sizeof upper);
        ktune_buf params = {0}, cond = {0}, cost = {0};
        for (int p = 0; p < var->nparams; p++)
            ktune_buf_printf(&params, "kt4_param([[%s]], [[%d]])", var->params[p].name, p);
        c_names names = {s, var, ""};
        for (int c = 0; c < var->nconstraints; c++) {
            ktune_buf_printf(&cond, "%s", c ? " &&\n               " : "");
            ktune_expr_print_c(var->constraints[c].expr, &cond, c_name, &names);
        }
        if (var->nconstraints == 0)
            ktune_buf_printf(&cond, "1");
        if (var->cost)
            ktune_expr_print_c(var->cost, &cost, c_name, &names);
        else
            ktune_buf_printf(&cost, "0LL");
        ktune_buf_printf(&d, "kt4_variant([[%s]], [[%s]], [[%d]], [[%s]], [[%s]], [[%s]])",
                         var->name, upper, v, params.data ? params.data : "", cond.data,
                         cost.data);
        ktune_buf_free(&params);
        ktune_buf_free(&cond);
        ktune_buf_free(&cost);
    }
    ktune_buf_printf(&d, "]])\n");
    /* the instantiated dimensions: each value's name in upper case (a dtype's, or the number)
     * and what it adds to a combination's number */
    ktune_buf_printf(&d, "m4_define([[kt4_combos]], [[");
    int stride = ktune_space_ncombos(s);
    for (int i = 0; i < s->ninstantiated; i++) {
        const ktune_space_instantiated *in = &s->instantiated[i];
        const ktune_space_dim *dim = &s->key[in->dim];
        char dim_upper[KTUNE_NAME_MAX + 1];
        upper_into(dim->name, dim_upper, sizeof dim_upper);
        stride /= in->nvalues;
        ktune_buf_printf(&d, "kt4_combo_dim([[%s]], [[%d]], [[", dim_upper, in->dim);
        for (int j = 0; j < in->nvalues; j++) {
            char value[32], value_upper[32];
            if (dim->kind == KTUNE_DIM_DTYPE)
                snprintf(value, sizeof value, "%s", ktune_dtype_name(in->values[j]));
            else
                snprintf(value, sizeof value, "%lld", (long long)in->values[j]);
            upper_into(value, value_upper, sizeof value_upper);
            ktune_buf_printf(&d, "kt4_combo_value([[%s]], [[%s]], [[%lldLL]], [[%d]])", dim_upper,
                             value_upper, (long long)in->values[j], j * stride);
        }
        ktune_buf_printf(&d, "]])");
    }
    ktune_buf_printf(&d, "]])\n");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s_space.h", out_dir, s->family);
    int rc = emit_file(tools, &d, "space.h.m4", path, err);
    ktune_buf_free(&d);
    return rc;
}

int ktune_emit_instances(const ktune_space *s, const char *set, const int *configs,
                         const uint64_t *combos, int count, int shards,
                         const ktune_emit_tools *tools, const char *out_dir, ktune_err *err)
{
    const int ncombos = ktune_space_ncombos(s);
    const uint64_t every = ncombos >= 64 ? ~0ULL : (1ULL << ncombos) - 1;
    if (!ktune_is_identifier(set, 32))
        return ktune_fail(err, "--set: '%s' is not an identifier", set);
    if (shards < 1 || shards > 64)
        return ktune_fail(err, "--shards: %d is not between 1 and 64", shards);
    if (check_space_path(s, err))
        return -1;
    int rc = 0;
    for (int shard = 0; shard <= shards && rc == 0; shard++) {
        ktune_buf d = {0};
        defs_begin(&d, s, path_label(s->path));
        def_text(&d, "kt4_set", set);
        ktune_buf_printf(&d, "m4_define([[kt4_count]], [[%d]])\n", count);
        ktune_buf_printf(&d, "m4_define([[kt4_configs]], [[");
        for (int i = 0; i < count; i++) {
            /* consecutive configs to one file: those that differ only in their last
             * parameters often share kernels (a parameter the launcher passes at run time),
             * which a file then compiles once */
            if (shard < shards && (int)((int64_t)i * shards / count) != shard)
                continue;
            const ktune_space_config *c = &s->configs[configs[i]];
            const ktune_space_variant *v = &s->variants[c->variant];
            char upper[KTUNE_NAME_MAX + 1];
            upper_into(v->name, upper, sizeof upper);
            ktune_buf values = {0};
            for (int p = 0; p < v->nparams; p++)
                ktune_buf_printf(&values, "%s%lld", p ? ", " : "", (long long)c->params[p]);
            ktune_buf_printf(&d, "kt4_config([[%s]], [[%s]], [[%s]], [[0x%llxULL]], [[%s]])",
                             c->name, upper, values.data,
                             (unsigned long long)(combos ? combos[i] & every : every),
                             c->twin >= 0 ? s->configs[c->twin].name : "");
            ktune_buf_free(&values);
        }
        ktune_buf_printf(&d, "]])\n");
        char path[4096];
        if (shard < shards)
            snprintf(path, sizeof path, "%s/%s_%s_%d.cu", out_dir, s->family, set, shard);
        else
            snprintf(path, sizeof path, "%s/%s_%s.cu", out_dir, s->family, set);
        rc = emit_file(tools, &d, shard < shards ? "kernels.cu.m4" : "instances.cu.m4", path,
                       err);
        ktune_buf_free(&d);
    }
    return rc;
}

static int check_registry_text(const ktune_registry *reg, ktune_err *err)
{
    if (!ktune_is_safe_text(reg->device, 200))
        return ktune_fail(err, "device name '%s' holds a character that is not allowed",
                          reg->device);
    for (int i = 0; i < reg->nruns; i++) {
        const ktune_run_info *r = &reg->runs[i];
        if (!ktune_is_safe_text(r->name, 200) || !ktune_is_safe_text(r->driver, 60) ||
            !ktune_is_safe_text(r->cuda, 60) || !ktune_is_safe_text(r->source, 60) ||
            !ktune_is_safe_text(r->date, 30))
            return ktune_fail(err, "run %d holds a character that is not allowed", r->id);
    }
    for (int i = 0; i < reg->nentries; i++) {
        const ktune_entry *e = &reg->entries[i];
        if (!ktune_is_identifier(e->config, KTUNE_CONFIG_NAME_MAX - 1))
            return ktune_fail(err, "config '%s' is not an identifier", e->config);
        /* a time the header writes as a float literal: finite, positive, within float */
        if (!(e->us > 0 && e->us < 1e30) || !(e->default_us > 0 && e->default_us < 1e30))
            return ktune_fail(err, "entry %d (%s): its times must be positive and finite", i,
                              e->config);
    }
    return 0;
}

static void table_symbol(const ktune_space *s, const ktune_registry *reg, char *out, size_t size)
{
    char slug[256];
    ktune_device_slug(reg->device, slug, sizeof slug, '_');
    snprintf(out, size, "ktune_%s_%s_%d", s->family, slug, reg->sms);
}

int ktune_emit_table(const ktune_space *s, const ktune_registry *reg, const char *source,
                     const ktune_emit_tools *tools, ktune_buf *out, ktune_err *err)
{
    if (check_registry_text(reg, err))
        return -1;
    if (!ktune_is_safe_path(source))
        return ktune_fail(err, "'%s': a registry path may hold only [A-Za-z0-9_./+-]", source);
    if (reg->nentries == 0)
        return ktune_fail(err, "%s: no entries to emit", source);
    char symbol[512], guard[512];
    table_symbol(s, reg, symbol, sizeof symbol);
    upper_into(symbol, guard, sizeof guard);
    ktune_buf d = {0};
    defs_begin(&d, s, source);
    def_text(&d, "kt4_symbol", symbol);
    strncat(guard, "_H", sizeof guard - strlen(guard) - 1);
    def_text(&d, "kt4_guard", guard);
    def_text(&d, "kt4_device", reg->device);
    ktune_buf_printf(&d, "m4_define([[kt4_sms]], [[%d]])\n", reg->sms);
    ktune_buf_printf(&d, "m4_define([[kt4_cc]], [[%d]])\n", reg->cc);
    ktune_buf_printf(&d, "m4_define([[kt4_nrows]], [[%d]])\n", reg->nentries);
    ktune_buf_printf(&d, "m4_define([[kt4_runs]], [[");
    for (int i = 0; i < reg->nruns; i++) {
        const ktune_run_info *r = &reg->runs[i];
        ktune_buf_printf(&d, "kt4_run([[%d]], [[%s]], [[%s]], [[%s]], [[%s]], [[%s]])", r->id,
                         r->name, r->driver, r->cuda, r->source, r->date);
    }
    ktune_buf_printf(&d, "]])\n");
    ktune_buf_printf(&d, "m4_define([[kt4_rows]], [[");
    for (int i = 0; i < reg->nentries; i++) {
        const ktune_entry *e = &reg->entries[i];
        ktune_buf key = {0};
        for (int k = 0; k < s->nkey; k++) {
            if (s->key[k].kind == KTUNE_DIM_DTYPE) {
                char upper[32];
                upper_into(ktune_dtype_name(e->key[k]), upper, sizeof upper);
                ktune_buf_printf(&key, "%sKTUNE_%s", k ? ", " : "", upper);
            } else {
                ktune_buf_printf(&key, "%s%lld", k ? ", " : "", (long long)e->key[k]);
            }
        }
        ktune_buf_printf(&d, "kt4_row([[%s]], [[%s]], [[%.3f]], [[%.3f]])", key.data, e->config,
                         e->us, e->default_us);
        ktune_buf_free(&key);
    }
    ktune_buf_printf(&d, "]])\n");
    ktune_buf_printf(&d, "m4_divert(0)m4_dnl\n");
    int rc = m4_run(tools, &d, "table.h.m4", out, err);
    ktune_buf_free(&d);
    return rc;
}

int ktune_emit_table_index(const ktune_space *s, const ktune_registry *regs,
                           const char *const *headers, const int *const *instances,
                           const int *const *runners, int count, const ktune_emit_tools *tools,
                           const char *out_dir, ktune_err *err)
{
    ktune_buf d = {0};
    defs_begin(&d, s, "the registries of generated/");
    ktune_buf_printf(&d, "m4_define([[kt4_count]], [[%d]])\n", count);
    ktune_buf_printf(&d, "m4_define([[kt4_tables]], [[");
    for (int i = 0; i < count; i++) {
        char symbol[512];
        if (!ktune_is_safe_path(headers[i])) {
            ktune_buf_free(&d);
            return ktune_fail(err, "'%s': a header path may hold only [A-Za-z0-9_./+-]",
                              headers[i]);
        }
        table_symbol(s, &regs[i], symbol, sizeof symbol);
        ktune_buf_printf(&d, "kt4_table([[%s]], [[%s]], [[", headers[i], symbol);
        for (int r = 0; r < regs[i].nentries; r++)
            ktune_buf_printf(&d, "%s%d", r ? ", " : "", instances[i][r]);
        ktune_buf_printf(&d, "]], [[");
        for (int r = 0; r < regs[i].nentries * KTUNE_TABLE_RUNNER_UPS; r++)
            ktune_buf_printf(&d, "%s%d", r ? ", " : "", runners[i][r]);
        ktune_buf_printf(&d, "]], [[");
        /* the runner-ups' times, finite and positive as the registry's loader checked */
        for (int e = 0; e < regs[i].nentries; e++)
            for (int j = 0; j < KTUNE_TABLE_RUNNER_UPS; j++) {
                const ktune_entry *en = &regs[i].entries[e];
                ktune_buf_printf(&d, "%s%.3ff", e || j ? ", " : "",
                                 j < en->nrunner_ups ? en->runner_ups[j].us : 0.0);
            }
        ktune_buf_printf(&d, "]])");
    }
    ktune_buf_printf(&d, "]])\n");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s_tables.c", out_dir, s->family);
    int rc = emit_file(tools, &d, "tables.c.m4", path, err);
    ktune_buf_free(&d);
    return rc;
}
