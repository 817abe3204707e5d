/* A space's shapes: lists, grids with a where filter, shapes derived from model presets, and the
 * command line's --model, --tp-size and --where. */
#define _POSIX_C_SOURCE 200809L
#include "shapes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"
#include "models.h"
#include "random_models.h"

static const ktune_space *sort_space; /* qsort has no context argument in C11 */

static int shape_cmp(const void *a, const void *b)
{
    return ktune_space_key_compare(sort_space, ((const ktune_space_shape *)a)->key,
                                   ((const ktune_space_shape *)b)->key);
}

typedef struct {
    ktune_space_shape *items;
    size_t count, cap;
} shape_list;

static int shape_add(shape_list *l, const int64_t *key, const char *file, const ktune_node *at,
                     ktune_err *err)
{
    if (l->count == KTUNE_MAX_SHAPES)
        return at ? ktune_fail_at(err, file, at->line, at->col, "more than %d shapes",
                                  KTUNE_MAX_SHAPES)
                  : ktune_fail(err, "more than %d shapes", KTUNE_MAX_SHAPES);
    if (l->count == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->items = realloc(l->items, l->cap * sizeof *l->items);
    }
    memset(&l->items[l->count], 0, sizeof l->items[l->count]);
    memcpy(l->items[l->count].key, key, sizeof(int64_t) * KTUNE_MAX_KEY);
    l->count++;
    return 0;
}

/* The values one dimension of a grid takes: a list, or {from, to, times | step}. */
static int dim_values(const char *file, const ktune_node *n, const ktune_space_dim *dim,
                      int64_t **out, int *count, ktune_err *err)
{
    if (dim->kind == KTUNE_DIM_DTYPE || n->kind == KTUNE_NODE_SEQ) {
        if (ktune_expect_list(file, n, dim->name, err))
            return -1;
        *out = calloc((size_t)n->count, sizeof **out);
        *count = n->count;
        for (int i = 0; i < n->count; i++) {
            const ktune_node *it = n->items[i];
            if (dim->kind == KTUNE_DIM_DTYPE) {
                if (ktune_expect(file, it, KTUNE_NODE_SCALAR, "a dtype", err))
                    return -1;
                if (!ktune_dtype_parse(it->value, &(*out)[i]))
                    return ktune_fail_at(err, file, it->line, it->col,
                                         "unknown dtype '%s' (expected one of %.*s)", it->value,
                                         (int)strlen(ktune__dtype_names()) - 2,
                                         ktune__dtype_names());
            } else if (ktune_expect_int(file, it, dim->name, 1, KTUNE_DIM_MAX, &(*out)[i], err)) {
                return -1;
            }
        }
        return 0;
    }
    static const char *const allowed[] = {"from", "to", "times", "step", NULL};
    static const char *const required[] = {"from", "to", NULL};
    if (ktune_expect(file, n, KTUNE_NODE_MAP, dim->name, err) ||
        ktune_expect_keys(file, n, allowed, required, err))
        return -1;
    int64_t from, to, times = 0, step = 0;
    const ktune_node *tn = ktune_map_get(n, "times"), *sn = ktune_map_get(n, "step");
    if (ktune_expect_int(file, ktune_map_get(n, "from"), "from", 1, KTUNE_DIM_MAX, &from, err) ||
        ktune_expect_int(file, ktune_map_get(n, "to"), "to", from, KTUNE_DIM_MAX, &to, err) ||
        (tn && ktune_expect_int(file, tn, "times", 2, 1024, &times, err)) ||
        (sn && ktune_expect_int(file, sn, "step", 1, KTUNE_DIM_MAX, &step, err)))
        return -1;
    if (!tn == !sn)
        return ktune_fail_at(err, file, n->line, n->col, "give exactly one of 'times' and 'step'");
    int cap = 0;
    *out = NULL;
    *count = 0;
    for (int64_t v = from; v <= to; v = times ? v * times : v + step) {
        if (*count == 100000)
            return ktune_fail_at(err, file, n->line, n->col, "more than 100000 values");
        if (*count == cap)
            *out = realloc(*out, (size_t)(cap = cap ? cap * 2 : 16) * sizeof **out);
        (*out)[(*count)++] = v;
    }
    return 0;
}

