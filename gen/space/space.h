/* A family's space: key, variants with their parameters and constraints, defaults, shapes. */
#ifndef KTUNE_GEN_SPACE_H
#define KTUNE_GEN_SPACE_H

#include <stdint.h>

#include "ktune_table.h"
#include "expr.h"
#include "attention.h"
#include "linear.h"
#include "util.h"

#define KTUNE_NAME_MAX 40
#define KTUNE_CONFIG_NAME_MAX 128

typedef struct {
    char name[KTUNE_NAME_MAX + 1];
    ktune_dim_kind kind;
} ktune_space_dim;

typedef struct {
    char name[KTUNE_NAME_MAX + 1];
    int64_t *values;
    int nvalues;
} ktune_space_param;

typedef struct {
    ktune_expr *expr;
    int per_shape; /* names a key dimension or a device limit: checked for each shape */
} ktune_space_constraint;

typedef struct {
    char name[KTUNE_NAME_MAX + 1];
    ktune_space_param params[KTUNE_MAX_PARAMS];
    int nparams;
    ktune_space_constraint *constraints;
    int nconstraints;
    /* the variant's cost model (the space's `cost`), or NULL: a time up to a factor the
     * configuration's measurements calibrate, for the selection of untuned keys (ktune.h) */
    ktune_expr *cost;
    /* the variant whose configurations stand in for this one's where these have no
     * measurements (the space's `twin`; every parameter of the twin is one of this variant's),
     * or -1 */
    int twin;
} ktune_space_variant;

typedef struct {
    char name[KTUNE_CONFIG_NAME_MAX];
    int variant;
    int64_t params[KTUNE_MAX_PARAMS];
    /* its twin (ktune_space_variant.twin's config of the same values of the parameters the two
     * share), or -1: where that is not a config of the space */
    int twin;
} ktune_space_config;

typedef struct {
    int64_t key[KTUNE_MAX_KEY];
} ktune_space_shape;

/* The combinations of instantiated key values a space may have (a bit each in an instance's
 * combos, ktune_table.h). */
#define KTUNE_COMBOS_MAX 64

/* A key dimension the kernels are instantiated over (the space's `instantiate`): its values, in
 * the order that numbers the combinations. */
typedef struct {
    int dim;
    int64_t values[KTUNE_COMBOS_MAX];
    int nvalues;
} ktune_space_instantiated;

typedef struct {
    char path[1024];
    char family[KTUNE_NAME_MAX + 1];
    ktune_space_dim key[KTUNE_MAX_KEY];
    int nkey;
    ktune_space_variant *variants;
    int nvariants;
    ktune_space_config *configs; /* every config the parameter constraints allow, sorted by name */
    int nconfigs;
    int *defaults; /* indices into configs, in order: first valid one wins */
    int ndefaults;
    ktune_space_shape *shapes; /* sorted by key, unique */
    int nshapes;
    /* the key dimensions a config's kernels are compiled for value by value, in order (the first
     * the most significant digit of a combination's number); none: one combination */
    ktune_space_instantiated instantiated[KTUNE_MAX_KEY];
    int ninstantiated;
} ktune_space;

int ktune_space_load(const char *path, ktune_space *space, ktune_err *err);

/* What the command line may change about a space's shapes. */
typedef struct {
    const char *model; /* only the shapes derived from this model preset (--model) */
    int64_t tp;        /* > 0: this tensor-parallel degree for every model entry (--tp-size) */
    int64_t ep;        /* > 0: this expert-parallel degree for every model entry (--ep-size) */
    const int64_t *batches; /* nbatches > 0: these batch sizes for every model entry */
    int nbatches;
    const int64_t *seqs; /* nseqs > 0: these sequence lengths, and 1 (decode), for every model
                            entry whose grid has a seq (--seq-lengths) */
    int nseqs;
    const char *where; /* only the shapes for which this expression over the key holds (--where) */
    const ktune_linear_shapes *linear; /* these linear layers' shapes instead of the space's
                                          (--batch-sizes, --out-in-features...), or NULL */
    const ktune_attention_shapes *attention; /* an attention layer's shapes instead of the
                                                space's (--page-size, --head-dim, ...), or NULL */
    const ktune_dense_attention *dense_attention; /* dense attention's shapes instead of the
                                                     space's (--seq-len, ...), or NULL */
    const char *keys;    /* these keys instead of the space's shapes (--key, keys.h), or NULL */
    const char *untuned; /* the keys of this file instead (--untuned, keys.h), or NULL */
    const char *shapes;  /* the keys of this file instead (--shapes, keys.h), or NULL */
    const char *random_models; /* "N:SEED": random models' keys instead (random_models.h) */
} ktune_space_opts;

int ktune_space_load_with(const char *path, const ktune_space_opts *opts, ktune_space *space,
                          ktune_err *err);
void ktune_space_free(ktune_space *space);

/* Index of the config with this name, or -1. */
int ktune_space_find_config(const ktune_space *space, const char *name);
/* Whether every constraint of the config's variant holds for key on a device with these limits
 * (KTUNE_NLIMITS values). */
int ktune_space_valid(const ktune_space *space, const ktune_space_config *config,
                      const int64_t *key, const int64_t *limits);
/* The number of combinations of instantiated values (1 where nothing is instantiated), and the
 * combination of key's values, -1 where one is not instantiated. */
int ktune_space_ncombos(const ktune_space *space);
int ktune_space_combo(const ktune_space *space, const int64_t *key);
/* The first default valid for key, or -1. */
int ktune_space_default_for(const ktune_space *space, const int64_t *key, const int64_t *limits);

/* Key text: "dtype=f16 rows=4 cols=100"; and its parser (names in any order, all required). */
void ktune_space_key_format(const ktune_space *space, const int64_t *key, char *buf, size_t size);
int ktune_space_key_parse(const ktune_space *space, const char *text, int64_t *key, ktune_err *err);
int ktune_space_key_compare(const ktune_space *space, const int64_t *a, const int64_t *b);

#endif
