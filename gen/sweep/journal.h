/* The run folder's writing side: trials.csv and final.csv kept as journals (the lines of one
 * answer of the worker flushed together as soon as they are known, then put on disk by the syncer
 * while the next measurement runs, so that a killed sweep loses nothing that was measured; a line
 * cut short by a kill trimmed before a resume), meta.yaml, and the GPU's state around a run. */
#ifndef KTUNE_GEN_JOURNAL_H
#define KTUNE_GEN_JOURNAL_H

#include <stdio.h>

#include "search.h"
#include "syncer.h"
#include "sweep.h"

/* Cuts a file back to its last newline: a line cut short by a kill is dropped. */
void ktune_journal_trim(const char *path);
/* A line into the journal f, flushed with the others of its answer by ktune_journal_sync. */
void ktune_journal_line(FILE *f, const char *line);
void ktune_journal_sync(ktune_syncer *syncer, FILE *f);
/* A line, synced. */
void ktune_journal_write(ktune_syncer *syncer, FILE *f, const char *line);
/* Writes the trials.csv line of config ci of the shape keytext (t: what became of it), its detail
 * made safe for the CSV into clean. */
void ktune_journal_trial(FILE *journal, const char *keytext, const ktune_space *s, int ci,
                         const ktune_sweep_trial *t, int samples, const char *detail,
                         char clean[1024]);
/* Loads trials.csv into the trials table (a row of s->nconfigs a shape). A line that does not
 * parse (or names a shape or a config this sweep does not have) is not loaded: its trial is
 * measured again. */
void ktune_journal_load(const char *path, const ktune_space *s, ktune_sweep_trial *trials);
/* meta.yaml of a new run (state: the GPU's at the start); on a resume, checks that the run was
 * made on the same device with the same search and keeps the first metadata. */
int ktune_meta_write(const ktune_sweep_opts *o, const ktune_hello *d, const char *state,
                     ktune_err *err);

/* The state of the GPU of that UUID (SM and memory clocks, temperature, power) as nvidia-smi
 * reports it through NVML (by UUID: CUDA's device numbers and NVML's differ where
 * CUDA_VISIBLE_DEVICES or CUDA_DEVICE_ORDER renumber them): the query starts now and runs while
 * the caller goes on, ktune_gpu_state_read takes its answer (or a word on why there is none) and
 * closes it. NULL: it could not start, or uuid is not one (ktune_gpu_uuid_valid). */
FILE *ktune_gpu_state_query(const char *uuid);
void ktune_gpu_state_read(FILE *query, char *out, size_t size);

#endif