static int load_grid(const char *file, const ktune_node *entry, ktune_space *s, shape_list *l,
                     ktune_err *err)
{
    const ktune_node *grid = ktune_map_get(entry, "grid");
    if (ktune_expect(file, grid, KTUNE_NODE_MAP, "grid", err))
        return -1;
    const char *names[KTUNE_MAX_KEY + 1] = {NULL};
    for (int d = 0; d < s->nkey; d++)
        names[d] = s->key[d].name;
    if (ktune_expect_keys(file, grid, names, names, err))
        return -1;
    ktune_expr *where = NULL;
    const ktune_node *wn = ktune_map_get(entry, "where");
    if (wn) {
        if (ktune_expect(file, wn, KTUNE_NODE_SCALAR, "where", err))
            return -1;
        ktune_space_resolve_ctx ctx = {s, NULL};
        where = ktune_expr_parse(wn->value, ktune_space_resolve, &ctx, file, wn->line,
                                 wn->col + (wn->plain ? 0 : 1), err);
        if (!where)
            return -1;
    }
    int64_t *values[KTUNE_MAX_KEY] = {NULL};
    int counts[KTUNE_MAX_KEY] = {0}, idx[KTUNE_MAX_KEY] = {0}, rc = 0;
    for (int d = 0; d < s->nkey && rc == 0; d++)
        rc = dim_values(file, ktune_map_get(grid, s->key[d].name), &s->key[d], &values[d],
                        &counts[d], err);
    if (rc == 0 && ktune_space_combinations(counts, s->nkey) > KTUNE_MAX_COMBINATIONS)
        rc = ktune_fail_at(err, file, grid->line, grid->col,
                           "the grid has more than %d points", KTUNE_MAX_COMBINATIONS);
    while (rc == 0) {
        int64_t key[KTUNE_MAX_KEY] = {0};
        for (int d = 0; d < s->nkey; d++)
            key[d] = values[d][idx[d]];
        ktune_expr_env env = {NULL, key, NULL};
        if (!where || ktune_expr_eval(where, &env))
            rc = shape_add(l, key, file, grid, err);
        int d = 0;
        while (d < s->nkey && ++idx[d] == counts[d])
            idx[d++] = 0;
        if (d == s->nkey)
            break;
    }
    for (int d = 0; d < s->nkey; d++)
        free(values[d]);
    ktune_expr_free(where);
    return rc;
}

static int load_list(const char *file, const ktune_node *entry, ktune_space *s, shape_list *l,
                     ktune_err *err)
{
    const ktune_node *list = ktune_map_get(entry, "list");
    if (ktune_expect_list(file, list, "list", err))
        return -1;
    const char *names[KTUNE_MAX_KEY + 1] = {NULL};
    for (int d = 0; d < s->nkey; d++)
        names[d] = s->key[d].name;
    for (int i = 0; i < list->count; i++) {
        const ktune_node *m = list->items[i];
        if (ktune_expect(file, m, KTUNE_NODE_MAP, "a shape", err) ||
            ktune_expect_keys(file, m, names, names, err))
            return -1;
        int64_t key[KTUNE_MAX_KEY] = {0};
        for (int d = 0; d < s->nkey; d++) {
            const ktune_node *v = ktune_map_get(m, s->key[d].name);
            if (s->key[d].kind == KTUNE_DIM_DTYPE) {
                if (ktune_expect(file, v, KTUNE_NODE_SCALAR, "a dtype", err))
                    return -1;
                if (!ktune_dtype_parse(v->value, &key[d]))
                    return ktune_fail_at(err, file, v->line, v->col,
                                         "unknown dtype '%s' (expected one of %.*s)", v->value,
                                         (int)strlen(ktune__dtype_names()) - 2,
                                         ktune__dtype_names());
            } else if (ktune_expect_int(file, v, s->key[d].name, 1, KTUNE_DIM_MAX, &key[d], err)) {
                return -1;
            }
        }
        if (shape_add(l, key, file, m, err))
            return -1;
    }
    return 0;
}

/* Names a derived key dimension may use: the grid's batch and seq, the layer's local out and in,
 * the degrees tp and ep, then any dimension of the model presets (hidden, experts, top_k, ...),
 * each found in the model when the shapes are derived. */
enum { DERIVE_BATCH, DERIVE_OUT, DERIVE_IN, DERIVE_TP, DERIVE_SEQ, DERIVE_EP, DERIVE_FIXED };

typedef struct {
    char names[KTUNE_MODEL_MAX_DIMS][41]; /* the model dimensions named, index DERIVE_FIXED + i */
    int n;
} derive_names;

static int resolve_layer(void *ctx, const char *name, ktune_ref_kind *kind, int *index)
{
    static const char *const fixed[DERIVE_FIXED] = {"batch", "out", "in", "tp", "seq", "ep"};
    derive_names *d = ctx;
    *kind = KTUNE_REF_PARAM;
    for (int i = 0; i < DERIVE_FIXED; i++)
        if (strcmp(fixed[i], name) == 0) {
            *index = i;
            return 0;
        }
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->names[i], name) == 0) {
            *index = DERIVE_FIXED + i;
            return 0;
        }
    if (d->n == KTUNE_MODEL_MAX_DIMS || strlen(name) >= sizeof d->names[0])
        return -1;
    snprintf(d->names[d->n], sizeof d->names[0], "%s", name);
    *index = DERIVE_FIXED + d->n++;
    return 0;
}

