/* ktune verify: the committed table of this GPU re-measured, the performance gate.
 *
 * Every time it compares is taken the way the sweep's final round records one (the worker's
 * INTERLEAVE request: precise samples of rotating input sets, after a warm-up, interleaved with
 * another config), so that a recorded time and a re-measured one mean the same. */
#ifndef KTUNE_GEN_VERIFY_H
#define KTUNE_GEN_VERIFY_H

#include <stdio.h>

#include "registry.h"
#include "worker_client.h"

typedef struct {
    double timeout_s; /* a request's, per config it names */
    double threshold; /* the slowdown (a fraction) that fails an entry */
    int repeats;      /* re-measurements of an entry that looks slower */
    /* every entry measured alone (ktune_worker_measure_alone), not only those recorded below
     * KTUNE_ALONE_BELOW_US; against another build or registry: fresh workers for every entry */
    int fresh;
    unsigned seed;    /* the order the entries are measured in: shuffled by it (0: by the clock) */
    /* NULL: the recorded times. Else what this build is compared with, interleaved on this GPU:
     * a registry (a file, or a folder of generated/<device>/<family>.yaml), another build's
     * worker (an executable), or a source revision, whose worker is built first under
     * build_dir. */
    const char *against;
    const char *source_dir; /* the git checkout a revision is taken from */
    const char *build_dir;  /* where a revision's worker is built */
} ktune_verify_opts;

/* Re-measures every committed entry of the worker's device (verified first), each interleaved with
 * the configs of its final round that the table names (the family default, the runner-ups) in one
 * request, in a shuffled order (an entry recorded below KTUNE_ALONE_BELOW_US, or every one with
 * opts->fresh: with its first reference only, alone, as the sweep recorded it); their median ratio to
 * their records is the reference. An entry that looks slower than its record by more than the
 * threshold is measured again opts->repeats times; it fails only when the slowdown holds in every
 * repeat beyond the noise measured there. With opts->against, this build's configs (or kernels)
 * are compared with the other's instead, under the same rule. Prints a line an entry and the noise
 * seen. 0 pass, 1 regression, -1 error (err set), or KTUNE_WORKER_NO_DEVICE.
 */
int ktune_verify_run(const ktune_space *space, const char *registry_dir,
                     const ktune_worker_opts *worker, const ktune_verify_opts *opts, FILE *out,
                     ktune_err *err);

#endif
