/* A family's space: its key, its variants (parameters, constraints) expanded into configs, its
 * defaults; the shapes are shapes.c's. */
#define _POSIX_C_SOURCE 200809L
#include "space.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapes.h"
#include "yaml_tree.h"

#define KTUNE_MAX_CONFIGS 100000
#define KTUNE_PARAM_MAX 1048576

int64_t ktune_space_combinations(const int *counts, int n)
{
    int64_t total = 1;
    for (int i = 0; i < n; i++) {
        total *= counts[i];
        if (total > KTUNE_MAX_COMBINATIONS)
            return KTUNE_MAX_COMBINATIONS + 1;
    }
    return total;
}

static int int64_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The index of v's parameter `name`, or -1 (also where v is NULL). */
static int variant_param(const ktune_space_variant *v, const char *name)
{
    for (int i = 0; v && i < v->nparams; i++)
        if (strcmp(v->params[i].name, name) == 0)
            return i;
    return -1;
}

int ktune_space_resolve(void *vctx, const char *name, ktune_ref_kind *kind, int *index)
{
    ktune_space_resolve_ctx *ctx = vctx;
    const int param = variant_param(ctx->variant, name);
    if (param >= 0) {
        *kind = KTUNE_REF_PARAM;
        *index = param;
        return 0;
    }
    for (int d = 0; d < ctx->space->nkey; d++) {
        const ktune_space_dim *dim = &ctx->space->key[d];
        char bytes[KTUNE_NAME_MAX + 8], bits[KTUNE_NAME_MAX + 8];
        snprintf(bytes, sizeof bytes, "%s_bytes", dim->name);
        snprintf(bits, sizeof bits, "%s_bits", dim->name);
        if (dim->kind == KTUNE_DIM_INT && strcmp(dim->name, name) == 0) {
            *kind = KTUNE_REF_KEY;
            *index = d;
            return 0;
        }
        if (dim->kind == KTUNE_DIM_DTYPE && strcmp(bytes, name) == 0) {
            *kind = KTUNE_REF_KEY_BYTES;
            *index = d;
            return 0;
        }
        if (dim->kind == KTUNE_DIM_DTYPE && strcmp(bits, name) == 0) {
            *kind = KTUNE_REF_KEY_BITS;
            *index = d;
            return 0;
        }
    }
    if (ctx->variant)
        for (int i = 0; i < KTUNE_NLIMITS; i++)
            if (strcmp(ktune_limit_names[i], name) == 0) {
                *kind = KTUNE_REF_LIMIT;
                *index = i;
                return 0;
            }
    for (int d = 0; d < ctx->space->nkey; d++) {
        const ktune_space_dim *dim = &ctx->space->key[d];
        const size_t len = strlen(dim->name);
        int64_t dtype;
        if (dim->kind == KTUNE_DIM_DTYPE && strncmp(name, dim->name, len) == 0 &&
            strncmp(name + len, "_is_", 4) == 0 && ktune_dtype_parse(name + len + 4, &dtype) &&
            dtype < 64) {
            *kind = KTUNE_REF_KEY_IS;
            *index = d * 64 + (int)dtype;
            return 0;
        }
    }
    return -1;
}

static int name_taken(const ktune_space *s, const ktune_space_variant *v, const char *name)
{
    for (int d = 0; d < s->nkey; d++)
        if (strcmp(s->key[d].name, name) == 0)
            return 1;
    for (int i = 0; i < KTUNE_NLIMITS; i++)
        if (strcmp(ktune_limit_names[i], name) == 0)
            return 1;
    return variant_param(v, name) >= 0 || strcmp(name, "variant") == 0;
}

