/* The sweep: every config of a space on every shape, each verified then timed in a worker
 * process, journaled so that a re-run of the same command resumes; then the best few of each
 * shape re-measured interleaved with the default and the committed config. */
#ifndef KTUNE_GEN_SWEEP_H
#define KTUNE_GEN_SWEEP_H

#include "registry.h"
#include "worker_client.h"

typedef struct {
    const ktune_space *space;
    const char *run_dir;
    ktune_worker_opts worker;
    double config_timeout_s;
    int top;                         /* configs a shape re-measured at the end */
    const ktune_registry *committed; /* may be NULL */
    const char *command_line;
    const char *source_rev;
    const char *flags;
    int verbose;
    unsigned seed;  /* 0: configs in declared order; else a shuffled order, the same every run */
    int patience;   /* > 0: a shape stops after this many measured configs without a new best */
    int shard, shards; /* this run measures shapes shard, shard + shards, ... (shards >= 1) */
} ktune_sweep_opts;

/* 0 done, 1 interrupted (journal intact; re-run to resume), -1 error (err set). */
int ktune_sweep_run(const ktune_sweep_opts *opts, ktune_err *err);

/* One row of a run's final.csv. */
typedef struct {
    int64_t key[KTUNE_MAX_KEY];
    char config[KTUNE_CONFIG_NAME_MAX];
    int rank, of;
    double us, spread;
    int is_default, is_committed;
} ktune_final_row;

/* Reads <run>/final.csv: the last complete block of each shape. */
int ktune_final_load(const char *run_dir, const ktune_space *space, ktune_final_row **rows,
                     int *count, ktune_err *err);

/* Merges run folders (of one family, made on one kind of device, e.g. the shards of a sweep) into
 * out: every trial, and each shape's final block from the last run that has one. */
int ktune_merge_runs(const ktune_space *space, const char *out, const char *const *runs, int count,
                     ktune_err *err);

/* Device limits in ktune_limit_names order. */
void ktune_limits_from(const ktune_worker_device *d, int64_t *limits);

#endif
