/* Constraint and cost expressions: integers, names, + - * / %, comparisons, && || !,
 * max(a, b), min(a, b), parentheses. */
#ifndef KTUNE_GEN_EXPR_H
#define KTUNE_GEN_EXPR_H

#include <stdint.h>

#include "ktune_table.h"
#include "util.h"

/* What a name refers to. */
typedef enum {
    KTUNE_REF_PARAM,     /* a parameter of the variant: index into params */
    KTUNE_REF_KEY,       /* an integer key dimension: index into key */
    KTUNE_REF_KEY_BYTES, /* <dtype dim>_bytes: bytes of the element type in key[index] */
    KTUNE_REF_LIMIT,     /* a device limit: index into ktune_limit_names */
    KTUNE_REF_KEY_BITS,  /* <dtype dim>_bits: bits of the element type in key[index] */
    KTUNE_REF_KEY_IS     /* <dtype dim>_is_<dtype> (dtype_is_int8): 1 where key[index / 64] is
                            that dtype (index % 64), else 0 */
} ktune_ref_kind;

/* The device limits' names (KTUNE_DEVICE_LIMIT_MAP), KTUNE_NLIMITS of them. */
extern const char *const ktune_limit_names[];

typedef struct ktune_expr ktune_expr;

/* Resolves a name; returns 0 and fills kind/index, or -1 when the name is unknown. */
typedef int (*ktune_resolve_fn)(void *ctx, const char *name, ktune_ref_kind *kind, int *index);

/* How deep an expression may nest (parentheses, unary operators) and how deep its tree may be
 * (a + b + c is two deep): parsing, evaluating and printing recurse at most this far. */
#define KTUNE_EXPR_MAX_DEPTH 100
#define KTUNE_EXPR_MAX_DEPTH_TEXT "100"

/* Parses text. Errors name file:line:(col + offset of the token). */
ktune_expr *ktune_expr_parse(const char *text, ktune_resolve_fn resolve, void *ctx,
                             const char *file, int line, int col, ktune_err *err);
void ktune_expr_free(ktune_expr *e);

/* Which kinds of names the expression uses: a bit (1 << kind) each. */
unsigned ktune_expr_uses(const ktune_expr *e);

typedef struct {
    const int64_t *params;
    const int64_t *key;
    const int64_t *limits; /* KTUNE_NLIMITS values, in ktune_limit_names order */
} ktune_expr_env;

/* Evaluates; division or remainder by zero gives 0, and a result beyond int64 saturates. */
int64_t ktune_expr_eval(const ktune_expr *e, const ktune_expr_env *env);

/* Appends the expression as a fully parenthesized C expression. Names print as name(kind,
 * index) returns them. */
typedef const char *(*ktune_name_fn)(void *ctx, ktune_ref_kind kind, int index);
void ktune_expr_print_c(const ktune_expr *e, ktune_buf *out, ktune_name_fn name, void *ctx);

#endif
