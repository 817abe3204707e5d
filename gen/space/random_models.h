/* Shapes of models nobody tuned: --random-models N:SEED draws N model shapes from a generator
 * seeded by SEED, the same on every machine, for the families whose key is a linear layer's
 * (m, n, k) or a row softmax's (rows, cols), each with one dtype dimension. A model: hidden from
 * 1024 to 16384 in steps of 256, 128-wide heads, kv heads hidden / 128 divided by 1, 2, 4 or 8,
 * intermediate 2.5 to 4 times hidden (a multiple of 256), vocabulary 32000 to 262144 (any width).
 * A linear family takes its five layers (qkv, o, gate_up, down, lm_head at tensor parallel 1)
 * at a batch each; softmax its logits, rows = batch, cols = vocabulary; batches log-uniform from 1
 * to 4096. Each key takes one of the dtypes the space's own shapes use, drawn as well; a key the
 * space's own shapes hold is left out. */
#ifndef KTUNE_GEN_RANDOM_MODELS_H
#define KTUNE_GEN_RANDOM_MODELS_H

#include <stdint.h>

#include "keys.h"

/* text: "N:SEED" (1 <= N <= 10000). own: the space's own shapes, for their dtypes and to leave
 * them out. Errors name --random-models. */
int ktune_random_models_shapes(const ktune_space *s, const char *text, const ktune_space *own,
                               ktune_key_sink sink, void *ctx, ktune_err *err);

#endif