static int load_key(const char *file, const ktune_node *n, ktune_space *s, ktune_err *err)
{
    static const char *const allowed[] = {"name", "type", NULL};
    static const char *const required[] = {"name", NULL};
    if (ktune_expect_list(file, n, "key", err))
        return -1;
    if (n->count > KTUNE_MAX_KEY)
        return ktune_fail_at(err, file, n->line, n->col, "key has more than %d dimensions",
                             KTUNE_MAX_KEY);
    for (int i = 0; i < n->count; i++) {
        const ktune_node *d = n->items[i];
        if (ktune_expect(file, d, KTUNE_NODE_MAP, "a key dimension", err) ||
            ktune_expect_keys(file, d, allowed, required, err))
            return -1;
        const ktune_node *name = ktune_map_get(d, "name");
        if (ktune_expect_identifier(file, name, "a key dimension's name", err))
            return -1;
        if (name_taken(s, NULL, name->value))
            return ktune_fail_at(err, file, name->line, name->col, "name '%s' is already taken",
                                 name->value);
        const ktune_node *type = ktune_map_get(d, "type");
        ktune_space_dim *dim = &s->key[s->nkey];
        dim->kind = KTUNE_DIM_INT;
        if (type) {
            if (ktune_expect(file, type, KTUNE_NODE_SCALAR, "type", err))
                return -1;
            if (strcmp(type->value, "dtype") == 0)
                dim->kind = KTUNE_DIM_DTYPE;
            else if (strcmp(type->value, "int") != 0)
                return ktune_fail_at(err, file, type->line, type->col,
                                     "type must be 'int' or 'dtype', not '%s'", type->value);
        }
        snprintf(dim->name, sizeof dim->name, "%s", name->value);
        s->nkey++;
    }
    return 0;
}

/* instantiate: {dim: [values], ...}: key dimensions and the values the kernels are compiled for,
 * KTUNE_COMBOS_MAX combinations at most. */
static int load_instantiate(const char *file, const ktune_node *n, ktune_space *s, ktune_err *err)
{
    if (ktune_expect(file, n, KTUNE_NODE_MAP, "instantiate", err))
        return -1;
    int64_t combos = 1;
    for (int i = 0; i < n->count; i++) {
        const ktune_node *name = n->keys[i], *list = n->items[i];
        int dim = -1;
        for (int d = 0; d < s->nkey; d++)
            if (strcmp(s->key[d].name, name->value) == 0)
                dim = d;
        if (dim < 0)
            return ktune_fail_at(err, file, name->line, name->col,
                                 "instantiate: '%s' is not a key dimension", name->value);
        for (int j = 0; j < s->ninstantiated; j++)
            if (s->instantiated[j].dim == dim)
                return ktune_fail_at(err, file, name->line, name->col,
                                     "instantiate: '%s' is named twice", name->value);
        if (ktune_expect_list(file, list, "instantiated values", err))
            return -1;
        combos *= list->count; /* a list has one value at least */
        if (combos > KTUNE_COMBOS_MAX)
            return ktune_fail_at(err, file, list->line, list->col,
                                 "instantiate: more than %d combinations of values (%lld)",
                                 KTUNE_COMBOS_MAX, (long long)combos);
        ktune_space_instantiated *in = &s->instantiated[s->ninstantiated++];
        in->dim = dim;
        for (int j = 0; j < list->count; j++) {
            const ktune_node *v = list->items[j];
            int64_t value;
            if (s->key[dim].kind == KTUNE_DIM_DTYPE) {
                if (ktune_expect(file, v, KTUNE_NODE_SCALAR, "a dtype", err))
                    return -1;
                if (!ktune_dtype_parse(v->value, &value))
                    return ktune_fail_at(err, file, v->line, v->col,
                                         "'%s' is not a dtype (%s)", v->value,
                                         ktune__dtype_names());
            } else if (ktune_expect_int(file, v, "an instantiated value", 0, KTUNE_PARAM_MAX,
                                        &value, err)) {
                return -1;
            }
            for (int k = 0; k < in->nvalues; k++)
                if (in->values[k] == value)
                    return ktune_fail_at(err, file, v->line, v->col,
                                         "instantiate: '%s' is listed twice", v->value);
            in->values[in->nvalues++] = value;
        }
    }
    return 0;
}

