/* For the space tests: the generated C validity check and cost models of a family
 * (<family>_space.h) against the interpreter, on every config, shape and device. */
#ifndef KTUNE_TEST_SPACE_VALIDITY_H
#define KTUNE_TEST_SPACE_VALIDITY_H

#include <stdio.h>
#include <string.h>

#include "space.h"

/* Loads the space a space test names as its one argument: 0, or the test's exit code (2 for a
 * wrong command line, 1 for a space that does not load) after saying why. */
static int space_test_load(int argc, char **argv, const char *usage, ktune_space *s)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s\n", usage);
        return 2;
    }
    ktune_err err;
    if (ktune_space_load(argv[1], s, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    return 0;
}

/* The index of the variant's parameter `name`, or -1. */
static inline int param_index(const ktune_space_variant *v, const char *name)
{
    for (int p = 0; p < v->nparams; p++)
        if (strcmp(v->params[p].name, name) == 0)
            return p;
    return -1;
}

/* The limits of a device, in the order expressions name them. */
static inline void space_device_limits(const ktune_device *d, int64_t limits[KTUNE_NLIMITS])
{
    int i = 0;
#define KTUNE_LIMIT_COPY(name, type, what) limits[i++] = (int64_t)d->name;
    KTUNE_DEVICE_LIMIT_MAP(KTUNE_LIMIT_COPY)
#undef KTUNE_LIMIT_COPY
}

/* Returns the (config, shape, device) triples where the two disagree (the first few are named on
 * stderr); *agree counts the others. valid[d * nvariants + v] (if not NULL) counts the valid
 * (config, shape) pairs of variant v on devices[d]. */
static long space_validity_disagreements(const ktune_space *s, ktune_valid_fn generated,
                                         const ktune_device *devices, int ndevices, long *agree,
                                         long *valid)
{
    long disagree = 0;
    *agree = 0;
    for (int dv = 0; dv < ndevices; dv++) {
        const ktune_device *d = &devices[dv];
        int64_t limits[KTUNE_NLIMITS];
        space_device_limits(d, limits);
        for (int c = 0; c < s->nconfigs; c++)
            for (int k = 0; k < s->nshapes; k++) {
                const ktune_space_config *cfg = &s->configs[c];
                const int interpreted = ktune_space_valid(s, cfg, s->shapes[k].key, limits);
                const int compiled = generated(cfg->variant, cfg->params, s->shapes[k].key, d);
                if (interpreted == compiled)
                    (*agree)++;
                else if (disagree++ < 5)
                    fprintf(stderr, "disagree: %s on %s\n", cfg->name, d->name);
                if (valid)
                    valid[dv * s->nvariants + cfg->variant] += compiled;
            }
    }
    return disagree;
}

/* Returns the (config, shape) pairs where the generated cost model and the interpreted one
 * disagree on device d, or where either is not positive (the first few are named on stderr);
 * *agree counts the others. Every variant of the space must have a model. */
static inline long space_cost_disagreements(const ktune_space *s, ktune_cost_fn generated,
                                            const ktune_device *d, long *agree)
{
    long disagree = 0;
    int64_t limits[KTUNE_NLIMITS];
    space_device_limits(d, limits);
    *agree = 0;
    for (int c = 0; c < s->nconfigs; c++)
        for (int k = 0; k < s->nshapes; k++) {
            const ktune_space_config *cfg = &s->configs[c];
            const ktune_space_variant *v = &s->variants[cfg->variant];
            ktune_expr_env env = {cfg->params, s->shapes[k].key, limits};
            const int64_t interpreted = v->cost ? ktune_expr_eval(v->cost, &env) : 0;
            const int64_t compiled = generated(cfg->variant, cfg->params, s->shapes[k].key, d);
            if (interpreted == compiled && compiled > 0)
                (*agree)++;
            else if (disagree++ < 5)
                fprintf(stderr, "cost: %s: %lld interpreted, %lld generated\n", cfg->name,
                        (long long)interpreted, (long long)compiled);
        }
    return disagree;
}

#endif