/* The directory of model presets: models/ beside the space file. */
static void models_dir(const ktune_space *s, char *out, size_t size)
{
    const char *slash = strrchr(s->path, '/');
    if (slash)
        snprintf(out, size, "%.*s/models", (int)(slash - s->path), s->path);
    else
        snprintf(out, size, "models");
}

/* The degrees of parallelism of a models entry (tp or ep): the command line's degree where it
 * gives one (cli > 0), else the entry's value or list, else 1. */
static int degrees_load(const char *file, const ktune_node *n, const char *what, int64_t cli,
                        int64_t *out, int *count, ktune_err *err)
{
    *count = 1;
    out[0] = 1;
    if (cli > 0) {
        out[0] = cli;
        return 0;
    }
    if (!n)
        return 0;
    if (n->kind != KTUNE_NODE_SEQ)
        return ktune_expect_int(file, n, what, 1, 1024, &out[0], err);
    if (ktune_expect_list(file, n, what, err))
        return -1;
    if (n->count > 64)
        return ktune_fail_at(err, file, n->line, n->col, "more than 64 %s degrees", what);
    for (*count = 0; *count < n->count; (*count)++)
        if (ktune_expect_int(file, n->items[*count], what, 1, 1024, &out[*count], err))
            return -1;
    return 0;
}

/* The model dimension called name, or -1 when the model has none. */
static int64_t model_dim(const ktune_model *m, const char *name)
{
    for (int i = 0; i < m->ndims; i++)
        if (strcmp(m->dim_names[i], name) == 0)
            return m->dims[i];
    return -1;
}

/* Shapes from model presets: for every model, tp and ep degree, linear layer (those of `layers`
 * where given) and grid point (batch, and seq where the grid has it), the key dimensions of
 * `derive` evaluated over those, the layer's local out and in and the model's dimensions. */
