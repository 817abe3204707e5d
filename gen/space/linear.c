#include "linear.h"

#include <stdio.h>
#include <string.h>

#include "ktune_table.h"

#define KTUNE_LINEAR_DIM_MAX ((int64_t)1 << 40)

/* The next item of a comma-separated list at *p (advanced past it and its comma) into item:
 * 0 at the end, -1 for an empty or too long item. */
static int next_item(const char **p, char *item, size_t size)
{
    if (!**p)
        return 0;
    size_t n = strcspn(*p, ",");
    if (n == 0 || n >= size)
        return -1;
    memcpy(item, *p, n);
    item[n] = '\0';
    *p += n;
    if (**p == ',') {
        (*p)++;
        if (!**p)
            return -1; /* a trailing comma */
    }
    return 1;
}

static int size_parse(const char *text, int64_t *v)
{
    return ktune_parse_int(text, v) && *v >= 1 && *v <= KTUNE_LINEAR_DIM_MAX;
}

static int dtype_parse(const char *flag, const char *name, int64_t *dtype, ktune_err *err)
{
    if (ktune_dtype_parse(name, dtype))
        return 0;
    if (strcmp(name, "float8_e4m3fn") == 0) /* the seed's name of fp8 e4m3 */
        return ktune_dtype_parse("fp8_e4m3", dtype) ? 0 : -1;
    return ktune_fail(err, "%s: '%.64s' is not a dtype (%s)", flag, name, ktune__dtype_names());
}

int ktune_sizes_parse(const char *flag, const char *text, int64_t *sizes, int max, int *count,
                      ktune_err *err)
{
    char item[64];
    const char *p = text;
    int got;
    *count = 0;
    while ((got = next_item(&p, item, sizeof item)) == 1) {
        if (*count == max)
            return ktune_fail(err, "%s: more than %d sizes", flag, max);
        if (!size_parse(item, &sizes[*count]))
            return ktune_fail(err, "%s: '%s' is not a size from 1 to 2^40", flag, item);
        (*count)++;
    }
    if (got < 0 || *count == 0)
        return ktune_fail(err, "%s: '%.64s' is not a comma-separated list of sizes (e.g. 16,32,64)",
                          flag, text);
    return 0;
}

int ktune_linear_parse(const char *batch_sizes, const char *out_in_features, int64_t tp,
                       const char *tp_split_dim, const char *x_q_dtype, const char *w_q_dtype,
                       ktune_linear_shapes *l, ktune_err *err)
{
    memset(l, 0, sizeof *l);
    if (!batch_sizes != !out_in_features)
        return ktune_fail(err, "%s needs %s: a linear layer's shapes are both",
                          batch_sizes ? "--batch-sizes" : "--out-in-features",
                          batch_sizes ? "--out-in-features" : "--batch-sizes");
    char item[64];
    int got;
    if (ktune_sizes_parse("--batch-sizes", batch_sizes, l->batch, KTUNE_LINEAR_MAX, &l->nbatch, err))
        return -1;
    const char *p = out_in_features;
    while ((got = next_item(&p, item, sizeof item)) == 1) {
        if (l->nfeatures == KTUNE_LINEAR_MAX)
            return ktune_fail(err, "--out-in-features: more than %d pairs", KTUNE_LINEAR_MAX);
        char *slash = strchr(item, '/');
        if (slash)
            *slash = '\0';
        if (!slash || !size_parse(item, &l->out[l->nfeatures]) ||
            !size_parse(slash + 1, &l->in[l->nfeatures]))
            return ktune_fail(err, "--out-in-features: '%s%s%s' is not OUT/IN (e.g. 4096/12288)",
                              item, slash ? "/" : "", slash ? slash + 1 : "");
        l->nfeatures++;
    }
    if (got < 0 || l->nfeatures == 0)
        return ktune_fail(err, "--out-in-features: '%.64s' is not a comma-separated list of "
                               "OUT/IN pairs (e.g. 4096/12288,12288/4096)",
                          out_in_features);
    l->tp = tp > 0 ? tp : 1;
    if (tp_split_dim && strcmp(tp_split_dim, "out") != 0 && strcmp(tp_split_dim, "in") != 0)
        return ktune_fail(err, "--tp-split-dim: '%.64s' is neither out (column parallel) nor in "
                               "(row parallel)",
                          tp_split_dim);
    l->split_in = tp_split_dim && strcmp(tp_split_dim, "in") == 0;
    for (int f = 0; f < l->nfeatures; f++) {
        const int64_t split = l->split_in ? l->in[f] : l->out[f];
        if (split % l->tp)
            return ktune_fail(err, "--tp-size %lld does not divide %s = %lld of --out-in-features "
                                   "%lld/%lld (--tp-split-dim %s)",
                              (long long)l->tp, l->split_in ? "IN" : "OUT", (long long)split,
                              (long long)l->out[f], (long long)l->in[f],
                              l->split_in ? "in" : "out");
    }
    int64_t x = 0, w = 0;
    if (dtype_parse("--x-q-dtype", x_q_dtype ? x_q_dtype : "int8", &x, err) ||
        dtype_parse("--w-q-dtype", w_q_dtype ? w_q_dtype : "int8", &w, err))
        return -1;
    if (x != w)
        return ktune_fail(err, "--x-q-dtype %s and --w-q-dtype %s differ: both operands are "
                               "quantized to one type (w8a8)",
                          ktune_dtype_name(x), ktune_dtype_name(w));
    l->dtype = x;
    l->dtype_given = x_q_dtype || w_q_dtype;
    return 0;
}

void ktune_linear_shape(const ktune_linear_shapes *l, int i, int64_t *m, int64_t *n, int64_t *k)
{
    const int f = i % l->nfeatures;
    *m = l->batch[i / l->nfeatures];
    *n = l->split_in ? l->out[f] : l->out[f] / l->tp;
    *k = l->split_in ? l->in[f] / l->tp : l->in[f];
}
