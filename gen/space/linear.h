/* The shapes of linear layers given on the command line, as the seed's quantized-matmul tuner
 * takes them: --batch-sizes 16,32,64 --out-in-features 4096/12288,12288/4096 --tp-size 4
 * --tp-split-dim out --x-q-dtype int8 --w-q-dtype int8. Each batch size and OUT/IN pair is a
 * shape (m, n, k) = (batch, OUT, IN) of one GPU of the tensor-parallel degree: OUT / tp with the
 * split on `out` (column parallel), IN / tp on `in` (row parallel). They take the place of the
 * space's own shapes, for any family whose key has dimensions m, n and k (and the dtype, where
 * its key has one). */
#ifndef KTUNE_GEN_LINEAR_H
#define KTUNE_GEN_LINEAR_H

#include <stdint.h>

#include "util.h"

#define KTUNE_LINEAR_MAX 256

typedef struct {
    int64_t batch[KTUNE_LINEAR_MAX];
    int nbatch;
    int64_t out[KTUNE_LINEAR_MAX], in[KTUNE_LINEAR_MAX]; /* the global sizes */
    int nfeatures;
    int64_t tp;   /* >= 1 */
    int split_in; /* 0: OUT is split (column parallel), 1: IN (row parallel) */
    int64_t dtype;
    int dtype_given; /* --x-q-dtype or --w-q-dtype named it; else int8, the seed's default, for
                        a space whose own shapes are int8, or each dtype its own shapes use */
} ktune_linear_shapes;

/* The flags' values (NULL: not given; tp 0: not given) into l. Errors name the flag and the
 * value: a list that does not parse, a size the degree does not divide, q-dtypes that differ. */
int ktune_linear_parse(const char *batch_sizes, const char *out_in_features, int64_t tp,
                       const char *tp_split_dim, const char *x_q_dtype, const char *w_q_dtype,
                       ktune_linear_shapes *l, ktune_err *err);

/* A comma-separated list of sizes from 1 to 2^40 (--batch-sizes, --seq-lengths), at most max of
 * them, into sizes; errors name the flag and the item. */
int ktune_sizes_parse(const char *flag, const char *text, int64_t *sizes, int max, int *count,
                      ktune_err *err);

/* The i-th shape's m, n and k (i < nbatch * nfeatures; batch-major). */
void ktune_linear_shape(const ktune_linear_shapes *l, int i, int64_t *m, int64_t *n, int64_t *k);

#endif