static int load_models(const char *file, const ktune_node *entry, ktune_space *s,
                       const ktune_space_opts *o, shape_list *l, ktune_err *err)
{
    static const char *const allowed[] = {"models", "tp", "ep", "layers", "grid",
                                          "derive", "where", NULL};
    static const char *const required[] = {"models", "grid", "derive", NULL};
    if (ktune_expect_keys(file, entry, allowed, required, err))
        return -1;
    const ktune_node *models = ktune_map_get(entry, "models"), *tpn = ktune_map_get(entry, "tp");
    const ktune_node *epn = ktune_map_get(entry, "ep"), *layers = ktune_map_get(entry, "layers");
    const ktune_node *grid = ktune_map_get(entry, "grid"), *derive = ktune_map_get(entry, "derive");
    if (ktune_expect_list(file, models, "models", err) ||
        ktune_expect(file, grid, KTUNE_NODE_MAP, "grid", err) ||
        ktune_expect(file, derive, KTUNE_NODE_MAP, "derive", err) ||
        (layers && ktune_expect_list(file, layers, "layers", err)))
        return -1;
    if (models->count > 64)
        return ktune_fail_at(err, file, models->line, models->col, "more than 64 models");
    for (int i = 0; i < models->count; i++)
        if (ktune_expect(file, models->items[i], KTUNE_NODE_SCALAR, "a model's name", err))
            return -1;
    if (layers && layers->count > KTUNE_MODEL_MAX_LAYERS)
        return ktune_fail_at(err, file, layers->line, layers->col, "more than %d layers",
                             KTUNE_MODEL_MAX_LAYERS);
    for (int i = 0; layers && i < layers->count; i++)
        if (ktune_expect(file, layers->items[i], KTUNE_NODE_SCALAR, "a layer's name", err))
            return -1;
    /* tp, ep: one degree or a list; --tp-size, --ep-size replace them */
    int64_t tps[64], eps[64];
    int ntp, nep;
    if (degrees_load(file, tpn, "tp", o ? o->tp : 0, tps, &ntp, err) ||
        degrees_load(file, epn, "ep", o ? o->ep : 0, eps, &nep, err))
        return -1;
    /* every key dimension comes from the grid or from derive, not both; the grid has the batch,
     * and may have a seq */
    ktune_space_dim dims[KTUNE_MAX_KEY + 2];
    int ndims = 0, from_grid[KTUNE_MAX_KEY];
    ktune_expr *exprs[KTUNE_MAX_KEY] = {NULL}, *where = NULL;
    int64_t *values[KTUNE_MAX_KEY + 2] = {NULL};
    int counts[KTUNE_MAX_KEY + 2] = {0}, idx[KTUNE_MAX_KEY + 2] = {0}, rc = -1;
    const char *grid_keys[KTUNE_MAX_KEY + 3] = {"batch"}, *derive_keys[KTUNE_MAX_KEY + 1] = {NULL};
    const char *grid_required[] = {"batch", NULL};
    const ktune_node *seqn = ktune_map_get(grid, "seq");
    int ng = 1, nd = 0;
    if (seqn)
        grid_keys[ng++] = "seq";
    for (int d = 0; d < s->nkey; d++) {
        from_grid[d] = ktune_map_get(grid, s->key[d].name) != NULL;
        if (from_grid[d])
            grid_keys[ng++] = s->key[d].name;
        else
            derive_keys[nd++] = s->key[d].name;
    }
    if (ktune_expect_keys(file, grid, grid_keys, grid_required, err) ||
        ktune_expect_keys(file, derive, derive_keys, derive_keys, err))
        return -1;
    if (o && o->nseqs > 0 && !seqn)
        return ktune_fail_at(err, file, grid->line, grid->col,
                             "--seq-lengths: these shapes take no sequence length (their grid "
                             "has no 'seq')");
    derive_names names = {.n = 0};
    for (int d = 0; d < s->nkey; d++) {
        const ktune_node *e = ktune_map_get(derive, s->key[d].name);
        if (from_grid[d]) {
            dims[ndims++] = s->key[d];
            continue;
        }
        if (s->key[d].kind != KTUNE_DIM_INT) {
            ktune_fail_at(err, file, e->line, e->col, "%s is a dtype; give it in the grid",
                          s->key[d].name);
            goto cleanup;
        }
        if (ktune_expect(file, e, KTUNE_NODE_SCALAR, s->key[d].name, err) ||
            !(exprs[d] = ktune_expr_parse(e->value, resolve_layer, &names, file, e->line,
                                          e->col + (e->plain ? 0 : 1), err)))
            goto cleanup;
    }
    const int ibatch = ndims, iseq = seqn ? ndims + 1 : -1;
    snprintf(dims[ndims].name, sizeof dims[ndims].name, "batch");
    dims[ndims++].kind = KTUNE_DIM_INT;
    if (seqn) {
        snprintf(dims[ndims].name, sizeof dims[ndims].name, "seq");
        dims[ndims++].kind = KTUNE_DIM_INT;
    }
    const ktune_node *wn = ktune_map_get(entry, "where");
    if (wn) {
        ktune_space_resolve_ctx ctx = {s, NULL};
        if (ktune_expect(file, wn, KTUNE_NODE_SCALAR, "where", err) ||
            !(where = ktune_expr_parse(wn->value, ktune_space_resolve, &ctx, file, wn->line,
                                       wn->col + (wn->plain ? 0 : 1), err)))
            goto cleanup;
    }
    for (int i = 0; i < ndims; i++) {
        if (i == ibatch && o && o->nbatches > 0) { /* --batch-sizes */
            values[i] = malloc((size_t)o->nbatches * sizeof *values[i]);
            memcpy(values[i], o->batches, (size_t)o->nbatches * sizeof *values[i]);
            counts[i] = o->nbatches;
        } else if (i == iseq && o && o->nseqs > 0) { /* --seq-lengths, and decode's 1 */
            values[i] = malloc((size_t)(o->nseqs + 1) * sizeof *values[i]);
            values[i][0] = 1;
            memcpy(values[i] + 1, o->seqs, (size_t)o->nseqs * sizeof *values[i]);
            counts[i] = o->nseqs + 1;
        } else if (dim_values(file, ktune_map_get(grid, dims[i].name), &dims[i], &values[i],
                              &counts[i], err)) {
            goto cleanup;
        }
    }
    char dir[1100];
    models_dir(s, dir, sizeof dir);
    const int nmodels = o && o->model ? 1 : models->count;
    /* models x degrees x layers (at most KTUNE_MODEL_MAX_LAYERS each) x grid points */
    int bound[KTUNE_MAX_KEY + 6] = {nmodels, ntp, nep, KTUNE_MODEL_MAX_LAYERS};
    for (int i = 0; i < ndims; i++)
        bound[4 + i] = counts[i];
    if (ktune_space_combinations(bound, 4 + ndims) > KTUNE_MAX_COMBINATIONS) {
        ktune_fail_at(err, file, grid->line, grid->col,
                      "models x tp and ep degrees x %d layers x grid points is more than %d",
                      KTUNE_MODEL_MAX_LAYERS, KTUNE_MAX_COMBINATIONS);
        goto cleanup;
    }
    for (int mi = 0; mi < nmodels; mi++) {
        const char *name = o && o->model ? o->model : models->items[mi]->value;
        ktune_model model;
        ktune_err inner;
        if (ktune_model_load(dir, name, &model, &inner)) {
            if (o && o->model)
                ktune_fail(err, "--model %s", inner.msg);
            else if (strncmp(inner.msg, name, strlen(name)) == 0)
                ktune_fail_at(err, file, models->items[mi]->line, models->items[mi]->col, "%s",
                              inner.msg);
            else
                *err = inner;
            goto cleanup;
        }
        /* the model's dimensions derive names */
        int64_t layer[DERIVE_FIXED + KTUNE_MODEL_MAX_DIMS] = {0};
        for (int i = 0; i < names.n; i++)
            if ((layer[DERIVE_FIXED + i] = model_dim(&model, names.names[i])) < 0) {
                ktune_fail_at(err, file, derive->line, derive->col,
                              "derive names '%s', which model %s does not give (%s)",
                              names.names[i], model.name, model.path);
                goto cleanup;
            }
        /* the layers asked for, each once */
        int use[KTUNE_MODEL_MAX_LAYERS];
        for (int li = 0; li < model.nlayers; li++)
            use[li] = !layers;
        for (int i = 0; layers && i < layers->count; i++) {
            int found = -1;
            for (int li = 0; li < model.nlayers && found < 0; li++)
                if (strcmp(model.layers[li].name, layers->items[i]->value) == 0)
                    found = li;
            if (found < 0) {
                ktune_fail_at(err, file, layers->items[i]->line, layers->items[i]->col,
                              "model %s has no layer '%s' (%s)", model.name,
                              layers->items[i]->value, model.path);
                goto cleanup;
            }
            use[found] = 1;
        }
        /* expert parallelism: ep divides the experts */
        const int64_t experts = model_dim(&model, "experts");
        for (int ei = 0; ei < nep; ei++)
            if (eps[ei] > 1 && (experts < 1 || experts % eps[ei] != 0)) {
                if (o && o->ep > 0 && experts < 1)
                    ktune_fail(err, "--ep-size %lld: model %s has no experts", (long long)o->ep,
                               model.name);
                else if (o && o->ep > 0)
                    ktune_fail(err, "--ep-size %lld: model %s has %lld experts", (long long)o->ep,
                               model.name, (long long)experts);
                else
                    ktune_fail_at(err, file, (epn ? epn : entry)->line, (epn ? epn : entry)->col,
                                  "ep %lld does not divide the %lld experts of model %s",
                                  (long long)eps[ei], (long long)(experts < 1 ? 0 : experts),
                                  model.name);
                goto cleanup;
            }
        for (int ti = 0; ti < ntp; ti++)
            for (int ei = 0; ei < nep; ei++)
                for (int li = 0; li < model.nlayers; li++) {
                    if (!use[li])
                        continue;
                    layer[DERIVE_TP] = tps[ti];
                    layer[DERIVE_EP] = eps[ei];
                    if (ktune_model_local(&model, li, tps[ti], &layer[DERIVE_OUT],
                                          &layer[DERIVE_IN], &inner)) {
                        if (o && o->tp > 0)
                            ktune_fail(err, "--tp-size %lld: %s", (long long)o->tp, inner.msg);
                        else
                            ktune_fail_at(err, file, (tpn ? tpn : entry)->line,
                                          (tpn ? tpn : entry)->col, "%s", inner.msg);
                        goto cleanup;
                    }
                    memset(idx, 0, sizeof idx);
                    for (;;) {
                        int64_t key[KTUNE_MAX_KEY] = {0};
                        for (int i = 0, gd = 0; i < s->nkey; i++)
                            if (from_grid[i])
                                key[i] = values[gd][idx[gd]], gd++;
                        layer[DERIVE_BATCH] = values[ibatch][idx[ibatch]];
                        layer[DERIVE_SEQ] = iseq >= 0 ? values[iseq][idx[iseq]] : 1;
                        ktune_expr_env env = {layer, NULL, NULL};
                        int ok = 1;
                        for (int i = 0; i < s->nkey; i++)
                            if (!from_grid[i]) {
                                key[i] = ktune_expr_eval(exprs[i], &env);
                                ok = ok && key[i] >= 1 && key[i] <= KTUNE_DIM_MAX;
                            }
                        ktune_expr_env kenv = {NULL, key, NULL};
                        if (ok && (!where || ktune_expr_eval(where, &kenv)) &&
                            shape_add(l, key, file, entry, err))
                            goto cleanup;
                        int d = 0;
                        while (d < ndims && ++idx[d] == counts[d])
                            idx[d++] = 0;
                        if (d == ndims)
                            break;
                    }
                }
    }
    rc = 0;
cleanup:
    for (int i = 0; i < KTUNE_MAX_KEY; i++)
        ktune_expr_free(exprs[i]);
    for (int i = 0; i < KTUNE_MAX_KEY + 2; i++)
        free(values[i]);
    ktune_expr_free(where);
    return rc;
}

