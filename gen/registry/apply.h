/* Merging a run into the committed registry, never losing or worsening what is there. */
#ifndef KTUNE_GEN_APPLY_H
#define KTUNE_GEN_APPLY_H

#include <stdio.h>

#include "registry.h"

/* The replacement rule: a new winner replaces a committed config (and, for a new key, the family
 * default) only when it is faster, in the same run, by more than the noise: the largest of
 * KTUNE_NOISE_FLOOR, twice the larger relative spread of the two, and KTUNE_NOISE_FLOOR_US over
 * the time (launch jitter, which dominates kernels of a few microseconds). */
#define KTUNE_NOISE_FLOOR 0.01
#define KTUNE_NOISE_FLOOR_US 0.15

double ktune_apply_noise(double us, double spread_a, double spread_b);

/* A kept entry's recorded time is replaced by the run's final-round time of the same config when
 * that is faster beyond the noise (ktune_apply_noise): a record slower than the config runs would
 * hide a regression from verify. Never by a slower time: a slower run may be a slower GPU
 * (clocks, heat, a neighbour), and a record must not drift up with it. Either way a kept entry
 * re-measured more than KTUNE_APPLY_FAR from its record is reported. With retime, a kept entry
 * takes the run's time either way (asked for: after a change in how times are taken).
 *
 * A kept entry's runner-ups stay, the record's company, but gain the fastest config of each
 * variant they do not name that the run measured beside the kept config (a variant new to the
 * space, or one a sweep with a cut skipped), at its time in the run times the record's over the
 * kept config's in the run: the choice for untuned keys (ktune.h) can only pick what some row
 * measured. */
#define KTUNE_APPLY_FAR 0.10

typedef struct {
    int added, replaced, kept;
    int refreshed; /* kept, with the run's time */
    int widened;   /* kept, with runner-ups of variants they did not name */
} ktune_apply_counts;

/* Loads the registry at reg_path (or starts one for the run's device when absent), merges
 * run_dir into it and writes it back when anything changed. Says what it did for each key on
 * log. *changed: whether the file was written. */
int ktune_apply_run(const ktune_space *space, const char *run_dir, const char *reg_path, int force,
                    int retime, FILE *log, ktune_apply_counts *counts, int *changed, ktune_err *err);

/* generated/<device slug>/<family>.yaml for the device a run was made on. */
int ktune_registry_path_for_run(const ktune_space *space, const char *run_dir,
                                const char *registry_dir, char *out, size_t size, ktune_err *err);

#endif