int ktune_space_ncombos(const ktune_space *s)
{
    int n = 1;
    for (int i = 0; i < s->ninstantiated; i++)
        n *= s->instantiated[i].nvalues;
    return n;
}

int ktune_space_combo(const ktune_space *s, const int64_t *key)
{
    int c = 0;
    for (int i = 0; i < s->ninstantiated; i++) {
        const ktune_space_instantiated *in = &s->instantiated[i];
        int at = -1;
        for (int j = 0; j < in->nvalues && at < 0; j++)
            if (in->values[j] == key[in->dim])
                at = j;
        if (at < 0)
            return -1;
        c = c * in->nvalues + at;
    }
    return c;
}

static int load_variant(const char *file, const ktune_node *vname, const ktune_node *n,
                        ktune_space *s, ktune_space_variant *v, ktune_err *err)
{
    static const char *const allowed[] = {"doc", "params", "constraints", "cost", "twin", NULL};
    static const char *const required[] = {"params", NULL};
    if (ktune_expect_identifier(file, vname, "a variant's name", err) ||
        ktune_expect(file, n, KTUNE_NODE_MAP, "a variant", err) ||
        ktune_expect_keys(file, n, allowed, required, err))
        return -1;
    snprintf(v->name, sizeof v->name, "%s", vname->value);
    const ktune_node *doc = ktune_map_get(n, "doc");
    if (doc && ktune_expect(file, doc, KTUNE_NODE_SCALAR, "doc", err))
        return -1;
    const ktune_node *params = ktune_map_get(n, "params");
    if (ktune_expect(file, params, KTUNE_NODE_MAP, "params", err))
        return -1;
    if (params->count == 0 || params->count > KTUNE_MAX_PARAMS)
        return ktune_fail_at(err, file, params->line, params->col,
                             "a variant has 1 to %d parameters", KTUNE_MAX_PARAMS);
    for (int i = 0; i < params->count; i++) {
        const ktune_node *pname = params->keys[i], *list = params->items[i];
        if (ktune_expect_identifier(file, pname, "a parameter's name", err))
            return -1;
        if (name_taken(s, v, pname->value))
            return ktune_fail_at(err, file, pname->line, pname->col,
                                 "name '%s' is already taken", pname->value);
        if (ktune_expect_list(file, list, "a parameter's values", err))
            return -1;
        ktune_space_param *p = &v->params[v->nparams];
        snprintf(p->name, sizeof p->name, "%s", pname->value);
        p->values = calloc((size_t)list->count, sizeof *p->values);
        v->nparams++;
        for (int j = 0; j < list->count; j++) {
            if (ktune_expect_int(file, list->items[j], "a parameter value", 0, KTUNE_PARAM_MAX,
                                 &p->values[j], err))
                return -1;
            p->nvalues++;
        }
        /* duplicates, found on a sorted copy; the error names the second listing */
        int64_t *sorted = malloc(sizeof *sorted * (size_t)p->nvalues);
        if (!sorted)
            return ktune_fail(err, "out of memory");
        memcpy(sorted, p->values, sizeof *sorted * (size_t)p->nvalues);
        qsort(sorted, (size_t)p->nvalues, sizeof *sorted, int64_cmp);
        int64_t twice = -1;
        for (int j = 1; j < p->nvalues && twice < 0; j++)
            if (sorted[j] == sorted[j - 1])
                twice = sorted[j];
        free(sorted);
        for (int j = 0, seen = 0; twice >= 0; j++)
            if (p->values[j] == twice && seen++)
                return ktune_fail_at(err, file, list->items[j]->line, list->items[j]->col,
                                     "value %lld is listed twice", (long long)twice);
    }
    const ktune_node *twin = ktune_map_get(n, "twin");
    if (twin && ktune_expect_identifier(file, twin, "a twin variant's name", err))
        return -1;
    ktune_space_resolve_ctx ctx = {s, v};
    const ktune_node *cost = ktune_map_get(n, "cost");
    if (cost) {
        if (ktune_expect(file, cost, KTUNE_NODE_SCALAR, "cost", err))
            return -1;
        v->cost = ktune_expr_parse(cost->value, ktune_space_resolve, &ctx, file, cost->line,
                                   cost->col + (cost->plain ? 0 : 1), err);
        if (!v->cost)
            return -1;
    }
    const ktune_node *cons = ktune_map_get(n, "constraints");
    if (!cons)
        return 0;
    if (ktune_expect(file, cons, KTUNE_NODE_SEQ, "constraints", err))
        return -1;
    v->constraints = calloc((size_t)cons->count + 1, sizeof *v->constraints);
    for (int i = 0; i < cons->count; i++) {
        const ktune_node *c = cons->items[i];
        if (ktune_expect(file, c, KTUNE_NODE_SCALAR, "a constraint", err))
            return -1;
        /* a plain one-line scalar's columns match the text; quoted ones are off by the quote */
        int col = c->col + (c->plain ? 0 : 1);
        ktune_expr *e =
            ktune_expr_parse(c->value, ktune_space_resolve, &ctx, file, c->line, col, err);
        if (!e)
            return -1;
        unsigned uses = ktune_expr_uses(e);
        v->constraints[v->nconstraints].expr = e;
        v->constraints[v->nconstraints].per_shape = (uses & ~(1u << KTUNE_REF_PARAM)) != 0;
        v->nconstraints++;
    }
    return 0;
}