/* The command line's linear layers (linear.h) as shapes of s. */
static int load_linear(const ktune_linear_shapes *lin, const int64_t *dtypes, int ndtypes,
                       ktune_space *s, shape_list *l, ktune_err *err)
{
    int dim[3] = {-1, -1, -1}, dtype_dim = -1;
    static const char *const names[3] = {"m", "n", "k"};
    for (int d = 0; d < s->nkey; d++) {
        for (int j = 0; j < 3; j++)
            if (strcmp(s->key[d].name, names[j]) == 0)
                dim[j] = d;
        if (s->key[d].kind == KTUNE_DIM_DTYPE)
            dtype_dim = d;
        else if (strcmp(s->key[d].name, "m") && strcmp(s->key[d].name, "n") &&
                 strcmp(s->key[d].name, "k"))
            return ktune_fail(err, "--out-in-features: %s's key has a dimension %s beside m, n "
                                   "and k; give its shapes in the space",
                              s->family, s->key[d].name);
    }
    if (dim[0] < 0 || dim[1] < 0 || dim[2] < 0)
        return ktune_fail(err, "--out-in-features: %s's key has no dimensions m, n and k",
                          s->family);
    for (int t = 0; t < (dtype_dim >= 0 ? ndtypes : 1); t++)
        for (int i = 0; i < lin->nbatch * lin->nfeatures; i++) {
            int64_t key[KTUNE_MAX_KEY] = {0};
            ktune_linear_shape(lin, i, &key[dim[0]], &key[dim[1]], &key[dim[2]]);
            if (dtype_dim >= 0)
                key[dtype_dim] = dtypes[t];
            if (shape_add(l, key, NULL, NULL, err))
                return -1;
        }
    return 0;
}

