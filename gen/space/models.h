/* Model presets (spaces/models/<name>.yaml): a model's dimensions and its linear layers, each
 * with its global output and input sizes and the dimension tensor parallelism splits. */
#ifndef KTUNE_GEN_MODELS_H
#define KTUNE_GEN_MODELS_H

#include <stdint.h>

#include "util.h"

#define KTUNE_MODEL_MAX_DIMS 32
#define KTUNE_MODEL_MAX_LAYERS 32

typedef enum {
    KTUNE_SPLIT_NONE, /* replicated on every GPU */
    KTUNE_SPLIT_OUT,  /* column parallel: each GPU computes out / tp outputs */
    KTUNE_SPLIT_IN    /* row parallel: each GPU reduces over in / tp inputs */
} ktune_split;

typedef struct {
    char name[41];
    int64_t out, in; /* global sizes */
    ktune_split split;
    int line, col;   /* where the layer is declared */
} ktune_model_layer;

typedef struct {
    char path[1024];
    char name[65];
    char dim_names[KTUNE_MODEL_MAX_DIMS][41];
    int64_t dims[KTUNE_MODEL_MAX_DIMS];
    int ndims;
    ktune_model_layer layers[KTUNE_MODEL_MAX_LAYERS];
    int nlayers;
} ktune_model;

/* Loads <dir>/<name>.yaml; the file's `model:` must be name. Errors are "file:line:col: ...",
 * or "name: ..." when there is no such preset. */
int ktune_model_load(const char *dir, const char *name, ktune_model *model, ktune_err *err);

/* The sizes one GPU of tp runs for layer: out / tp or in / tp by its split. Fails, naming the
 * model, the layer and the size, when tp does not divide the split size. */
int ktune_model_local(const ktune_model *model, int layer, int64_t tp, int64_t *out, int64_t *in,
                      ktune_err *err);

#endif