/* Each variant's `twin`: another variant of the space, every parameter of which this one has. */
static int resolve_twins(const char *file, const ktune_node *variants, ktune_space *s,
                         ktune_err *err)
{
    for (int i = 0; i < s->nvariants; i++) {
        ktune_space_variant *v = &s->variants[i];
        const ktune_node *twin = ktune_map_get(variants->items[i], "twin");
        v->twin = -1;
        if (!twin)
            continue;
        for (int j = 0; j < s->nvariants && v->twin < 0; j++)
            if (j != i && strcmp(s->variants[j].name, twin->value) == 0)
                v->twin = j;
        if (v->twin < 0)
            return ktune_fail_at(err, file, twin->line, twin->col,
                                 "twin '%s' is not another variant of the space", twin->value);
        const ktune_space_variant *w = &s->variants[v->twin];
        for (int p = 0; p < w->nparams; p++)
            if (variant_param(v, w->params[p].name) < 0)
                return ktune_fail_at(err, file, twin->line, twin->col,
                                     "twin '%s' has parameter '%s', which variant '%s' has not",
                                     w->name, w->params[p].name, v->name);
    }
    return 0;
}

static int config_cmp(const void *a, const void *b)
{
    return strcmp(((const ktune_space_config *)a)->name, ((const ktune_space_config *)b)->name);
}

/* "<variant>_<param><value>...": 0, or -1 when it does not fit in size. */
static int config_name(const ktune_space_variant *v, const int64_t *params, char *out, size_t size)
{
    size_t n = 0;
    int w = snprintf(out, size, "%s", v->name);
    for (int p = 0; w >= 0 && (n += (size_t)w) < size && p < v->nparams; p++)
        w = snprintf(out + n, size - n, "_%s%lld", v->params[p].name, (long long)params[p]);
    return w >= 0 && n < size ? 0 : -1;
}