/* The command line's attention layer (attention.h) as shapes of s: one for each dtype and q_len
 * (at most max_len) of own, the space's own shapes. */
static int load_attention(const ktune_attention_shapes *a, const ktune_space *own,
                          ktune_space *s, shape_list *l, ktune_err *err)
{
    static const char *const names[] = {"q_len",    "page_size", "head_dim",
                                        "q_heads",  "kv_heads",  "max_len"};
    enum { NAMES = sizeof names / sizeof names[0] };
    const int64_t values[NAMES] = {0, a->page_size, a->head_dim, a->q_heads, a->kv_heads,
                                   a->max_len};
    int dim[NAMES], dtype_dim = -1;
    for (int j = 0; j < NAMES; j++)
        dim[j] = -1;
    for (int d = 0; d < s->nkey; d++) {
        int known = s->key[d].kind == KTUNE_DIM_DTYPE;
        if (known)
            dtype_dim = d;
        for (int j = 0; j < NAMES; j++)
            if (strcmp(s->key[d].name, names[j]) == 0)
                dim[j] = d, known = 1;
        if (!known)
            return ktune_fail(err, "--page-size: %s's key has a dimension %s beside an "
                                   "attention layer's; give its shapes in the space",
                              s->family, s->key[d].name);
    }
    for (int j = 0; j < NAMES; j++)
        if (dim[j] < 0)
            return ktune_fail(err, "--page-size: %s's key has no dimension %s", s->family,
                              names[j]);
    int64_t dtypes[KTUNE_DTYPE_COUNT];
    const int ndtypes = ktune_shapes_dtypes(own, dtypes);
    int count = 0;
    for (int i = 0; i < own->nshapes; i++) {
        const int64_t q_len = own->shapes[i].key[dim[0]];
        int seen = q_len > a->max_len;
        for (int j = 0; j < i && !seen; j++)
            seen = own->shapes[j].key[dim[0]] == q_len;
        for (int t = 0; t < (dtype_dim >= 0 ? ndtypes : 1) && !seen; t++) {
            int64_t key[KTUNE_MAX_KEY] = {0};
            for (int j = 0; j < NAMES; j++)
                key[dim[j]] = j == 0 ? q_len : values[j];
            if (dtype_dim >= 0)
                key[dtype_dim] = dtypes[t];
            if (shape_add(l, key, NULL, NULL, err))
                return -1;
            count++;
        }
    }
    if (count == 0)
        return ktune_fail(err, "--max-model-len %lld: no q_len of %s's shapes is at most that",
                          (long long)a->max_len, s->family);
    return 0;
}

/* The command line's dense attention (attention.h) as shapes of s: each sequence length with each
 * combination of the other dimensions of own, the space's own shapes. */
