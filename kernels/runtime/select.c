/* The selection policy of ktune/ktune.h: table, exact key, the nearest tuned keys' vote,
 * default. */
#define _POSIX_C_SOURCE 200809L
#include "select.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KTUNE_MAX_WARNED 4096

typedef struct {
    const ktune_family *family;
    int64_t key[KTUNE_MAX_KEY];
} warned_key;

static pthread_mutex_t select_lock = PTHREAD_MUTEX_INITIALIZER;
static int env_loaded;
static int log_debug, log_quiet;
static char force_spec[1024];
static char untuned_path[1024];
static warned_key warned[KTUNE_MAX_WARNED];
static int nwarned;

/* The keys already answered, for the launch path: filled under select_lock, read without it.
 * A slot is written once, then published by its ready flag (release; readers acquire), and
 * only ktune__select_reset empties them. A key whose probe window is full is not kept: it is
 * answered under the lock each time, correctly but slower. */
#define KTUNE_MEMO_SLOTS 4096
#define KTUNE_MEMO_PROBES 8

typedef struct {
    atomic_int ready;
    const ktune_family *family;
    const ktune_device *device;
    int64_t key[KTUNE_MAX_KEY];
    int instance;
} memo_slot;

static memo_slot memo[KTUNE_MEMO_SLOTS];
static atomic_int env_ready; /* the environment's settings below are read (under the lock) */

static size_t memo_hash(const ktune_family *f, const ktune_device *dev, const int64_t *key)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a over the pointers and the key */
    uint64_t words[KTUNE_MAX_KEY + 2] = {(uint64_t)(uintptr_t)f, (uint64_t)(uintptr_t)dev};
    for (int d = 0; d < f->nkey; d++)
        words[2 + d] = (uint64_t)key[d];
    for (int i = 0; i < f->nkey + 2; i++)
        for (int b = 0; b < 8; b++) {
            h ^= (words[i] >> (8 * b)) & 0xff;
            h *= 1099511628211ULL;
        }
    return (size_t)h;
}

static int key_equal(int nkey, const int64_t *a, const int64_t *b)
{
    for (int d = 0; d < nkey; d++)
        if (a[d] != b[d])
            return 0;
    return 1;
}

static int memo_find(const ktune_family *f, const ktune_device *dev, const int64_t *key,
                     int *instance)
{
    size_t h = memo_hash(f, dev, key);
    for (int p = 0; p < KTUNE_MEMO_PROBES; p++) {
        memo_slot *m = &memo[(h + (size_t)p) % KTUNE_MEMO_SLOTS];
        if (!atomic_load_explicit(&m->ready, memory_order_acquire))
            return 0;
        if (m->family == f && m->device == dev && key_equal(f->nkey, m->key, key)) {
            *instance = m->instance;
            return 1;
        }
    }
    return 0;
}

/* Called with the lock held. */
static void memo_put(const ktune_family *f, const ktune_device *dev, const int64_t *key,
                     int instance)
{
    size_t h = memo_hash(f, dev, key);
    for (int p = 0; p < KTUNE_MEMO_PROBES; p++) {
        memo_slot *m = &memo[(h + (size_t)p) % KTUNE_MEMO_SLOTS];
        if (atomic_load_explicit(&m->ready, memory_order_relaxed))
            continue;
        m->family = f;
        m->device = dev;
        memcpy(m->key, key, sizeof(int64_t) * (size_t)f->nkey);
        m->instance = instance;
        atomic_store_explicit(&m->ready, 1, memory_order_release);
        return;
    }
}

static void env_load(void)
{
    if (env_loaded)
        return;
    const char *log = getenv("KTUNE_LOG");
    log_debug = log && strcmp(log, "debug") == 0;
    log_quiet = log && strcmp(log, "quiet") == 0;
    const char *force = getenv("KTUNE_FORCE");
    snprintf(force_spec, sizeof force_spec, "%s", force ? force : "");
    const char *untuned = getenv("KTUNE_UNTUNED_FILE");
    snprintf(untuned_path, sizeof untuned_path, "%s", untuned ? untuned : "");
    env_loaded = 1;
    atomic_store_explicit(&env_ready, 1, memory_order_release);
}