static int expand_configs(const char *file, const ktune_node *at, ktune_space *s, ktune_err *err)
{
    size_t cap = 64;
    s->configs = malloc(cap * sizeof *s->configs);
    for (int vi = 0; vi < s->nvariants; vi++) {
        const ktune_space_variant *v = &s->variants[vi];
        int idx[KTUNE_MAX_PARAMS] = {0}, counts[KTUNE_MAX_PARAMS];
        int kept = 0;
        for (int p = 0; p < v->nparams; p++)
            counts[p] = v->params[p].nvalues;
        if (ktune_space_combinations(counts, v->nparams) > KTUNE_MAX_COMBINATIONS)
            return ktune_fail_at(err, file, at->line, at->col,
                                 "variant '%s' combines more than %d parameter values",
                                 v->name, KTUNE_MAX_COMBINATIONS);
        for (;;) {
            ktune_space_config c = {.variant = vi};
            for (int p = 0; p < v->nparams; p++)
                c.params[p] = v->params[p].values[idx[p]];
            ktune_expr_env env = {c.params, NULL, NULL};
            int ok = 1;
            for (int k = 0; k < v->nconstraints && ok; k++)
                if (!v->constraints[k].per_shape)
                    ok = ktune_expr_eval(v->constraints[k].expr, &env) != 0;
            if (ok) {
                if (s->nconfigs == KTUNE_MAX_CONFIGS)
                    return ktune_fail_at(err, file, at->line, at->col,
                                         "the space expands to more than %d configs",
                                         KTUNE_MAX_CONFIGS);
                if (config_name(v, c.params, c.name, sizeof c.name))
                    return ktune_fail_at(err, file, at->line, at->col,
                                         "config names of variant '%s' are too long", v->name);
                if ((size_t)s->nconfigs == cap)
                    s->configs = realloc(s->configs, (cap *= 2) * sizeof *s->configs);
                s->configs[s->nconfigs++] = c;
                kept++;
            }
            int p = 0;
            while (p < v->nparams && ++idx[p] == v->params[p].nvalues)
                idx[p++] = 0;
            if (p == v->nparams)
                break;
        }
        if (kept == 0)
            return ktune_fail_at(err, file, at->line, at->col,
                                 "variant '%s': no parameter combination meets its constraints",
                                 v->name);
    }
    qsort(s->configs, (size_t)s->nconfigs, sizeof *s->configs, config_cmp);
    return 0;
}

/* Each config's twin: its twin variant's config of the same values of the parameters the two
 * share (-1 where the variant has no twin, or that config is not in the space). */
static void config_twins(ktune_space *s)
{
    for (int c = 0; c < s->nconfigs; c++) {
        ktune_space_config *cf = &s->configs[c];
        const ktune_space_variant *v = &s->variants[cf->variant];
        cf->twin = -1;
        if (v->twin < 0)
            continue;
        const ktune_space_variant *w = &s->variants[v->twin];
        int64_t values[KTUNE_MAX_PARAMS];
        for (int p = 0; p < w->nparams; p++) /* each is one of v's (resolve_twins) */
            values[p] = cf->params[variant_param(v, w->params[p].name)];
        char name[KTUNE_CONFIG_NAME_MAX];
        if (config_name(w, values, name, sizeof name) == 0)
            cf->twin = ktune_space_find_config(s, name);
    }
}

int ktune_space_find_config(const ktune_space *s, const char *name)
{
    ktune_space_config probe;
    snprintf(probe.name, sizeof probe.name, "%s", name);
    const ktune_space_config *c =
        bsearch(&probe, s->configs, (size_t)s->nconfigs, sizeof *s->configs, config_cmp);
    return c ? (int)(c - s->configs) : -1;
}