static int load_dense_attention(const ktune_dense_attention *a, const ktune_space *own,
                                ktune_space *s, shape_list *l, ktune_err *err)
{
    static const char *const names[] = {"batch", "heads", "seq_len", "head_dim"};
    enum { NAMES = sizeof names / sizeof names[0] };
    int dim[NAMES] = {-1, -1, -1, -1};
    for (int d = 0; d < s->nkey; d++)
        for (int j = 0; j < NAMES; j++)
            if (strcmp(s->key[d].name, names[j]) == 0)
                dim[j] = d;
    for (int j = 0; j < NAMES; j++)
        if (dim[j] < 0)
            return ktune_fail(err, "--seq-len: %s's key has no dimension %s", s->family,
                              names[j]);
    if (own->nshapes == 0)
        return ktune_fail(err, "--seq-len: %s's space has no shapes to take the other "
                               "dimensions of its key from", s->family);
    const size_t first = l->count;
    for (int i = 0; i < a->nseq; i++)
        for (int o = 0; o < own->nshapes; o++) {
            int64_t key[KTUNE_MAX_KEY];
            memcpy(key, own->shapes[o].key, sizeof key);
            key[dim[0]] = a->batch;
            key[dim[1]] = a->heads;
            key[dim[2]] = a->seq_len[i];
            key[dim[3]] = a->head_dim;
            int seen = 0;
            for (size_t j = first; j < l->count && !seen; j++)
                seen = memcmp(l->items[j].key, key, sizeof key) == 0;
            if (!seen && shape_add(l, key, NULL, NULL, err))
                return -1;
        }
    return 0;
}

int ktune_shapes_dtypes(const ktune_space *s, int64_t *dtypes)
{
    int dd = -1, count = 0;
    for (int d = 0; d < s->nkey && dd < 0; d++)
        if (s->key[d].kind == KTUNE_DIM_DTYPE)
            dd = d;
    for (int i = 0; dd >= 0 && i < s->nshapes; i++) {
        const int64_t t = s->shapes[i].key[dd];
        int seen = 0;
        for (int j = 0; j < count && !seen; j++)
            seen = dtypes[j] == t;
        if (!seen && count < KTUNE_DTYPE_COUNT)
            dtypes[count++] = t;
    }
    return count;
}

/* The space's own shapes (none of the command line's changes) into own, a copy of s that owns
 * them; s keeps none. */
static int load_own(const char *file, const ktune_node *n, ktune_space *s, ktune_space *own,
                    ktune_err *err)
{
    const ktune_space_opts none = {0};
    const int rc = ktune_shapes_load(file, n, s, &none, err);
    *own = *s;
    s->shapes = NULL;
    s->nshapes = 0;
    return rc;
}

/* The dtypes of --out-in-features' shapes: the one given, else int8 (the seed's default) where
 * the space's own shapes use it, else each dtype they use. */
static int linear_dtypes(const char *file, const ktune_node *n, ktune_space *s,
                         const ktune_linear_shapes *lin, int64_t *dtypes, int *ndtypes,
                         ktune_err *err)
{
    *ndtypes = 1;
    dtypes[0] = lin->dtype;
    int has_dtype = 0;
    for (int d = 0; d < s->nkey; d++)
        has_dtype |= s->key[d].kind == KTUNE_DIM_DTYPE;
    if (lin->dtype_given || !has_dtype)
        return 0;
    ktune_space own;
    if (load_own(file, n, s, &own, err)) {
        free(own.shapes);
        return -1;
    }
    int64_t used[KTUNE_DTYPE_COUNT];
    const int nused = ktune_shapes_dtypes(&own, used);
    free(own.shapes);
    int seed_default = 0;
    for (int i = 0; i < nused; i++)
        seed_default |= used[i] == lin->dtype;
    if (!seed_default && nused > 0) {
        memcpy(dtypes, used, sizeof used[0] * (size_t)nused);
        *ndtypes = nused;
    }
    return 0;
}

/* Whether shapes entry e is a models entry whose list names model. */
static int models_entry_lists(const ktune_node *e, const char *model)
{
    const ktune_node *list = e->kind == KTUNE_NODE_MAP ? ktune_map_get(e, "models") : NULL;
    for (int i = 0; list && list->kind == KTUNE_NODE_SEQ && i < list->count; i++)
        if (list->items[i]->kind == KTUNE_NODE_SCALAR && strcmp(list->items[i]->value, model) == 0)
            return 1;
    return 0;
}

/* A key of --key, --untuned or --shapes into the list. */
static int key_sink(void *ctx, const int64_t *key, ktune_err *err)
{
    return shape_add(ctx, key, NULL, NULL, err);
}

