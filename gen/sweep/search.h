/* The search policy of a sweep, apart from its I/O: the order a shape's configs are tried in,
 * the windows of the screen (the patience and the shape budget), and the final round's picks
 * with the rule that breaks its ties. */
#ifndef KTUNE_GEN_SEARCH_H
#define KTUNE_GEN_SEARCH_H

#include "protocol.h"
#include "registry.h"

/* What became of a config on a shape (KTUNE_TRIAL_NONE: not measured yet). */
typedef struct {
    ktune_trial_status status;
    float us, spread;
} ktune_sweep_trial;

/* The order a shape's configs are tried in: declared (seed 0), or shuffled by a generator seeded
 * with the seed and the shape (so a resumed run repeats it). */
void ktune_search_order(const ktune_space *s, unsigned seed, int shape, int *order);

/* Moves fixed[0] and fixed[1] (the default and the committed config, ktune_final_fixed; -1 for
 * none) to the front of order, in that order: a shape's budget or early stop may end its search
 * at any point, and the final round compares the winner with these two only where they were
 * measured. */
void ktune_search_fixed_first(const ktune_space *s, const int fixed[2], int *order);

/* The next window of the shape's order from order[at]: in *todo the configs to measure (not
 * measured yet, valid on key and limits), at most cap of them, and no more configs that could
 * count against the patience than patience_left (<= 0: no patience); returns the window's end in
 * the order. */
int ktune_search_window(const ktune_space *s, const int64_t *key, const int64_t *limits,
                        const ktune_sweep_trial *row, const int *order, int at, int cap,
                        int patience_left, int *todo, int *ntodo);
/* The most configs a window may hold: all a request takes, or, under a shape budget, what the
 * time left fits at the rate so far (one, to learn the rate). */
int ktune_search_cap(double shape_budget_s, double spent_s, int shape_measured);
/* After config ci's outcome: the shape's best so far and the configs since it. */
void ktune_search_note(const ktune_sweep_trial *row, int ci, int *best, int *since_best);

/* A config of a shape's final round. */
typedef struct {
    int config;
    double us, spread;
    int is_default, is_committed;
    int remeasured; /* in the final round's interleaved measurement (else: its first time) */
} ktune_final_pick;

#define KTUNE_FINAL_MAX_PICKS 64

/* The configs that the final round of key re-measures whatever their first times: [0] the
 * default, [1] the committed one (-1: none). */
void ktune_final_fixed(const ktune_space *s, const ktune_registry *committed_reg,
                       const int64_t *key, const int64_t *limits, int fixed[2]);
/* The final round's configs (KTUNE_FINAL_MAX_PICKS at most): the fastest by its first time and
 * those within margin of it or KTUNE_NOISE_FLOOR_US, whichever is wider (at most top), the
 * default and the committed config, re-measured; the fastest of every other variant for the
 * runner-ups (re-measured too when within the margin). Returns their number. */
int ktune_final_picks(const ktune_space *s, const ktune_sweep_trial *row, int top, double margin,
                      const int fixed[2], ktune_final_pick *picks);
/* Ranks the picks once the re-measured ones have their new times: re-measured first, faster
 * first; the winner, first, is the fastest re-measured config, where configs within the noise of
 * it tie and a tie goes to the first declared. */
void ktune_final_rank(ktune_final_pick *picks, int n);

#endif
