/* A run folder's files as data: the lines of trials.csv and final.csv, read strictly (a complete
 * line that does not parse is an error naming file:line:col; a last line without its newline,
 * cut short by a kill, is not read), and the merge of run folders. */
#ifndef KTUNE_GEN_RUN_FOLDER_H
#define KTUNE_GEN_RUN_FOLDER_H

#include "protocol.h"
#include "space.h"

/* What became of a config on a shape: KTUNE_TRIAL_STATUS_MAP, the protocol's. */
/* One line of trials.csv: key,config,status,median_us,spread,samples,detail. An ok trial has a
 * finite positive time and a finite spread of at least 0; any other has time inf. */
typedef struct {
    int64_t key[KTUNE_MAX_KEY];
    int config; /* index into the space */
    ktune_trial_status status;
    double us, spread;
    int samples;
} ktune_trial_line;

/* Parses line (without its newline; modified) of file at lineno. 0, or -1 with err set. */
int ktune_trial_parse(const ktune_space *space, char *line, const char *file, int lineno,
                      ktune_trial_line *out, ktune_err *err);

/* One row of a run's final.csv: key,config,rank,of,us,spread,is_default,is_committed. A shape
 * without a winner is one row "key,-,0,0,0,0,0,0". */
typedef struct {
    int64_t key[KTUNE_MAX_KEY];
    char config[KTUNE_CONFIG_NAME_MAX];
    int rank, of;
    double us, spread;
    int is_default, is_committed;
} ktune_final_row;

/* The most rows of one shape's block in final.csv. */
#define KTUNE_FINAL_MAX_BLOCK 64

int ktune_final_parse(const ktune_space *space, char *line, const char *file, int lineno,
                      ktune_final_row *out, ktune_err *err);

/* Reads <run>/final.csv: the last complete block of each shape. */
int ktune_final_load(const char *run_dir, const ktune_space *space, ktune_final_row **rows,
                     int *count, ktune_err *err);

/* Checks every complete line of <run>/trials.csv. */
int ktune_trials_check(const char *run_dir, const ktune_space *space, ktune_err *err);

/* Merges run folders (of one family, made on one kind of device, e.g. the shards of a sweep) into
 * out: every trial, and each shape's final block from the last run that has one. out must not be
 * one of the runs, nor a run be named twice; out's files are replaced only once every run has
 * been read. */
int ktune_merge_runs(const ktune_space *space, const char *out, const char *const *runs, int count,
                     ktune_err *err);

#endif
