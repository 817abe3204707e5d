#include "random_models.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ktune_table.h"
#include "shapes.h"

/* splitmix64: the same numbers on every machine */
static uint64_t next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static int64_t uniform(uint64_t *state, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(next(state) % (uint64_t)(hi - lo + 1));
}

/* Log-uniform in [1, 4096]: 2^(12 u), rounded down. */
static int64_t batch(uint64_t *state)
{
    const double u = (double)(next(state) >> 11) / 9007199254740992.0;
    const int64_t b = (int64_t)exp2(12.0 * u);
    return b < 1 ? 1 : b > 4096 ? 4096 : b;
}

static int dim_of(const ktune_space *s, const char *name)
{
    for (int d = 0; d < s->nkey; d++)
        if (s->key[d].kind == KTUNE_DIM_INT && strcmp(s->key[d].name, name) == 0)
            return d;
    return -1;
}

static int own_shape(const ktune_space *own, const int64_t *key)
{
    for (int i = 0; i < own->nshapes; i++)
        if (memcmp(own->shapes[i].key, key, sizeof(int64_t) * (size_t)own->nkey) == 0)
            return 1;
    return 0;
}

int ktune_random_models_shapes(const ktune_space *s, const char *text, const ktune_space *own,
                               ktune_key_sink sink, void *ctx, ktune_err *err)
{
    char count_text[32];
    const char *colon = strchr(text, ':');
    int64_t n = 0, seed = 0;
    if (!colon || (size_t)(colon - text) >= sizeof count_text)
        return ktune_fail(err, "--random-models: '%.64s' is not N:SEED (e.g. 25:1)", text);
    memcpy(count_text, text, (size_t)(colon - text));
    count_text[colon - text] = '\0';
    if (!ktune_parse_int(count_text, &n) || n < 1 || n > 10000 ||
        !ktune_parse_int(colon + 1, &seed) || seed < 0)
        return ktune_fail(err, "--random-models: '%.64s' is not N:SEED with 1 <= N <= 10000 and "
                               "SEED >= 0",
                          text);
    int dd = -1, nint = 0;
    for (int d = 0; d < s->nkey; d++) {
        if (s->key[d].kind == KTUNE_DIM_DTYPE)
            dd = dd < 0 ? d : -2;
        else
            nint++;
    }
    const int m = dim_of(s, "m"), nn = dim_of(s, "n"), k = dim_of(s, "k");
    const int rows = dim_of(s, "rows"), cols = dim_of(s, "cols");
    const int linear = m >= 0 && nn >= 0 && k >= 0 && nint == 3;
    const int softmax = rows >= 0 && cols >= 0 && nint == 2;
    if (dd < 0 || (!linear && !softmax))
        return ktune_fail(err, "--random-models: %s's key is neither a linear layer's (dtype, m, n, "
                               "k) nor a softmax's (dtype, rows, cols)",
                          s->family);
    int64_t dtypes[KTUNE_DTYPE_COUNT];
    const int ndtypes = ktune_shapes_dtypes(own, dtypes);
    if (ndtypes == 0)
        return ktune_fail(err, "--random-models: %s's own shapes name no dtype", s->family);
    uint64_t state = (uint64_t)seed;
    for (int64_t i = 0; i < n; i++) {
        const int64_t hidden = 256 * uniform(&state, 4, 64), heads = hidden / 128;
        const int64_t grouped = heads >> uniform(&state, 0, 3), kv_heads = grouped > 0 ? grouped : 1;
        const int64_t inter = 256 * ((hidden * uniform(&state, 250, 400) / 100 + 255) / 256);
        const int64_t vocab = uniform(&state, 32000, 262144);
        /* out and in of qkv, o, gate_up, down, lm_head */
        const int64_t layers[5][2] = {{(heads + 2 * kv_heads) * 128, hidden},
                                      {hidden, hidden},
                                      {2 * inter, hidden},
                                      {hidden, inter},
                                      {vocab, hidden}};
        for (int l = 0; l < (linear ? 5 : 1); l++) {
            int64_t key[KTUNE_MAX_KEY] = {0};
            key[dd] = dtypes[uniform(&state, 0, ndtypes - 1)];
            const int64_t b = batch(&state);
            if (linear) {
                key[m] = b;
                key[nn] = layers[l][0];
                key[k] = layers[l][1];
            } else {
                key[rows] = b;
                key[cols] = vocab;
            }
            if (!own_shape(own, key) && sink(ctx, key, err))
                return -1;
        }
    }
    return 0;
}