static int load_defaults(const char *file, const ktune_node *n, ktune_space *s, ktune_err *err)
{
    if (ktune_expect_list(file, n, "defaults", err))
        return -1;
    s->defaults = calloc((size_t)n->count, sizeof *s->defaults);
    for (int i = 0; i < n->count; i++) {
        const ktune_node *d = n->items[i];
        if (ktune_expect(file, d, KTUNE_NODE_MAP, "a default", err))
            return -1;
        const ktune_node *vn = ktune_map_get(d, "variant");
        if (!vn)
            return ktune_fail_at(err, file, d->line, d->col, "missing key 'variant'");
        if (ktune_expect(file, vn, KTUNE_NODE_SCALAR, "variant", err))
            return -1;
        int vi = -1;
        for (int k = 0; k < s->nvariants; k++)
            if (strcmp(s->variants[k].name, vn->value) == 0)
                vi = k;
        if (vi < 0)
            return ktune_fail_at(err, file, vn->line, vn->col, "unknown variant '%s'", vn->value);
        const ktune_space_variant *v = &s->variants[vi];
        const char *allowed[KTUNE_MAX_PARAMS + 2] = {"variant"};
        for (int p = 0; p < v->nparams; p++)
            allowed[p + 1] = v->params[p].name;
        if (ktune_expect_keys(file, d, allowed, allowed, err))
            return -1;
        char name[KTUNE_CONFIG_NAME_MAX];
        int64_t values[KTUNE_MAX_PARAMS];
        for (int p = 0; p < v->nparams; p++)
            if (ktune_expect_int(file, ktune_map_get(d, v->params[p].name), "a parameter value",
                                 0, KTUNE_PARAM_MAX, &values[p], err))
                return -1;
        int ci = config_name(v, values, name, sizeof name) ? -1
                                                           : ktune_space_find_config(s, name);
        if (ci < 0)
            return ktune_fail_at(err, file, d->line, d->col,
                                 "default %.*s is not in the space (a value not listed, or a "
                                 "constraint excludes it)",
                                 KTUNE_CONFIG_NAME_MAX, name);
        for (int k = 0; k < s->ndefaults; k++)
            if (s->defaults[k] == ci)
                return ktune_fail_at(err, file, d->line, d->col, "default %s is listed twice",
                                     name);
        s->defaults[s->ndefaults++] = ci;
    }
    return 0;
}

int ktune_space_key_compare(const ktune_space *s, const int64_t *a, const int64_t *b)
{
    for (int d = 0; d < s->nkey; d++)
        if (a[d] != b[d])
            return a[d] < b[d] ? -1 : 1;
    return 0;
}

int ktune_space_load(const char *path, ktune_space *s, ktune_err *err)
{
    return ktune_space_load_with(path, NULL, s, err);
}

int ktune_space_load_with(const char *path, const ktune_space_opts *o, ktune_space *s,
                          ktune_err *err)
{
    static const char *const allowed[] = {"family", "doc", "key", "instantiate", "variants",
                                          "defaults", "shapes", NULL};
    static const char *const required[] = {"family", "key", "variants", "defaults", "shapes",
                                           NULL};
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    ktune_node *root = ktune_yaml_load(path, err);
    int rc = -1;
    if (!root)
        return -1;
    if (ktune_expect(path, root, KTUNE_NODE_MAP, "a space file", err) ||
        ktune_expect_keys(path, root, allowed, required, err))
        goto cleanup;
    const ktune_node *family = ktune_map_get(root, "family");
    if (ktune_expect_identifier(path, family, "family", err))
        goto cleanup;
    snprintf(s->family, sizeof s->family, "%s", family->value);
    const ktune_node *doc = ktune_map_get(root, "doc");
    if (doc && ktune_expect(path, doc, KTUNE_NODE_SCALAR, "doc", err))
        goto cleanup;
    if (load_key(path, ktune_map_get(root, "key"), s, err))
        goto cleanup;
    const ktune_node *instantiate = ktune_map_get(root, "instantiate");
    if (instantiate && load_instantiate(path, instantiate, s, err))
        goto cleanup;
    const ktune_node *variants = ktune_map_get(root, "variants");
    if (ktune_expect(path, variants, KTUNE_NODE_MAP, "variants", err))
        goto cleanup;
    if (variants->count == 0) {
        ktune_fail_at(err, path, variants->line, variants->col, "variants must not be empty");
        goto cleanup;
    }
    s->variants = calloc((size_t)variants->count, sizeof *s->variants);
    for (int i = 0; i < variants->count; i++) {
        s->nvariants++;
        if (load_variant(path, variants->keys[i], variants->items[i], s, &s->variants[i], err))
            goto cleanup;
    }
    if (resolve_twins(path, variants, s, err) || expand_configs(path, variants, s, err))
        goto cleanup;
    config_twins(s);
    if (load_defaults(path, ktune_map_get(root, "defaults"), s, err) ||
        ktune_shapes_load(path, ktune_map_get(root, "shapes"), s, o, err))
        goto cleanup;
    rc = 0;
cleanup:
    ktune_node_free(root);
    if (rc)
        ktune_space_free(s);
    return rc;
}

