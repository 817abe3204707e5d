/* The sweep: every config of a space on every shape, each verified then timed in a worker
 * process, journaled so that a re-run of the same command resumes; then the best few of each
 * shape re-measured interleaved with the default and the committed config. A staged search
 * screens with short samples and leaves the precision to that final round; an exhaustive one
 * times every config precisely. */
#ifndef KTUNE_GEN_SWEEP_H
#define KTUNE_GEN_SWEEP_H

#include "registry.h"
#include "run_folder.h"
#include "worker_client.h"

typedef struct {
    const ktune_space *space;
    const char *run_dir;
    ktune_worker_opts worker; /* staged: its screen settings time the single trials */
    int staged;
    double config_timeout_s;
    int top; /* configs a shape re-measured at the end, at most (see final_margin) */
    const char *registry_dir; /* the committed entries of the device join each final round */
    const char *command_line;
    const char *source_rev;
    const char *flags;
    int verbose;
    unsigned seed;  /* 0: configs in declared order; else a shuffled order, the same every run */
    int patience;   /* > 0: a shape stops after this many measured configs without a new best */
    int shard, shards; /* this run measures shapes shard, shard + shards, ... (shards >= 1) */
    double shape_budget_s; /* > 0: a shape stops taking new configs after this long */
    double run_budget_s;   /* > 0: the run stops (resumable) after this long */
    double final_margin;   /* the final round re-measures configs this close to the fastest */
} ktune_sweep_opts;

/* ktune_sweep_run's results besides 0 and -1. */
#define KTUNE_SWEEP_INTERRUPTED 1
#define KTUNE_SWEEP_BUDGET_SPENT 2
#define KTUNE_SWEEP_NO_DEVICE 3 /* the worker found no usable device; nothing was written */

/* 0 done, KTUNE_SWEEP_INTERRUPTED or KTUNE_SWEEP_BUDGET_SPENT (journal intact; re-run to
 * resume), -1 error (err set). */
int ktune_sweep_run(const ktune_sweep_opts *opts, ktune_err *err);

/* Device limits in ktune_limit_names order. */
void ktune_limits_from(const ktune_hello *d, int64_t *limits);

#endif
