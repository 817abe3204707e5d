/* Code generation: C validates and computes, m4 templates under gen/templates/ format. */
#ifndef KTUNE_GEN_EMIT_H
#define KTUNE_GEN_EMIT_H

#include "registry.h"

typedef struct {
    const char *m4;        /* the m4 program */
    const char *templates; /* folder of the .m4 templates */
} ktune_emit_tools;

/* <out_dir>/<family>_space.h: variant ids, key description, defaults and the validity check. */
int ktune_emit_space(const ktune_space *space, const ktune_emit_tools *tools, const char *out_dir,
                     ktune_err *err);
/* <out_dir>/<family>_<set>_<i>.cu for i < shards (the kernels of the configs, spread over the
 * shards) and <out_dir>/<family>_<set>.cu (the instance table). configs: indices into space;
 * combos: each one's combinations of instantiated values to compile (ktune_space_combo's bits;
 * NULL: every one). */
int ktune_emit_instances(const ktune_space *space, const char *set, const int *configs,
                         const uint64_t *combos, int count, int shards,
                         const ktune_emit_tools *tools, const char *out_dir, ktune_err *err);
/* The table header of one registry, as text. */
int ktune_emit_table(const ktune_space *space, const ktune_registry *reg, const char *source,
                     const ktune_emit_tools *tools, ktune_buf *out, ktune_err *err);
/* <out_dir>/<family>_tables.c: every device table, by header path relative to the registry dir,
 * and for each its rows' instance indices into the library (instances[t][row], -1 where the
 * config is not compiled in) and their runner-ups' (runners[t][row * KTUNE_TABLE_RUNNER_UPS +
 * j], -1: none). */
int ktune_emit_table_index(const ktune_space *space, const ktune_registry *regs,
                           const char *const *headers, const int *const *instances,
                           const int *const *runners, int count, const ktune_emit_tools *tools,
                           const char *out_dir, ktune_err *err);

#endif
