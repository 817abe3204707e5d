#define _POSIX_C_SOURCE 200809L
#include "models.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "expr.h"
#include "yaml_tree.h"

#define KTUNE_MODEL_DIM_MAX ((int64_t)1 << 31)

static int resolve_dim(void *ctx, const char *name, ktune_ref_kind *kind, int *index)
{
    const ktune_model *m = ctx;
    for (int i = 0; i < m->ndims; i++)
        if (strcmp(m->dim_names[i], name) == 0) {
            *kind = KTUNE_REF_PARAM;
            *index = i;
            return 0;
        }
    return -1;
}

/* A size: an expression over the model's dimensions, between 1 and 2^31. */
static int eval_size(const char *file, const ktune_node *n, const ktune_model *m, const char *what,
                     int64_t *out, ktune_err *err)
{
    if (ktune_expect(file, n, KTUNE_NODE_SCALAR, what, err))
        return -1;
    ktune_expr *e = ktune_expr_parse(n->value, resolve_dim, (void *)m, file, n->line,
                                     n->col + (n->plain ? 0 : 1), err);
    if (!e)
        return -1;
    ktune_expr_env env = {m->dims, NULL, NULL};
    *out = ktune_expr_eval(e, &env);
    ktune_expr_free(e);
    if (*out < 1 || *out > KTUNE_MODEL_DIM_MAX)
        return ktune_fail_at(err, file, n->line, n->col, "%s is %lld; it must be between 1 and %lld",
                             what, (long long)*out, (long long)KTUNE_MODEL_DIM_MAX);
    return 0;
}

static int load_layer(const char *file, const ktune_node *n, ktune_model *m, ktune_err *err)
{
    static const char *const keys[] = {"name", "out", "in", "split", NULL};
    if (ktune_expect(file, n, KTUNE_NODE_MAP, "a linear layer", err) ||
        ktune_expect_keys(file, n, keys, keys, err))
        return -1;
    const ktune_node *name = ktune_map_get(n, "name"), *split = ktune_map_get(n, "split");
    if (ktune_expect_identifier(file, name, "a layer's name", err))
        return -1;
    for (int i = 0; i < m->nlayers; i++)
        if (strcmp(m->layers[i].name, name->value) == 0)
            return ktune_fail_at(err, file, name->line, name->col, "layer '%s' is declared twice",
                                 name->value);
    ktune_model_layer *l = &m->layers[m->nlayers];
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name->value);
    l->line = n->line;
    l->col = n->col;
    if (eval_size(file, ktune_map_get(n, "out"), m, "out", &l->out, err) ||
        eval_size(file, ktune_map_get(n, "in"), m, "in", &l->in, err) ||
        ktune_expect(file, split, KTUNE_NODE_SCALAR, "split", err))
        return -1;
    if (strcmp(split->value, "out") == 0)
        l->split = KTUNE_SPLIT_OUT;
    else if (strcmp(split->value, "in") == 0)
        l->split = KTUNE_SPLIT_IN;
    else if (strcmp(split->value, "none") == 0)
        l->split = KTUNE_SPLIT_NONE;
    else
        return ktune_fail_at(err, file, split->line, split->col,
                             "split must be out (column parallel), in (row parallel) or none, "
                             "not '%s'",
                             split->value);
    m->nlayers++;
    return 0;
}

int ktune_model_load(const char *dir, const char *name, ktune_model *m, ktune_err *err)
{
    static const char *const allowed[] = {"model", "doc", "dims", "linear", NULL};
    static const char *const required[] = {"model", "dims", "linear", NULL};
    memset(m, 0, sizeof *m);
    if (!ktune_is_safe_path(name) || strchr(name, '/'))
        return ktune_fail(err, "%s: not a model preset name", name);
    snprintf(m->path, sizeof m->path, "%s/%s.yaml", dir, name);
    if (access(m->path, R_OK) != 0)
        return ktune_fail(err, "%s: no model preset %s", name, m->path);
    const char *file = m->path;
    ktune_node *root = ktune_yaml_load(file, err);
    int rc = -1;
    if (!root)
        return -1;
    if (ktune_expect(file, root, KTUNE_NODE_MAP, "a model preset", err) ||
        ktune_expect_keys(file, root, allowed, required, err))
        goto cleanup;
    const ktune_node *mn = ktune_map_get(root, "model"), *doc = ktune_map_get(root, "doc");
    if (ktune_expect(file, mn, KTUNE_NODE_SCALAR, "model", err) ||
        (doc && ktune_expect(file, doc, KTUNE_NODE_SCALAR, "doc", err)))
        goto cleanup;
    if (strcmp(mn->value, name) != 0) {
        ktune_fail_at(err, file, mn->line, mn->col, "the preset of %s is named '%s'", name,
                      mn->value);
        goto cleanup;
    }
    snprintf(m->name, sizeof m->name, "%s", name);
    const ktune_node *dims = ktune_map_get(root, "dims");
    if (ktune_expect(file, dims, KTUNE_NODE_MAP, "dims", err))
        goto cleanup;
    if (dims->count == 0 || dims->count > KTUNE_MODEL_MAX_DIMS) {
        ktune_fail_at(err, file, dims->line, dims->col, "a model has 1 to %d dims",
                      KTUNE_MODEL_MAX_DIMS);
        goto cleanup;
    }
    for (int i = 0; i < dims->count; i++) {
        if (ktune_expect_identifier(file, dims->keys[i], "a dimension's name", err) ||
            ktune_expect_int(file, dims->items[i], dims->keys[i]->value, 0, KTUNE_MODEL_DIM_MAX,
                             &m->dims[i], err))
            goto cleanup;
        snprintf(m->dim_names[i], sizeof m->dim_names[i], "%s", dims->keys[i]->value);
        m->ndims++;
    }
    const ktune_node *linear = ktune_map_get(root, "linear");
    if (ktune_expect_list(file, linear, "linear", err))
        goto cleanup;
    if (linear->count > KTUNE_MODEL_MAX_LAYERS) {
        ktune_fail_at(err, file, linear->line, linear->col, "a model has at most %d layers",
                      KTUNE_MODEL_MAX_LAYERS);
        goto cleanup;
    }
    for (int i = 0; i < linear->count; i++)
        if (load_layer(file, linear->items[i], m, err))
            goto cleanup;
    rc = 0;
cleanup:
    ktune_node_free(root);
    return rc;
}

int ktune_model_local(const ktune_model *m, int layer, int64_t tp, int64_t *out, int64_t *in,
                      ktune_err *err)
{
    const ktune_model_layer *l = &m->layers[layer];
    *out = l->out;
    *in = l->in;
    if (l->split == KTUNE_SPLIT_NONE)
        return 0;
    const int64_t size = l->split == KTUNE_SPLIT_OUT ? l->out : l->in;
    if (size % tp != 0)
        return ktune_fail(err, "%s's %s layer (%s:%d:%d) splits %s = %lld over the GPUs, which tp "
                               "%lld does not divide",
                          m->name, l->name, m->path, l->line, l->col,
                          l->split == KTUNE_SPLIT_OUT ? "out" : "in", (long long)size,
                          (long long)tp);
    if (l->split == KTUNE_SPLIT_OUT)
        *out /= tp;
    else
        *in /= tp;
    return 0;
}
