/* Types shared by the generated tables, the kernel families and the selection code.
 * Plain C; the generated headers that use it compile as C and as C++. */
#ifndef KTUNE_TABLE_H
#define KTUNE_TABLE_H

#include <stdint.h>

#include "ktune/ktune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most dimensions a key and parameters a configuration may have; a family's generated space
 * header checks its own against them. */
#define KTUNE_MAX_KEY 10
#define KTUNE_MAX_PARAMS 12

/* One tuned shape: its key, the winning configuration, its time and the default's time. */
typedef struct {
    int64_t key[KTUNE_MAX_KEY];
    const char *config;
    float us;
    float default_us;
} ktune_row;

/* One device's table for one family; rows sorted by key. */
typedef struct {
    const char *device;
    int sms;
    int cc; /* compute capability, major * 10 + minor */
    const ktune_row *rows;
    int nrows;
} ktune_table;

/* The device limits constraints may name, in one table: X(name, type, what). They are the fields
 * of ktune_device (in this order), the names of the spaces' constraints, and the numbers of the
 * worker's hello line. */
#define KTUNE_DEVICE_LIMIT_MAP(X)                                                                 \
    X(sms, int, "streaming multiprocessors")                                                      \
    X(cc, int, "compute capability, major * 10 + minor")                                          \
    X(max_threads, int, "threads a block at most")                                                \
    X(smem_per_block, int64_t, "opt-in maximum of dynamic shared memory a block, bytes")          \
    X(l2_bytes, int64_t, "L2 cache, bytes")                                                       \
    X(sm90a, int, "1: compute capability 9.0, and this build carries sm_90a code (wgmma)")

enum {
#define KTUNE_DEVICE_LIMIT_INDEX(name, type, what) KTUNE_LIMIT_##name,
    KTUNE_DEVICE_LIMIT_MAP(KTUNE_DEVICE_LIMIT_INDEX)
#undef KTUNE_DEVICE_LIMIT_INDEX
        KTUNE_NLIMITS
};

#define KTUNE_DEVICE_LIMIT_FIELD(name, type, what) type name;

/* What the selection needs to know about a device: its name and limits. */
typedef struct {
    char name[256];
    KTUNE_DEVICE_LIMIT_MAP(KTUNE_DEVICE_LIMIT_FIELD)
} ktune_device;

typedef void (*ktune_launch_fn)(void);

/* One compiled configuration. */
typedef struct {
    const char *name;
    int variant;
    int64_t params[KTUNE_MAX_PARAMS];
    ktune_launch_fn launch; /* family-specific signature */
    /* the combinations of the family's instantiated key values (ktune_family.combo) it is
     * compiled for: bit c for combination c */
    uint64_t combos;
    /* the configuration whose measurements stand in for this one's in the vote of an untuned
     * key's neighbours (its variant's twin in the space, the same values of the parameters the
     * two share), or NULL */
    const char *twin;
} ktune_instance;

typedef enum { KTUNE_DIM_INT = 0, KTUNE_DIM_DTYPE = 1 } ktune_dim_kind;

/* Validity of a configuration for a key on a device: its variant's constraints. */
typedef int (*ktune_valid_fn)(int variant, const int64_t *params, const int64_t *key,
                              const ktune_device *device);

/* A configuration's cost model for a key on a device (its variant's `cost` in the space): a
 * time up to a factor of the configuration's own, > 0; 0 where the variant has none. */
typedef int64_t (*ktune_cost_fn)(int variant, const int64_t *params, const int64_t *key,
                                 const ktune_device *device);

typedef struct {
    const char *name;
    int nkey;
    const char *const *key_names;
    const ktune_dim_kind *key_kinds;
    const ktune_table *const *tables;
    int ntables;
    /* for each table, the instance index of each row (into instances; -1: not compiled in),
     * resolved when the build generated the library */
    const int *const *table_instances;
    const ktune_instance *instances;
    int ninstances;
    const char *const *defaults; /* first valid one wins */
    int ndefaults;
    ktune_valid_fn valid;
    /* for each table, KTUNE_TABLE_RUNNER_UPS instance indices a row: its registry's runner-ups
     * (the next configs, then the fastest of each other variant), the evidence of the vote for an
     * untuned key; the first KTUNE_ADAPT_RUNNER_UPS are the candidates of online adaptation (-1:
     * none); NULL: no runner-ups */
    const int *const *table_runner_instances;
    /* for each table, the sweep's times of those runner-ups, us (0: none); NULL: none (an
     * untuned key's neighbours then vote with their answers alone) */
    const float *const *table_runner_us;
    /* the combination of a key's values in the dimensions the kernels are instantiated over (a
     * space's `instantiate`), the bit of an instance's combos that says it is compiled for them;
     * -1 where a value is not instantiated. NULL: every instance serves every key */
    int (*combo)(const int64_t *key);
    /* the variants' cost models, for the vote of an untuned key's neighbours (ktune.h); NULL:
     * none */
    ktune_cost_fn cost;
} ktune_family;

/* The runner-ups a table row keeps (a registry entry's, KTUNE_RUNNER_UPS), and how many of them
 * online adaptation times (KTUNE_ADAPT). */
#define KTUNE_TABLE_RUNNER_UPS 8
#define KTUNE_ADAPT_RUNNER_UPS 3

/* Sets *dtype and returns 1 when name is a dtype's name (KTUNE_DTYPE_MAP). */
int ktune_dtype_parse(const char *name, int64_t *dtype);
/* The names of every dtype, comma-separated: "f32, f16, ...", for messages. */
const char *ktune__dtype_names(void);

/* Bytes an element takes, rounded up (a packed type: 1); constraints name it <dim>_bytes. */
static inline int64_t ktune_dtype_bytes(int64_t dtype) { return (ktune_dtype_bits(dtype) + 7) / 8; }

/* The arithmetic of constraints, the same in the sweep's evaluator and in the generated validity
 * checks: a result beyond int64 saturates toward its sign, division and remainder by zero give 0
 * (and INT64_MIN / -1 gives INT64_MAX). */
static inline int64_t ktune_sat_add(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (a < 0 ? INT64_MIN : INT64_MAX) : r;
}
static inline int64_t ktune_sat_sub(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_sub_overflow(a, b, &r) ? (a < 0 ? INT64_MIN : INT64_MAX) : r;
}
static inline int64_t ktune_sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? ((a < 0) != (b < 0) ? INT64_MIN : INT64_MAX) : r;
}
static inline int64_t ktune_sat_div(int64_t a, int64_t b)
{
    return b ? (a == INT64_MIN && b == -1 ? INT64_MAX : a / b) : 0;
}
static inline int64_t ktune_sat_mod(int64_t a, int64_t b) { return b ? (b == -1 ? 0 : a % b) : 0; }
static inline int64_t ktune_sat_neg(int64_t a) { return a == INT64_MIN ? INT64_MAX : -a; }
static inline int64_t ktune_max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t ktune_min64(int64_t a, int64_t b) { return a < b ? a : b; }

#ifdef __cplusplus
}
#endif

#endif
