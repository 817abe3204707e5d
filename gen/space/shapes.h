/* The space loader's two halves (space.c: key, variants, configs, defaults; shapes.c: the shapes)
 * and what they share. Internal to the space loader. */
#ifndef KTUNE_GEN_SHAPES_H
#define KTUNE_GEN_SHAPES_H

#include "space.h"
#include "yaml_tree.h"

#define KTUNE_MAX_SHAPES 1000000
#define KTUNE_DIM_MAX ((int64_t)1 << 40)
/* Combinations enumerated before constraints or a `where` filter them: a variant's parameter
 * values, a grid's points, a models entry's models x degrees x layers x grid points. */
#define KTUNE_MAX_COMBINATIONS 10000000

/* The product of counts, or KTUNE_MAX_COMBINATIONS + 1 once it passes the bound. */
int64_t ktune_space_combinations(const int *counts, int n);

/* Names in a space's expressions: a variant's parameters (variant NULL: none), the key's
 * dimensions and <dtype dim>_bytes / _bits, the device limits (with a variant). */
typedef struct {
    const ktune_space *space;
    const ktune_space_variant *variant;
} ktune_space_resolve_ctx;
int ktune_space_resolve(void *ctx, const char *name, ktune_ref_kind *kind, int *index);

/* The distinct values of the space's dtype dimension over s->shapes, in order; their count (0
 * without a dtype dimension). dtypes holds KTUNE_DTYPE_COUNT. */
int ktune_shapes_dtypes(const ktune_space *s, int64_t *dtypes);

/* The space's `shapes` (n), with what the command line changes (o, may be NULL): sorted by key,
 * unique, into s->shapes. */
int ktune_shapes_load(const char *file, const ktune_node *n, ktune_space *s,
                      const ktune_space_opts *o, ktune_err *err);

#endif