void ktune_space_free(ktune_space *s)
{
    for (int i = 0; i < s->nvariants; i++) {
        for (int p = 0; p < s->variants[i].nparams; p++)
            free(s->variants[i].params[p].values);
        for (int c = 0; c < s->variants[i].nconstraints; c++)
            ktune_expr_free(s->variants[i].constraints[c].expr);
        free(s->variants[i].constraints);
        ktune_expr_free(s->variants[i].cost);
    }
    free(s->variants);
    free(s->configs);
    free(s->defaults);
    free(s->shapes);
    memset(s, 0, sizeof *s);
}

int ktune_space_valid(const ktune_space *s, const ktune_space_config *c, const int64_t *key,
                      const int64_t *limits)
{
    const ktune_space_variant *v = &s->variants[c->variant];
    ktune_expr_env env = {c->params, key, limits};
    for (int k = 0; k < v->nconstraints; k++)
        if (v->constraints[k].per_shape && !ktune_expr_eval(v->constraints[k].expr, &env))
            return 0;
    return 1;
}

int ktune_space_default_for(const ktune_space *s, const int64_t *key, const int64_t *limits)
{
    for (int i = 0; i < s->ndefaults; i++)
        if (ktune_space_valid(s, &s->configs[s->defaults[i]], key, limits))
            return s->defaults[i];
    return -1;
}

void ktune_space_key_format(const ktune_space *s, const int64_t *key, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < s->nkey && used < size; d++) {
        int n = s->key[d].kind == KTUNE_DIM_DTYPE
                    ? snprintf(buf + used, size - used, "%s%s=%s", d ? " " : "", s->key[d].name,
                               ktune_dtype_name(key[d]))
                    : snprintf(buf + used, size - used, "%s%s=%lld", d ? " " : "", s->key[d].name,
                               (long long)key[d]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

int ktune_space_key_parse(const ktune_space *s, const char *text, int64_t *key, ktune_err *err)
{
    int seen[KTUNE_MAX_KEY] = {0};
    memset(key, 0, sizeof(int64_t) * KTUNE_MAX_KEY);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    for (char *tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return ktune_fail(err, "key '%s': expected name=value, got '%s'", text, tok);
        *eq = '\0';
        int d = 0;
        while (d < s->nkey && strcmp(s->key[d].name, tok) != 0)
            d++;
        if (d == s->nkey)
            return ktune_fail(err, "key '%s': '%s' is not a key dimension of %s", text, tok,
                              s->family);
        int ok = s->key[d].kind == KTUNE_DIM_DTYPE ? ktune_dtype_parse(eq + 1, &key[d])
                                                    : ktune_parse_int(eq + 1, &key[d]) &&
                                                          key[d] >= 1 && key[d] <= KTUNE_DIM_MAX;
        if (!ok)
            return ktune_fail(err, "key '%s': bad value '%s' for %s", text, eq + 1, tok);
        seen[d] = 1;
    }
    for (int d = 0; d < s->nkey; d++)
        if (!seen[d])
            return ktune_fail(err, "key '%s': %s is missing", text, s->key[d].name);
    return 0;
}
