#include "search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"

void ktune_search_order(const ktune_space *s, unsigned seed, int shape, int *order)
{
    int n = s->nconfigs;
    for (int i = 0; i < n; i++)
        order[i] = i;
    if (!seed)
        return;
    uint64_t x = (uint64_t)seed * 0x9e3779b97f4a7c15ULL + (uint64_t)shape + 1;
    for (int i = n - 1; i > 0; i--) {
        x ^= x << 13; /* xorshift64 */
        x ^= x >> 7;
        x ^= x << 17;
        int j = (int)(x % (uint64_t)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

void ktune_search_fixed_first(const ktune_space *s, const int fixed[2], int *order)
{
    int front = 0;
    for (int f = 0; f < 2; f++) {
        if (fixed[f] < 0)
            continue;
        for (int i = front; i < s->nconfigs; i++)
            if (order[i] == fixed[f]) {
                memmove(order + front + 1, order + front, sizeof *order * (size_t)(i - front));
                order[front++] = fixed[f];
                break;
            }
    }
}

int ktune_search_window(const ktune_space *s, const int64_t *key, const int64_t *limits,
                        const ktune_sweep_trial *row, const int *order, int at, int cap,
                        int patience_left, int *todo, int *ntodo)
{
    int end = at, counted = 0;
    *ntodo = 0;
    while (end < s->nconfigs && *ntodo < cap && (patience_left <= 0 || counted < patience_left)) {
        const int ci = order[end++];
        const int valid = ktune_space_valid(s, &s->configs[ci], key, limits);
        if (row[ci].status == KTUNE_TRIAL_NONE && valid)
            todo[(*ntodo)++] = ci;
        counted += row[ci].status == KTUNE_TRIAL_NONE ? valid
                                                      : row[ci].status != KTUNE_TRIAL_INVALID;
    }
    return end;
}

int ktune_search_cap(double shape_budget_s, double spent_s, int shape_measured)
{
    if (shape_budget_s <= 0)
        return KTUNE_PROTOCOL_MAX_CONFIGS;
    if (shape_measured == 0 || spent_s <= 0)
        return 1;
    const double fits = (shape_budget_s - spent_s) * shape_measured / spent_s;
    return (int)fmin(KTUNE_PROTOCOL_MAX_CONFIGS, fmax(1, fits));
}

void ktune_search_note(const ktune_sweep_trial *row, int ci, int *best, int *since_best)
{
    const ktune_sweep_trial *t = &row[ci];
    if (t->status == KTUNE_TRIAL_OK && (*best < 0 || t->us < row[*best].us)) {
        *best = ci;
        *since_best = 0;
    } else if (t->status != KTUNE_TRIAL_INVALID) {
        (*since_best)++;
    }
}

/* Re-measured picks first, then the others; faster first; then in declared order. */
static int pick_cmp(const void *a, const void *b)
{
    const ktune_final_pick *x = a, *y = b;
    if (x->remeasured != y->remeasured)
        return y->remeasured - x->remeasured;
    if (x->us != y->us)
        return x->us < y->us ? -1 : 1;
    return x->config - y->config;
}

/* Adds config c to the picks unless it is there; returns its index. */
static int pick_add(ktune_final_pick *picks, int *n, int c, const ktune_sweep_trial *row,
                    int remeasure)
{
    int i = 0;
    while (i < *n && picks[i].config != c)
        i++;
    if (i == *n)
        picks[(*n)++] = (ktune_final_pick){c, row[c].us, row[c].spread, 0, 0, 0};
    picks[i].remeasured |= remeasure;
    return i;
}

void ktune_final_fixed(const ktune_space *s, const ktune_registry *committed_reg,
                       const int64_t *key, const int64_t *limits, int fixed[2])
{
    fixed[0] = ktune_space_default_for(s, key, limits);
    fixed[1] = -1;
    if (committed_reg) {
        int e = ktune_registry_find(committed_reg, s, key);
        if (e >= 0)
            fixed[1] = ktune_space_find_config(s, committed_reg->entries[e].config);
    }
}

int ktune_final_picks(const ktune_space *s, const ktune_sweep_trial *row, int top, double margin,
                      const int fixed[2], ktune_final_pick *picks)
{
    int n = 0, fastest = -1;
    for (int c = 0; c < s->nconfigs; c++)
        if (row[c].status == KTUNE_TRIAL_OK && (fastest < 0 || row[c].us < row[fastest].us))
            fastest = c;
    /* the margin, or the absolute noise floor where that is wider (kernels of a few us) */
    const double within = fastest >= 0 ? fmax(row[fastest].us * (1 + margin),
                                               row[fastest].us + KTUNE_NOISE_FLOOR_US)
                                       : 0;
    /* the fastest `top` within the margin, by their first times */
    for (int k = 0; k < top && n < 60; k++) {
        int best = -1;
        for (int c = 0; c < s->nconfigs; c++) {
            int taken = 0;
            for (int i = 0; i < n; i++)
                taken |= picks[i].config == c;
            if (!taken && row[c].status == KTUNE_TRIAL_OK && (best < 0 || row[c].us < row[best].us))
                best = c;
        }
        if (best < 0 || row[best].us > within)
            break;
        pick_add(picks, &n, best, row, 1);
    }
    /* and the fastest of every other variant: the variants' times side by side */
    for (int v = 0; v < s->nvariants && n < 60; v++) {
        int best = -1, seen = 0;
        for (int i = 0; i < n; i++)
            seen |= s->configs[picks[i].config].variant == v;
        for (int c = 0; c < s->nconfigs && !seen; c++)
            if (s->configs[c].variant == v && row[c].status == KTUNE_TRIAL_OK &&
                (best < 0 || row[c].us < row[best].us))
                best = c;
        if (best >= 0)
            pick_add(picks, &n, best, row, row[best].us <= within);
    }
    const int def = fixed[0], committed = fixed[1];
    if (def >= 0 && row[def].status == KTUNE_TRIAL_OK)
        picks[pick_add(picks, &n, def, row, 1)].is_default = 1;
    if (committed >= 0 && row[committed].status == KTUNE_TRIAL_OK)
        picks[pick_add(picks, &n, committed, row, 1)].is_committed = 1;
    return n;
}

void ktune_final_rank(ktune_final_pick *picks, int n)
{
    qsort(picks, (size_t)n, sizeof *picks, pick_cmp);
    /* The re-measured configs within the noise of the fastest (the larger of KTUNE_NOISE_FLOOR
     * and twice the larger spread) tie with it, and a tie goes to the first declared: where the
     * measurements cannot tell configs apart, a re-run or a resumed run picks the same one.
     * (Apply then keeps a committed config or the default that the winner does not beat.) */
    int win = 0;
    for (int i = 1; i < n && picks[i].remeasured; i++) {
        double noise = fmax(KTUNE_NOISE_FLOOR, 2 * fmax(picks[0].spread, picks[i].spread));
        if (picks[i].config < picks[win].config && picks[i].us <= picks[0].us * (1 + noise))
            win = i;
    }
    ktune_final_pick first = picks[win];
    memmove(picks + 1, picks, sizeof *picks * (size_t)win);
    picks[0] = first;
}