void ktune__select_reset(void)
{
    pthread_mutex_lock(&select_lock);
    env_loaded = 0;
    atomic_store(&env_ready, 0);
    for (int i = 0; i < KTUNE_MEMO_SLOTS; i++)
        atomic_store(&memo[i].ready, 0);
    nwarned = 0;
    pthread_mutex_unlock(&select_lock);
}

void ktune__key_format(const ktune_family *f, const int64_t *key, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < f->nkey && used < size; d++) {
        int n = f->key_kinds[d] == KTUNE_DIM_DTYPE
                    ? snprintf(buf + used, size - used, "%s%s=%s", d ? " " : "", f->key_names[d],
                               ktune_dtype_name(key[d]))
                    : snprintf(buf + used, size - used, "%s%s=%lld", d ? " " : "", f->key_names[d],
                               (long long)key[d]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

int ktune__instance_find(const ktune_family *f, const char *name)
{
    for (int i = 0; i < f->ninstances; i++)
        if (strcmp(f->instances[i].name, name) == 0)
            return i;
    return -1;
}

/* Whether instance i's kernels are compiled for key's values in the instantiated dimensions. */
static int instance_compiled(const ktune_family *f, int i, const int64_t *key)
{
    if (!f->combo)
        return 1;
    const int c = f->combo(key);
    return c >= 0 && c < 64 && ((f->instances[i].combos >> c) & 1);
}

int ktune__instance_valid(const ktune_family *f, int i, const int64_t *key,
                          const ktune_device *dev)
{
    const ktune_instance *in = &f->instances[i];
    return instance_compiled(f, i, key) && f->valid(in->variant, in->params, key, dev);
}

/* The index of the device's table in f->tables, or -1. */
static int table_for(const ktune_family *f, const ktune_device *dev)
{
    for (int i = 0; i < f->ntables; i++)
        if (strcmp(f->tables[i]->device, dev->name) == 0 && f->tables[i]->sms == dev->sms)
            return i;
    for (int i = 0; i < f->ntables; i++)
        if (f->tables[i]->cc == dev->cc)
            return i;
    return -1;
}

static int key_compare(int nkey, const int64_t *a, const int64_t *b)
{
    for (int d = 0; d < nkey; d++)
        if (a[d] != b[d])
            return a[d] < b[d] ? -1 : 1;
    return 0;
}

static int row_find(const ktune_family *f, const ktune_table *t, const int64_t *key)
{
    int lo = 0, hi = t->nrows - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = key_compare(f->nkey, t->rows[mid].key, key);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static double key_distance(const ktune_family *f, const int64_t *a, const int64_t *b)
{
    double dist = 0;
    for (int d = 0; d < f->nkey; d++) {
        if (f->key_kinds[d] != KTUNE_DIM_INT) {
            if (a[d] != b[d])
                return INFINITY;
            continue;
        }
        double x = (double)(a[d] > 0 ? a[d] : 1), y = (double)(b[d] > 0 ? b[d] : 1);
        dist += fabs(log2(x) - log2(y));
    }
    return dist;
}

/* Step 3 of ktune/ktune.h, the vote of an untuned key's neighbours: the KTUNE_VOTE_ROWS nearest
 * rows whose answer is compiled in and valid for the key, each configuration they measured that
 * is valid for it scored by the mean over those rows, weighted 1 / (1 + distance), of log(its
 * time / the row's answer's time), or where a row did not measure it vote_unmeasured's guess,
 * plus log(its cost at the key / its cost at the row) where its variant has a cost model; its
 * twin's time and cost at a row that measured the twin but not it; and the configurations valid
 * for the key whose twin a row measured. */
#define KTUNE_VOTE_ROWS 8
#define KTUNE_VOTE_UNMEASURED 0.3    /* as if 35% slower than the row's answer */
#define KTUNE_VOTE_DTYPE_DISTANCE 1.0 /* a dtype apart: as far as one size twice another */
#define KTUNE_VOTE_SIBLING 0.05     /* a config its variant's fastest at a row stands in for */
#define KTUNE_VOTE_MEASURED (1 + KTUNE_TABLE_RUNNER_UPS)

/* A row's evidence: the measured configurations valid for the key (instance, us: n of them), and
 * every compiled one it measured (all, all_us: nall), whose variants' fastest stand in for the
 * configurations of those variants it did not measure. */
typedef struct {
    int row, n, nall;
    double dist, answer_us;
    int instance[KTUNE_VOTE_MEASURED], all[KTUNE_VOTE_MEASURED];
    double us[KTUNE_VOTE_MEASURED], all_us[KTUNE_VOTE_MEASURED];
} vote_row;

/* The distance of key_distance, a dtype apart counting KTUNE_VOTE_DTYPE_DISTANCE: a configuration
 * measured on the same sizes in another type is evidence too (its validity for the key is
 * checked all the same). */
static double vote_distance(const ktune_family *f, const int64_t *a, const int64_t *b)
{
    double dist = 0;
    for (int d = 0; d < f->nkey; d++) {
        if (f->key_kinds[d] != KTUNE_DIM_INT) {
            dist += a[d] != b[d] ? KTUNE_VOTE_DTYPE_DISTANCE : 0;
            continue;
        }
        double x = (double)(a[d] > 0 ? a[d] : 1), y = (double)(b[d] > 0 ? b[d] : 1);
        dist += fabs(log2(x) - log2(y));
    }
    return dist;
}

/* Row r's measured configurations (its answer and runner-ups) compiled in (all) and those of
 * them valid for key (instance); none where its answer is not (a row whose answer cannot serve the
 * key is another regime: its runner-ups of other variants would vote from it as if they were good
 * there). */
static void vote_row_fill(const ktune_family *f, int ti, int r, const int64_t *key,
                          const ktune_device *dev, vote_row *v)
{
    const int *runners = f->table_runner_instances ? f->table_runner_instances[ti] : NULL;
    const float *runner_us = f->table_runner_us ? f->table_runner_us[ti] : NULL;
    v->row = r;
    v->n = v->nall = 0;
    v->answer_us = f->tables[ti]->rows[r].us; /* valid for the key or not */
    for (int j = -1; j < KTUNE_TABLE_RUNNER_UPS; j++) {
        const int at = r * KTUNE_TABLE_RUNNER_UPS + j;
        const int i = j < 0 ? f->table_instances[ti][r] : runners && runner_us ? runners[at] : -1;
        const double us = j < 0 ? v->answer_us : i >= 0 ? runner_us[at] : 0;
        if (i < 0 || !(us > 0)) {
            if (j < 0)
                return;
            continue;
        }
        const int valid = ktune__instance_valid(f, i, key, dev);
        if (j < 0 && !valid)
            return;
        v->all[v->nall] = i;
        v->all_us[v->nall++] = us;
        if (valid) {
            v->instance[v->n] = i;
            v->us[v->n++] = us;
        }
    }
}

/* log(cost of instance j at key b / cost of instance i at key a) under their variants' cost
 * models: what the models say i's time at a becomes as j's at b; 0 where either has none. */
static double cost_between(const ktune_family *f, int i, const int64_t *a, int j,
                           const int64_t *b, const ktune_device *dev)
{
    if (!f->cost)
        return 0;
    const ktune_instance *from = &f->instances[i], *to = &f->instances[j];
    const int64_t at_a = f->cost(from->variant, from->params, a, dev);
    const int64_t at_b = f->cost(to->variant, to->params, b, dev);
    return at_a > 0 && at_b > 0 ? log((double)at_b / (double)at_a) : 0;
}

/* log(cost at key / cost at row) of an instance: what its variant's cost model says its time at
 * the row becomes at the key; 0 where the family or the variant has none. */
static double cost_change(const ktune_family *f, int instance, const int64_t *key,
                          const int64_t *row, const ktune_device *dev)
{
    return cost_between(f, instance, row, instance, key, dev);
}

/* What a row says of instance i, which it did not measure: where it measured i's variant, log of
 * the time of that variant's fastest there over the row's answer's, carried to i by the cost model
 * where that makes it slower (i was not the fastest there), plus KTUNE_VOTE_SIBLING for the
 * guess; KTUNE_VOTE_UNMEASURED where it measured nothing of i's variant. */
static double vote_unmeasured(const ktune_family *f, const ktune_table *t, const vote_row *v,
                              int i, const ktune_device *dev)
{
    const int variant = f->instances[i].variant;
    const int64_t *at = t->rows[v->row].key;
    int fastest = -1;
    for (int e = 0; e < v->nall; e++)
        if (f->instances[v->all[e]].variant == variant &&
            (fastest < 0 || v->all_us[e] < v->all_us[fastest]))
            fastest = e;
    if (fastest < 0)
        return KTUNE_VOTE_UNMEASURED;
    const double us = v->all_us[fastest],
                 carried = us * exp(fmax(0, cost_between(f, v->all[fastest], at, i, at, dev)));
    return log(carried / v->answer_us) + KTUNE_VOTE_SIBLING;
}

/* Instance i's twin (ktune_instance.twin) among the compiled ones, -1 where none. */
static int twin_of(const ktune_family *f, int i)
{
    return f->instances[i].twin ? ktune__instance_find(f, f->instances[i].twin) : -1;
}

/* The first of near[0 .. n) that measured instance i, -1 where none did. */
static int nearest_measured(const vote_row *near, int n, int i)
{
    for (int b = 0; b < n; b++)
        for (int e = 0; e < near[b].n; e++)
            if (near[b].instance[e] == i)
                return b;
    return -1;
}

/* The KTUNE_VOTE_SHOWN lowest scores of a vote and their instances, lowest first (KTUNE_LOG=debug
 * prints them). */
#define KTUNE_VOTE_SHOWN 5
typedef struct {
    int n;
    int instance[KTUNE_VOTE_SHOWN];
    double score[KTUNE_VOTE_SHOWN];
} vote_ranking;

/* Puts instance i with score into the ranking where it is among the lowest; a later equal score
 * goes after the earlier, as the vote's ties do. */
static void ranking_add(vote_ranking *rk, int i, double score)
{
    if (rk->n == KTUNE_VOTE_SHOWN && rk->score[KTUNE_VOTE_SHOWN - 1] <= score)
        return;
    int at = rk->n < KTUNE_VOTE_SHOWN ? rk->n++ : KTUNE_VOTE_SHOWN - 1;
    for (; at > 0 && rk->score[at - 1] > score; at--) {
        rk->instance[at] = rk->instance[at - 1];
        rk->score[at] = rk->score[at - 1];
    }
    rk->instance[at] = i;
    rk->score[at] = score;
}

/* Scores instance i by the rows' votes (step 3 of ktune.h); where a row did not measure i but did
 * measure its twin (>= 0), the twin's time there stands in for i's, the cost models carrying it
 * from the twin at the row to i at the key. Keeps the lowest score in *best, the nearest row of a
 * measurement it rests on (near[a]) in *row, and its votes without the cost model in *score; and
 * i's score in rk where rk is not NULL. */
static void vote_candidate(const ktune_family *f, const ktune_table *t, const vote_row *near,
                           int nnear, int i, int twin, const int64_t *key, const ktune_device *dev,
                           int a, int *best, double *best_score, int *row, double *score,
                           vote_ranking *rk)
{
    double sum = 0, measured = 0, weights = 0;
    for (int b = 0; b < nnear; b++) {
        const int64_t *at = t->rows[near[b].row].key;
        double vote = 0, change = cost_change(f, i, key, at, dev);
        int found = 0;
        for (int e = 0; e < near[b].n && !found; e++)
            if ((found = near[b].instance[e] == i))
                vote = log(near[b].us[e] / near[b].answer_us);
        for (int e = 0; twin >= 0 && e < near[b].n && !found; e++)
            if ((found = near[b].instance[e] == twin)) {
                vote = log(near[b].us[e] / near[b].answer_us);
                change = cost_between(f, twin, at, i, key, dev);
            }
        if (!found)
            vote = vote_unmeasured(f, t, &near[b], i, dev);
        const double w = 1 / (1 + near[b].dist);
        measured += w * vote;
        sum += w * (vote + change);
        weights += w;
    }
    const double mean = sum / weights;
    if (rk)
        ranking_add(rk, i, mean);
    if (mean < *best_score) { /* ties: the candidate met first */
        *best_score = mean;
        *best = i;
        *row = near[a].row;
        *score = measured / weights;
    }
}

/* The instance the neighbours vote for, -1 where no row of table ti but row `skip` (-1: none) has
 * an answer valid for key; *row is the nearest row that measured it, *score the mean of its votes
 * without the cost model (how much slower than the rows' answers it was where they measured
 * it); the candidates of the lowest scores in rk where rk is not NULL. */
static int vote_answer(const ktune_family *f, int ti, const int64_t *key, const ktune_device *dev,
                       int skip, int *row, double *score, vote_ranking *rk)
{
    const ktune_table *t = f->tables[ti];
    vote_row near[KTUNE_VOTE_ROWS];
    int nnear = 0;
    *score = 0;
    for (int r = 0; r < t->nrows; r++) {
        const double d = vote_distance(f, key, t->rows[r].key);
        if (r == skip || !isfinite(d) ||
            (nnear == KTUNE_VOTE_ROWS && d >= near[nnear - 1].dist))
            continue;
        vote_row v;
        vote_row_fill(f, ti, r, key, dev, &v);
        if (v.n == 0)
            continue;
        v.dist = d;
        int at = nnear < KTUNE_VOTE_ROWS ? nnear++ : nnear - 1; /* kept sorted by distance */
        while (at > 0 && near[at - 1].dist > d) {
            near[at] = near[at - 1];
            at--;
        }
        near[at] = v;
    }
    int best = -1;
    double best_score = INFINITY;
    /* the candidates: what the rows measured, in order of their nearest measurement; then the
     * compiled configurations valid for the key whose twin a row measured */
    for (int a = 0; a < nnear; a++)
        for (int c = 0; c < near[a].n; c++) {
            const int i = near[a].instance[c];
            if (nearest_measured(near, a + 1, i) == a)
                vote_candidate(f, t, near, nnear, i, twin_of(f, i), key, dev, a, &best,
                               &best_score, row, score, rk);
        }
    for (int i = 0; i < f->ninstances; i++) {
        const int twin = twin_of(f, i);
        const int a = twin >= 0 ? nearest_measured(near, nnear, twin) : -1;
        if (a >= 0 && nearest_measured(near, nnear, i) < 0 &&
            ktune__instance_valid(f, i, key, dev))
            vote_candidate(f, t, near, nnear, i, twin, key, dev, a, &best, &best_score, row,
                           score, rk);
    }
    return best;
}

/* The row of table ti holding key itself, where its config is compiled in and valid; -1 where
 * none. */
static int exact_row(const ktune_family *f, int ti, const int64_t *key, const ktune_device *dev)
{
    const int *idx = f->table_instances[ti];
    const int r = row_find(f, f->tables[ti], key);
    return r >= 0 && idx[r] >= 0 && ktune__instance_valid(f, idx[r], key, dev) ? r : -1;
}

/* The nearest row of table ti (log distance, the same dtypes) whose config is compiled in and
 * valid for key; -1 where none. */
static int nearest_row(const ktune_family *f, int ti, const int64_t *key, const ktune_device *dev)
{
    const ktune_table *t = f->tables[ti];
    const int *idx = f->table_instances[ti];
    int best = -1;
    double best_dist = INFINITY;
    for (int i = 0; i < t->nrows; i++) {
        if (idx[i] < 0)
            continue;
        double d = key_distance(f, key, t->rows[i].key);
        if (d < best_dist && ktune__instance_valid(f, idx[i], key, dev)) {
            best = i;
            best_dist = d;
        }
    }
    return best;
}

int ktune__select_row(const ktune_family *f, const int64_t *key, const ktune_device *dev,
                      int *table)
{
    int row = -1;
    double score;
    *table = table_for(f, dev);
    if (*table < 0)
        return -1;
    const int exact = exact_row(f, *table, key, dev);
    if (exact >= 0)
        return exact;
    return vote_answer(f, *table, key, dev, -1, &row, &score, NULL) >= 0 ? row : -1;
}

int ktune__select_table(const ktune_family *f, const ktune_device *dev)
{
    return table_for(f, dev);
}

int ktune__select_holdout(const ktune_family *f, const ktune_device *dev, int ti, int r)
{
    int row;
    double score;
    if (ti < 0 || ti >= f->ntables || r < 0 || r >= f->tables[ti]->nrows)
        return -1;
    return vote_answer(f, ti, f->tables[ti]->rows[r].key, dev, r, &row, &score, NULL);
}

int ktune__select_nearest(const ktune_family *f, const int64_t *key, const ktune_device *dev)
{
    const int ti = table_for(f, dev);
    if (ti < 0)
        return -1;
    const int exact = exact_row(f, ti, key, dev);
    const int row = exact >= 0 ? exact : nearest_row(f, ti, key, dev);
    return row >= 0 ? f->table_instances[ti][row] : -1;
}

/* Returns 1 the first time a key is seen (and remembers it). Called with the lock held. */
static int first_miss(const ktune_family *f, const int64_t *key)
{
    for (int i = 0; i < nwarned; i++)
        if (warned[i].family == f && key_compare(f->nkey, warned[i].key, key) == 0)
            return 0;
    if (nwarned == KTUNE_MAX_WARNED)
        return 0;
    warned[nwarned].family = f;
    memcpy(warned[nwarned].key, key, sizeof(int64_t) * (size_t)f->nkey);
    nwarned++;
    return 1;
}

/* The configuration KTUNE_FORCE names for this family, or NULL. */
static const char *forced_config(const ktune_family *f, char *buf, size_t size)
{
    size_t flen = strlen(f->name);
    for (const char *p = force_spec; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > flen + 1 && strncmp(p, f->name, flen) == 0 && p[flen] == '=') {
            size_t n = len - flen - 1 < size - 1 ? len - flen - 1 : size - 1;
            memcpy(buf, p + flen + 1, n);
            buf[n] = '\0';
            return buf;
        }
        p = end ? end + 1 : p + len;
    }
    return NULL;
}

/* The selection of ktune/ktune.h for key, with the vote's lowest scores in rk where it votes and
 * rk is not NULL. */
static ktune_status select_locked(const ktune_family *f, const int64_t *key,
                                  const ktune_device *dev, int *instance, ktune_choice *c,
                                  vote_ranking *rk)
{
    char keytext[160], forced[128];
    ktune__key_format(f, key, keytext, sizeof keytext);
    memset(c, 0, sizeof *c);
    c->table = "";

    if (forced_config(f, forced, sizeof forced)) {
        int i = ktune__instance_find(f, forced);
        if (i < 0 || !ktune__instance_valid(f, i, key, dev)) {
            snprintf(c->why, sizeof c->why, "%s %s: KTUNE_FORCE names %.120s, which is %s", f->name,
                     keytext, forced,
                     i < 0                               ? "not compiled in"
                     : !instance_compiled(f, i, key) ? "not compiled for this key's values"
                                                         : "invalid for this key");
            return KTUNE_ERROR_FORCED_CONFIG;
        }
        *instance = i;
        c->reason = KTUNE_REASON_FORCED;
        snprintf(c->why, sizeof c->why, "%s %s: forced by KTUNE_FORCE", f->name, keytext);
        c->config = f->instances[i].name;
        return KTUNE_OK;
    }

    const int ti = table_for(f, dev);
    const ktune_table *t = ti >= 0 ? f->tables[ti] : NULL;
    if (t) {
        const int *idx = f->table_instances[ti];
        c->table = t->device;
        const int best = exact_row(f, ti, key, dev);
        if (best >= 0) {
            *instance = idx[best];
            c->reason = KTUNE_REASON_EXACT;
            c->tuned_us = t->rows[best].us;
            c->config = f->instances[idx[best]].name;
            snprintf(c->why, sizeof c->why, "%s %s: tuned on %.120s (%.2f us, default %.2f us)",
                     f->name, keytext, t->device, t->rows[best].us, t->rows[best].default_us);
            return KTUNE_OK;
        }
        int row;
        double score;
        const int voted = vote_answer(f, ti, key, dev, -1, &row, &score, rk);
        if (voted >= 0) {
            char neartext[160];
            ktune__key_format(f, t->rows[row].key, neartext, sizeof neartext);
            *instance = voted;
            c->reason = KTUNE_REASON_NEAREST;
            c->tuned_us = t->rows[row].us;
            c->config = f->instances[voted].name;
            const int slower = (int)fmin(100 * (exp(score) - 1), 1e6);
            snprintf(c->why, sizeof c->why,
                     "%.40s %.120s: untuned; the nearest tuned keys on %.100s vote for it (%d%% "
                     "slower than their answers on average; measured at %.120s)",
                     f->name, keytext, t->device, slower, neartext);
            return KTUNE_OK;
        }
    }
    for (int d = 0; d < f->ndefaults; d++) {
        int i = ktune__instance_find(f, f->defaults[d]);
        if (i >= 0 && ktune__instance_valid(f, i, key, dev)) {
            *instance = i;
            c->reason = KTUNE_REASON_DEFAULT;
            c->config = f->instances[i].name;
            snprintf(c->why, sizeof c->why, "%s %s: %s %.120s; family default", f->name, keytext,
                     t ? "no valid tuned key in the table of" : "no table for",
                     t ? t->device : dev->name);
            return KTUNE_OK;
        }
    }
    snprintf(c->why, sizeof c->why, "%s %s: no configuration is valid", f->name, keytext);
    return KTUNE_ERROR_NO_CONFIG;
}

ktune_status ktune__select(const ktune_family *f, const int64_t *key, const ktune_device *dev,
                          int *instance, ktune_choice *choice)
{
    /* the launch path: a key answered before, no lock, no text (unless KTUNE_LOG=debug or
     * KTUNE_FORCE asks for it on every call) */
    if (!choice && atomic_load_explicit(&env_ready, memory_order_acquire) && !log_debug &&
        !force_spec[0] && memo_find(f, dev, key, instance))
        return KTUNE_OK;
    ktune_choice local;
    ktune_choice *c = choice ? choice : &local;
    pthread_mutex_lock(&select_lock);
    env_load();
    vote_ranking rk = {0};
    ktune_status st = select_locked(f, key, dev, instance, c, log_debug ? &rk : NULL);
    if (st == KTUNE_OK && !choice && !force_spec[0]) {
        int known;
        if (!memo_find(f, dev, key, &known))
            memo_put(f, dev, key, *instance);
    }
    if (log_debug) {
        fprintf(stderr, "ktune: %s -> %s (%s)\n", c->why, st == KTUNE_OK ? c->config : "error",
                st == KTUNE_OK ? ktune_reason_string(c->reason) : ktune_status_string(st));
        /* the vote's lowest scores, each as the time they predict against the pick's */
        for (int e = 0; st == KTUNE_OK && e < rk.n; e++)
            fprintf(stderr, "ktune:   vote %d: %s, %.3fx the pick's time\n", e + 1,
                    f->instances[rk.instance[e]].name, exp(rk.score[e] - rk.score[0]));
    }
    if (st == KTUNE_OK &&
        (c->reason == KTUNE_REASON_NEAREST || c->reason == KTUNE_REASON_DEFAULT) &&
        first_miss(f, key)) {
        if (!log_quiet && !log_debug) {
            /* the command that tunes the key: its dimensions as --key takes them */
            char keyarg[160];
            ktune__key_format(f, key, keyarg, sizeof keyarg);
            for (char *p = keyarg; *p; p++)
                *p = *p == ' ' ? ',' : *p;
            fprintf(stderr,
                    "ktune: warning: %s -> %s; to tune it: ktune sweep %s --key '%s' --apply\n",
                    c->why, c->config, f->name, keyarg);
        }
        if (untuned_path[0]) {
            FILE *out = fopen(untuned_path, "a");
            if (out) {
                char keytext[160];
                ktune__key_format(f, key, keytext, sizeof keytext);
                fprintf(out, "%s %s\n", f->name, keytext);
                fclose(out);
            }
        }
    }
    pthread_mutex_unlock(&select_lock);
    return st;
}