int ktune_shapes_load(const char *file, const ktune_node *n, ktune_space *s,
                      const ktune_space_opts *o, ktune_err *err)
{
    static const char *const allowed[] = {"grid", "where", "list",   "models", "tp",
                                          "ep",   "layers", "derive", NULL};
    if (ktune_expect_list(file, n, "shapes", err))
        return -1;
    shape_list l = {0};
    int rc = 0, models = 0, listing = 0;
    /* the command line's keys */
    const int named = o && (o->linear || o->attention || o->dense_attention || o->keys ||
                            o->untuned || o->shapes || o->random_models);
    if (o && o->dense_attention) {
        ktune_space own; /* the space's own shapes: their other dimensions */
        rc = load_own(file, n, s, &own, err);
        if (rc == 0)
            rc = load_dense_attention(o->dense_attention, &own, s, &l, err);
        free(own.shapes);
    } else if (o && o->attention) {
        ktune_space own; /* the space's own shapes: their dtypes and q_len */
        rc = load_own(file, n, s, &own, err);
        if (rc == 0)
            rc = load_attention(o->attention, &own, s, &l, err);
        free(own.shapes);
    } else if (o && o->linear) {
        int64_t dtypes[KTUNE_DTYPE_COUNT];
        int ndtypes;
        rc = linear_dtypes(file, n, s, o->linear, dtypes, &ndtypes, err);
        if (rc == 0)
            rc = load_linear(o->linear, dtypes, ndtypes, s, &l, err);
    }
    else if (o && o->keys)
        rc = ktune_keys_parse(s, o->keys, key_sink, &l, err);
    else if (o && o->untuned)
        rc = ktune_keys_read_untuned(s, o->untuned, key_sink, &l, err);
    else if (o && o->shapes)
        rc = ktune_keys_read_shapes(s, o->shapes, key_sink, &l, err);
    else if (o && o->random_models) {
        ktune_space own; /* the space's own shapes: their dtypes, and keys to leave out */
        rc = load_own(file, n, s, &own, err);
        if (rc == 0)
            rc = ktune_random_models_shapes(s, o->random_models, &own, key_sink, &l, err);
        free(own.shapes);
    }
    /* --model: the models entries that list the model, or every models entry where none does (a
     * preset the space does not name takes all of them) */
    for (int i = 0; o && o->model && !named && i < n->count; i++)
        listing += models_entry_lists(n->items[i], o->model);
    for (int i = 0; i < n->count && rc == 0 && !named; i++) {
        const ktune_node *e = n->items[i];
        if (ktune_expect(file, e, KTUNE_NODE_MAP, "a shapes entry", err) ||
            ktune_expect_keys(file, e, allowed, NULL, err)) {
            rc = -1;
        } else if (ktune_map_get(e, "models")) {
            if (listing && !models_entry_lists(e, o->model))
                continue;
            rc = load_models(file, e, s, o, &l, err);
            models++;
        } else if (o && o->model) {
            continue; /* --model: only shapes derived from models */
        } else if (ktune_map_get(e, "grid") && !ktune_map_get(e, "list") &&
                   !ktune_map_get(e, "tp") && !ktune_map_get(e, "ep") &&
                   !ktune_map_get(e, "layers") && !ktune_map_get(e, "derive")) {
            rc = load_grid(file, e, s, &l, err);
        } else if (ktune_map_get(e, "list") && !ktune_map_get(e, "grid") &&
                   !ktune_map_get(e, "where")) {
            rc = load_list(file, e, s, &l, err);
        } else {
            rc = ktune_fail_at(err, file, e->line, e->col,
                               "a shapes entry is either 'grid' (with an optional 'where'), "
                               "'list', or 'models' (with 'grid', 'derive', optional 'tp', 'ep', "
                               "'layers' and 'where')");
        }
    }
    if (rc == 0 && o && o->model && models == 0)
        rc = ktune_fail(err, "--model %s: %s derives no shapes from model presets", o->model, file);
    if (rc == 0 && o && o->where) {
        ktune_space_resolve_ctx ctx = {s, NULL};
        ktune_expr *where =
            ktune_expr_parse(o->where, ktune_space_resolve, &ctx, "--where", 1, 1, err);
        size_t kept = 0;
        for (size_t i = 0; where && i < l.count; i++) {
            ktune_expr_env env = {NULL, l.items[i].key, NULL};
            if (ktune_expr_eval(where, &env))
                l.items[kept++] = l.items[i];
        }
        if (!where)
            rc = -1;
        else if (kept == 0)
            rc = ktune_fail(err, "--where %s: no shape of %s is left", o->where, file);
        l.count = kept;
        ktune_expr_free(where);
    }
    if (rc == 0 && l.count == 0)
        rc = ktune_fail_at(err, file, n->line, n->col, "the shapes select no shape");
    if (rc == 0) {
        sort_space = s;
        qsort(l.items, l.count, sizeof *l.items, shape_cmp);
        size_t out = 0;
        for (size_t i = 0; i < l.count; i++)
            if (out == 0 || shape_cmp(&l.items[out - 1], &l.items[i]) != 0)
                l.items[out++] = l.items[i];
        l.count = out;
    }
    s->shapes = l.items;
    s->nshapes = (int)l.count;
    return rc;
}
