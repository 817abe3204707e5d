#define _POSIX_C_SOURCE 200809L
#include "sweep.h"

#include "apply.h"
#include "syncer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef ktune_trial_status trial_status;
#define status_names ktune_trial_status_names

/* Configs a window of the screen measures at most (one X request; the worker's limit). */
#define KTUNE_SCREEN_BATCH KTUNE_PROTOCOL_MAX_CONFIGS

/* A measurement whose MAD is above this fraction of its median counts as noisy. */
#define KTUNE_NOISY_SPREAD 0.05

typedef struct {
    trial_status status;
    float us, spread;
} trial;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void ktune_limits_from(const ktune_hello *d, int64_t *limits)
{
    int i = 0;
#define KTUNE_LIMIT_COPY(name, type, what) limits[i++] = (int64_t)d->name;
    KTUNE_DEVICE_LIMIT_MAP(KTUNE_LIMIT_COPY)
#undef KTUNE_LIMIT_COPY
}

/* The state of GPU gpu (SM and memory clocks, temperature, power) as nvidia-smi reports it
 * through NVML: the query starts now and runs while the caller goes on, gpu_state_read takes its
 * answer. (nvidia-smi took 35 to 70 ms on an H100 host: the two queries of a sweep, one after
 * the other, were 0.1 s of an exhaustive softmax sweep's 3 s overhead.) NULL: it could not
 * start. */
static FILE *gpu_state_query(int gpu)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw "
             "--format=csv,noheader -i %d 2>/dev/null",
             gpu);
    return popen(cmd, "re");
}

/* The answer to query (closed here), or a word on why there is none. */
static void gpu_state_read(FILE *query, char *out, size_t size)
{
    snprintf(out, size, "unavailable: nvidia-smi (NVML) did not answer");
    if (!query)
        return;
    char line[256];
    if (fgets(line, sizeof line, query) && strchr(line, ',')) {
        line[strcspn(line, "\n")] = '\0';
        for (char *c = line; *c; c++)
            if (*c == '"' || *c == '\\')
                *c = ' ';
        snprintf(out, size, "SM, memory clocks, temperature C, power: %.200s", line);
    }
    pclose(query);
}

/* The order a shape's configs are tried in: declared, or shuffled by a generator seeded with the
 * seed and the shape (so a resumed run repeats it). */
static void config_order(const ktune_sweep_opts *o, int shape, int *order)
{
    int n = o->space->nconfigs;
    for (int i = 0; i < n; i++)
        order[i] = i;
    if (!o->seed)
        return;
    uint64_t x = (uint64_t)o->seed * 0x9e3779b97f4a7c15ULL + (uint64_t)shape + 1;
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

/* Cuts a file back to its last newline: a line cut short by a kill is dropped. */
static void trim_partial_line(const char *path)
{
    ktune_err ignored;
    size_t len;
    char *data = ktune_file_read(path, &len, &ignored);
    if (!data)
        return;
    size_t keep = len;
    while (keep > 0 && data[keep - 1] != '\n')
        keep--;
    free(data);
    if (keep != len && truncate(path, (off_t)keep) != 0)
        fprintf(stderr, "ktune: cannot trim %s\n", path);
}

/* The lines of one answer of the worker (a window of the screen, a final round) are flushed
 * together as soon as they are known, so a killed sweep loses nothing that was measured; then
 * the syncer puts the file on disk (fsync) while the next measurement runs. */
static void journal_line(FILE *f, const char *line) { fputs(line, f); }

static void journal_sync(ktune_syncer *syncer, FILE *f)
{
    fflush(f);
    ktune_syncer_request(syncer, fileno(f));
}

static void journal_write(ktune_syncer *syncer, FILE *f, const char *line)
{
    journal_line(f, line);
    journal_sync(syncer, f);
}

static void sanitize(char *s)
{
    for (; *s; s++)
        if (*s == ',' || *s == '\n' || *s == '\r')
            *s = ';';
}

/* Writes the journal line of config ci of the shape keytext (t: what became of it), its detail
 * sanitized into clean. */
static void journal_trial(FILE *journal, const char *keytext, const ktune_space *s, int ci,
                          const trial *t, int samples, const char *detail, char clean[1024])
{
    char line[8192];
    snprintf(clean, 1024, "%s", detail);
    sanitize(clean);
    snprintf(line, sizeof line, "%s,%s,%s,%.4f,%.5f,%d,%s\n", keytext, s->configs[ci].name,
             status_names[t->status], t->status == KTUNE_TRIAL_OK ? t->us : INFINITY,
             t->status == KTUNE_TRIAL_OK ? t->spread : 0.0f, samples, clean);
    journal_line(journal, line);
}

/* Loads trials.csv into the trials table. A line that does not parse (or names a shape or a
 * config this sweep does not have) is not loaded: its trial is measured again. */
static void journal_load(const char *path, const ktune_space *s, trial *trials)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[4096];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        char *nl = strchr(line, '\n');
        lineno++;
        if (!nl || lineno == 1)
            continue;
        *nl = '\0';
        ktune_trial_line t;
        ktune_err ignored;
        if (ktune_trial_parse(s, line, path, lineno, &t, &ignored))
            continue;
        int lo = 0, hi = s->nshapes - 1, si = -1;
        while (lo <= hi) {
            int mid = (lo + hi) / 2, c = ktune_space_key_compare(s, s->shapes[mid].key, t.key);
            if (c == 0) {
                si = mid;
                break;
            }
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid - 1;
        }
        if (si < 0)
            continue;
        trial *row = &trials[(size_t)si * (size_t)s->nconfigs + (size_t)t.config];
        row->status = t.status;
        row->us = (float)t.us;
        row->spread = (float)t.spread;
    }
    fclose(f);
}

/* state: the GPU's at the start (gpu_state_read's). */
static int write_meta(const ktune_sweep_opts *o, const ktune_hello *d, const char *state,
                      ktune_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/meta.yaml", o->run_dir);
    ktune_run_info old;
    ktune_err ignored;
    if (access(path, F_OK) == 0) {
        if (ktune_run_info_load(path, &old, &ignored) != 0)
            return 0;
        if (strcmp(old.device, d->name) != 0 || old.sms != d->sms)
            return ktune_fail(err, "%s: the run was made on %s (%d SMs), this is %s (%d SMs)",
                              o->run_dir, old.device, old.sms, d->name, d->sms);
        if (strcmp(old.search, o->staged ? "staged" : "exhaustive") != 0)
            return ktune_fail(err, "%s: the run was made with --search %s; resume it with the "
                              "same command", o->run_dir, old.search);
        return 0; /* resuming: keep the first metadata */
    }
    char driver[64] = "unknown";
    FILE *v = fopen("/proc/driver/nvidia/version", "r");
    if (v) {
        /* "NVRM version: NVIDIA UNIX ... Kernel Module ... 580.65.06  <date>": the first
         * token of digits and dots with at least one dot */
        char line[512], *save = NULL;
        if (fgets(line, sizeof line, v))
            for (char *tok = strtok_r(line, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
                if (strspn(tok, "0123456789.") == strlen(tok) && strchr(tok, '.') && tok[0] != '.') {
                    snprintf(driver, sizeof driver, "%s", tok);
                    break;
                }
        fclose(v);
    }
    time_t t = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&t));
    const char *base = strrchr(o->run_dir, '/');
    base = base ? base + 1 : o->run_dir;
    char flags[1024], command[2048];
    snprintf(flags, sizeof flags, "%s", o->flags ? o->flags : "");
    snprintf(command, sizeof command, "%s", o->command_line ? o->command_line : "");
    for (char *p = flags; *p; p++)
        if (*p == '"' || *p == '\\')
            *p = '\'';
    for (char *p = command; *p; p++)
        if (*p == '"' || *p == '\\')
            *p = '\'';
    ktune_buf b = {0};
    ktune_buf_printf(&b, "# Generated by ktune sweep. DO NOT EDIT.\n");
    ktune_buf_printf(&b, "name: \"%s\"\nfamily: \"%s\"\ndevice: \"%s\"\nsms: %d\ncc: %d\n", base,
                     o->space->family, d->name, d->sms, d->cc);
    ktune_buf_printf(&b, "driver: \"%s\"\ncuda: \"%s\"\nsource: \"%s\"\ndate: \"%s\"\n", driver,
                     d->runtime, o->source_rev ? o->source_rev : "unknown", date);
    ktune_buf_printf(&b, "cuda_driver_api: \"%s\"\nl2_bytes: %lld\nsmem_per_block: %lld\n",
                     d->driver_api, (long long)d->l2_bytes, (long long)d->smem_per_block);
    ktune_buf_printf(&b, "flags: \"%s\"\ncommand: \"%s\"\n", flags, command);
    ktune_buf_printf(&b, "search: \"%s\"\n", o->staged ? "staged" : "exhaustive");
    if (o->staged)
        ktune_buf_printf(&b, "screen_samples: %d\nscreen_min_sample_us: %g\nscreen_cut: %g\n",
                         o->worker.screen_samples, o->worker.screen_min_sample_us,
                         o->worker.screen_cut);
    ktune_buf_printf(&b, "top: %d\nfinal_margin: %g\n", o->top, o->final_margin);
    ktune_buf_printf(&b, "samples: %d\nmin_sample_us: %g\nwarmup_us: %g\nconfig_timeout_s: %g\n",
                     o->worker.samples, o->worker.min_sample_us, o->worker.warmup_us,
                     o->config_timeout_s);
    ktune_buf_printf(&b, "seed: %u\npatience: %d\nshard: \"%d/%d\"\n", o->seed, o->patience,
                     o->shard, o->shards);
    ktune_buf_printf(&b, "gpu_state_start: \"%s\"\n", state);
    int rc = ktune_file_write_if_changed(path, b.data, b.len, err) < 0 ? -1 : 0;
    ktune_buf_free(&b);
    return rc;
}

typedef struct {
    int config;
    double us, spread;
    int is_default, is_committed;
    int remeasured; /* in the final round's interleaved measurement (else: its first time) */
} final_pick;

/* Re-measured picks first, then the others; faster first; then in declared order. */
static int pick_cmp(const void *a, const void *b)
{
    const final_pick *x = a, *y = b;
    if (x->remeasured != y->remeasured)
        return y->remeasured - x->remeasured;
    if (x->us != y->us)
        return x->us < y->us ? -1 : 1;
    return x->config - y->config;
}

/* Adds config c to the picks unless it is there; returns its index. */
static int pick_add(final_pick *picks, int *n, int c, const trial *row, int remeasure)
{
    int i = 0;
    while (i < *n && picks[i].config != c)
        i++;
    if (i == *n)
        picks[(*n)++] = (final_pick){c, row[c].us, row[c].spread, 0, 0, 0};
    picks[i].remeasured |= remeasure;
    return i;
}

/* The configs that the final round of key re-measures whatever their first times: [0] the
 * default, [1] the committed one (-1: none). */
static void final_fixed(const ktune_space *s, const ktune_registry *committed_reg,
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

/* The end of a shape, a block of final.csv: the fastest config by its first time, and those within
 * final_margin of it or KTUNE_NOISE_FLOOR_US, whichever is wider (at most `top` in all), the
 * default and the committed config are re-measured interleaved; the fastest of every other variant
 * joins the block for the runner-ups (re-measured too when within the margin), ranked after the
 * re-measured ones with its first time. The winner is the fastest re-measured config, ties going
 * to the first declared. fixed: the default and the committed config (final_fixed). */
static int final_round(const ktune_sweep_opts *o, ktune_worker *w, const int64_t *key,
                       const trial *row, const int fixed[2], FILE *final, ktune_syncer *syncer,
                       int *interrupted, ktune_err *err)
{
    const ktune_space *s = o->space;
    final_pick picks[64];
    int n = 0, fastest = -1;
    for (int c = 0; c < s->nconfigs; c++)
        if (row[c].status == KTUNE_TRIAL_OK && (fastest < 0 || row[c].us < row[fastest].us))
            fastest = c;
    /* the margin, or the absolute noise floor where that is wider (kernels of a few us) */
    const double within = fastest >= 0 ? fmax(row[fastest].us * (1 + o->final_margin),
                                               row[fastest].us + KTUNE_NOISE_FLOOR_US)
                                       : 0;
    /* the fastest `top` within the margin, by their first times */
    for (int k = 0; k < o->top && n < 60; k++) {
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
    char keytext[256], line[8192];
    ktune_space_key_format(s, key, keytext, sizeof keytext);
    if (n == 0) {
        snprintf(line, sizeof line, "%s,-,0,0,0,0,0,0\n", keytext);
        journal_write(syncer, final, line);
        return 0;
    }
    /* a staged search re-measures even a single config: its first time is only the screen's */
    int remeasure = 0;
    for (int i = 0; i < n; i++)
        remeasure += picks[i].remeasured;
    if (remeasure > 1 || (remeasure == 1 && o->staged)) {
        const char *names[64];
        int at[64], nnames = 0;
        for (int i = 0; i < n; i++)
            if (picks[i].remeasured) {
                at[nnames] = i;
                names[nnames++] = s->configs[picks[i].config].name;
            }
        ktune_answer a;
        ktune_reply_kind kind;
        if (ktune_worker_interleave(w, s->nkey, key, names, nnames,
                                    o->config_timeout_s * (remeasure + 1), &a, &kind, err))
            return -1;
        if (kind == KTUNE_REPLY_INTERRUPTED) {
            *interrupted = 1;
            return 0;
        }
        /* on any failure the first times stand */
        for (int i = 0; kind == KTUNE_REPLY_OK && a.status == KTUNE_TRIAL_OK && i < nnames; i++) {
            picks[at[i]].us = a.entries[i].median_us;
            picks[at[i]].spread = a.entries[i].spread;
        }
    }
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
    final_pick first = picks[win];
    memmove(picks + 1, picks, sizeof *picks * (size_t)win);
    picks[0] = first;
    for (int i = 0; i < n; i++) { /* a block cut short by a kill is not loaded: one sync */
        snprintf(line, sizeof line, "%s,%s,%d,%d,%.4f,%.5f,%d,%d\n", keytext,
                 s->configs[picks[i].config].name, i + 1, n, picks[i].us, picks[i].spread,
                 picks[i].is_default, picks[i].is_committed);
        journal_line(final, line);
    }
    journal_sync(syncer, final);
    return 0;
}

/* Where the workers' time went, as the STATS request reports it (KTUNE_STATS_FIELDS). */
typedef struct {
    ktune_stats_answer total, last;
    int last_restarts, answered;
} spent_tally;

/* Adds what the worker spent since the last ask (since it started, when it was restarted). */
static void spent_update(ktune_worker *w, spent_tally *t, int *interrupted)
{
    ktune_answer a;
    ktune_reply_kind kind;
    ktune_err ignored;
    if (ktune_worker_stats(w, 10, &a, &kind, &ignored))
        return;
    if (kind == KTUNE_REPLY_INTERRUPTED)
        *interrupted = 1;
    if (kind != KTUNE_REPLY_OK || a.status != KTUNE_TRIAL_OK)
        return;
    if (w->restarts != t->last_restarts) {
        memset(&t->last, 0, sizeof t->last);
        t->last_restarts = w->restarts;
    }
#define KTUNE_SPENT_ADD(name, format, what)                                                        \
    t->total.name += a.stats.name - t->last.name;                                                  \
    t->last.name = a.stats.name;
    KTUNE_STATS_FIELDS(KTUNE_SPENT_ADD)
#undef KTUNE_SPENT_ADD
    t->answered = 1;
}

/* One config of key by a T request: verified, then timed with the screen's samples (a crash,
 * a hang and a lost context are recorded here). */
static int measure_one(const ktune_sweep_opts *o, ktune_worker *w, const int64_t *key, int ci,
                       trial *t, char *detail, size_t size, int *samples, int *interrupted,
                       ktune_err *err)
{
    const ktune_space *s = o->space;
    ktune_answer a;
    ktune_reply_kind kind;
    if (ktune_worker_trial(w, s->nkey, key, s->configs[ci].name, o->config_timeout_s, &a, &kind,
                           err))
        return -1;
    *samples = 0;
    if (kind == KTUNE_REPLY_INTERRUPTED) {
        *interrupted = 1;
        detail[0] = '\0';
        return 0;
    }
    /* a crash, a hang, an answer that does not parse: failed, or timeout, with the reason */
    t->status = a.n == 1 ? a.entries[0].status : a.status;
    t->us = a.n == 1 ? (float)a.entries[0].median_us : 0;
    t->spread = a.n == 1 ? (float)a.entries[0].spread : 0;
    if (t->status == KTUNE_TRIAL_OK)
        *samples = a.entries[0].samples;
    snprintf(detail, size, "%s", t->status == KTUNE_TRIAL_OK ? "" : a.detail);
    return 0;
}

/* Configs cs[0..n) of key, measured by one X request (a window of the screen: fewer waits on the
 * GPU, one answer; best_us, the shape's fastest so far or 0, sets where the screen cuts; the
 * configs of `fixed` marked for the final round), then by T each config the window did not
 * settle: every one when the worker crashed, hung or lost its context, else those not ok, whose
 * details only T gives. window_send sends the X request (none for a single config: returns 0,
 * else 1, or -1 on an error); window_finish takes its answer (sent: window_send's return). */
static int window_send(const ktune_sweep_opts *o, ktune_worker *w, const int64_t *key,
                       const int *cs, int n, double best_us, const int fixed[2], ktune_err *err)
{
    const ktune_space *s = o->space;
    if (n <= 1)
        return 0;
    const char *names[KTUNE_SCREEN_BATCH];
    unsigned char pinned[KTUNE_SCREEN_BATCH];
    for (int i = 0; i < n; i++) {
        names[i] = s->configs[cs[i]].name;
        pinned[i] = cs[i] == fixed[0] || cs[i] == fixed[1];
    }
    return ktune_worker_screen_post(w, s->nkey, key, best_us, names, pinned, n, err) ? -1 : 1;
}

static int window_finish(const ktune_sweep_opts *o, ktune_worker *w, const int64_t *key,
                         const int *cs, int n, int sent, trial *row, char (*details)[1024],
                         int *samples, int *interrupted, ktune_err *err)
{
    int settled[KTUNE_SCREEN_BATCH] = {0};
    if (sent) {
        ktune_answer a;
        ktune_reply_kind kind;
        ktune_worker_collect(w, o->config_timeout_s * (1 + n / 8.0), &a, &kind);
        if (kind == KTUNE_REPLY_INTERRUPTED) {
            *interrupted = 1;
            return 0;
        }
        for (int i = 0; kind == KTUNE_REPLY_OK && a.status == KTUNE_TRIAL_OK && i < n; i++) {
            if (a.entries[i].status != KTUNE_TRIAL_OK)
                continue;
            trial *t = &row[cs[i]];
            t->status = KTUNE_TRIAL_OK;
            t->us = (float)a.entries[i].median_us;
            t->spread = (float)a.entries[i].spread;
            samples[i] = a.entries[i].samples;
            details[i][0] = '\0';
            settled[i] = 1;
        }
    }
    for (int i = 0; i < n && !*interrupted; i++)
        if (!settled[i] && measure_one(o, w, key, cs[i], &row[cs[i]], details[i],
                                       sizeof details[i], &samples[i], interrupted, err))
            return -1;
    return 0;
}

static void progress(int tty, int done, int total, const char *keytext, const char *best,
                     double best_us, double eta)
{
    char eta_text[32] = "?";
    if (eta >= 0)
        snprintf(eta_text, sizeof eta_text, "%dm%02ds", (int)eta / 60, (int)eta % 60);
    if (tty)
        fprintf(stderr, "\r\033[K[%d/%d] %s  best %s %.2f us  ETA %s", done, total, keytext,
                best, best_us, eta_text);
    else
        fprintf(stderr, "ktune: [%d/%d] %s: best %s %.2f us, ETA %s\n", done, total, keytext,
                best, best_us, eta_text);
}

int ktune_sweep_run(const ktune_sweep_opts *o, ktune_err *err)
{
    const ktune_space *s = o->space;
    ktune_worker w;
    ktune_registry committed_reg, *committed = NULL;
    int rc = -1, interrupted = 0;
    FILE *journal = NULL, *final = NULL;
    ktune_syncer *syncer = NULL;
    trial *trials = NULL;
    int *order = NULL;
    ktune_final_row *done_rows = NULL;
    int ndone_rows = 0;
    double start = now_s();
    char path[4096], log_path[4096];
    /* the worker starts before anything is written: no device, no run folder */
    ktune_worker_opts wopts = o->worker;
    wopts.log_path = NULL;
    char start_state[256], end_state[256];
    FILE *state_query = gpu_state_query(o->worker.device); /* while the worker starts */
    int started = ktune_worker_start(&w, &wopts, err);
    gpu_state_read(state_query, start_state, sizeof start_state);
    state_query = NULL;
    if (started == KTUNE_WORKER_NO_DEVICE)
        return KTUNE_SWEEP_NO_DEVICE;
    if (started != 0)
        return -1;
    if (!ktune_is_safe_text(w.device.name, 200)) {
        ktune_worker_stop(&w);
        return ktune_fail(err, "the device's name holds characters a run folder or a table may not "
                               "hold (printable ASCII without \\ \" ' ` [ ] ( ) , $ # /* */ ??, "
                               "at most 200)");
    }
    if (ktune_mkdirs(o->run_dir, err)) {
        ktune_worker_stop(&w);
        return -1;
    }
    snprintf(log_path, sizeof log_path, "%s/worker.log", o->run_dir);
    w.opts.log_path = log_path; /* restarted workers log there */
    syncer = ktune_syncer_start(); /* NULL: each sync on the spot */
    int64_t limits[KTUNE_NLIMITS];
    ktune_limits_from(&w.device, limits);
    if (o->registry_dir) {
        char slug[256];
        ktune_device_slug(w.device.name, slug, sizeof slug, '-');
        snprintf(path, sizeof path, "%s/%s/%s.yaml", o->registry_dir, slug, s->family);
        if (access(path, F_OK) == 0) {
            if (ktune_registry_load(path, s, &committed_reg, err))
                goto cleanup;
            committed = &committed_reg;
        }
    }
    if (write_meta(o, &w.device, start_state, err))
        goto cleanup;

    size_t ntrials = (size_t)s->nshapes * (size_t)s->nconfigs;
    trials = calloc(ntrials ? ntrials : 1, sizeof *trials);
    snprintf(path, sizeof path, "%s/trials.csv", o->run_dir);
    int fresh = access(path, F_OK) != 0;
    trim_partial_line(path);
    journal_load(path, s, trials);
    journal = fopen(path, "a");
    snprintf(path, sizeof path, "%s/final.csv", o->run_dir);
    int fresh_final = access(path, F_OK) != 0;
    trim_partial_line(path);
    if (!fresh_final && ktune_final_load(o->run_dir, s, &done_rows, &ndone_rows, err))
        goto cleanup;
    final = fopen(path, "a");
    if (!journal || !final) {
        ktune_fail(err, "%s: cannot write the journal", o->run_dir);
        goto cleanup;
    }
    if (fresh)
        journal_write(syncer, journal, "key,config,status,median_us,spread,samples,detail\n");
    if (fresh_final)
        journal_write(syncer, final, "key,config,rank,of,us,spread,is_default,is_committed\n");

    int tty = isatty(2) && !getenv("KTUNE_PLAIN_PROGRESS");
    spent_tally spent = {.last_restarts = w.restarts};
    int counts[KTUNE_TRIAL_COUNT] = {0};
    int measured = 0, todo = 0, skipped = 0, noisy = 0;
    order = malloc(sizeof *order * (size_t)(s->nconfigs ? s->nconfigs : 1));
    for (size_t i = 0; i < ntrials; i++)
        todo += trials[i].status == KTUNE_TRIAL_NONE &&
                (int)(i / (size_t)s->nconfigs) % o->shards == o->shard &&
                ktune_space_valid(s, &s->configs[i % (size_t)s->nconfigs],
                                  s->shapes[i / (size_t)s->nconfigs].key, limits);
    double measure_start = now_s();
    int budget_spent = 0;
    for (int si = 0; si < s->nshapes && !interrupted && !budget_spent; si++) {
        if (si % o->shards != o->shard)
            continue;
        if (o->run_budget_s > 0 && now_s() - start > o->run_budget_s) {
            budget_spent = 1;
            break;
        }
        if (si + o->shards >= s->nshapes) /* the last shape: the state at the end, meanwhile */
            state_query = gpu_state_query(o->worker.device);
        double shape_start = now_s();
        const int64_t *key = s->shapes[si].key;
        trial *row = &trials[(size_t)si * (size_t)s->nconfigs];
        char keytext[256];
        ktune_space_key_format(s, key, keytext, sizeof keytext);
        int best = -1, since_best = 0, shape_measured = 0, fixed[2];
        final_fixed(s, committed, key, limits, fixed);
        config_order(o, si, order);
        int oi = 0;
        while (oi < s->nconfigs && !interrupted) {
            if ((o->patience > 0 && since_best >= o->patience) ||
                (o->shape_budget_s > 0 && now_s() - shape_start > o->shape_budget_s)) {
                for (; oi < s->nconfigs; oi++)
                    skipped += row[order[oi]].status == KTUNE_TRIAL_NONE;
                break;
            }
            /* a window of the order: at most KTUNE_SCREEN_BATCH configs to measure, no more than
             * the shape's budget has time left for at the rate so far (one, to learn the rate),
             * and no more configs that could count against the patience than it has left */
            int cap = KTUNE_SCREEN_BATCH;
            if (o->shape_budget_s > 0) {
                double spent_s = now_s() - shape_start;
                double fits = (o->shape_budget_s - spent_s) * shape_measured / spent_s;
                cap = shape_measured == 0 ? 1 : (int)fmin(KTUNE_SCREEN_BATCH, fmax(1, fits));
            }
            int todo_configs[KTUNE_SCREEN_BATCH], ntodo = 0, end = oi, counted = 0;
            while (end < s->nconfigs && ntodo < cap &&
                   (o->patience <= 0 || counted < o->patience - since_best)) {
                int ci = order[end++];
                int valid = ktune_space_valid(s, &s->configs[ci], key, limits);
                if (row[ci].status == KTUNE_TRIAL_NONE && valid)
                    todo_configs[ntodo++] = ci;
                counted += row[ci].status == KTUNE_TRIAL_NONE ? valid : row[ci].status != KTUNE_TRIAL_INVALID;
            }
            char details[KTUNE_SCREEN_BATCH][1024];
            int samples[KTUNE_SCREEN_BATCH];
            const int sent = window_send(o, &w, key, todo_configs, ntodo,
                                         best >= 0 ? row[best].us : 0, fixed, err);
            if (sent < 0)
                goto cleanup;
            /* while the worker measures: the configs that constraints exclude, most of a
             * window's, into the journal (the GPU waits for what the parent does between an
             * answer and the next request) */
            for (int j = oi, k = 0; j < end; j++) {
                const int ci = order[j];
                if (k < ntodo && todo_configs[k] == ci) {
                    k++;
                } else if (row[ci].status == KTUNE_TRIAL_NONE) {
                    row[ci].status = KTUNE_TRIAL_INVALID;
                    char invalid[256], clean[1024];
                    snprintf(invalid, sizeof invalid, "constraints of %s exclude this shape",
                             s->variants[s->configs[ci].variant].name);
                    journal_trial(journal, keytext, s, ci, &row[ci], 0, invalid, clean);
                }
            }
            if (window_finish(o, &w, key, todo_configs, ntodo, sent, row, details, samples,
                              &interrupted, err))
                goto cleanup;
            if (interrupted)
                break;
            measured += ntodo;
            shape_measured += ntodo;
            int k = 0;
            for (; oi < end; oi++) {
                int ci = order[oi];
                trial *t = &row[ci];
                if (k < ntodo && todo_configs[k] == ci) { /* measured now */
                    char clean[1024];
                    journal_trial(journal, keytext, s, ci, t, samples[k], details[k], clean);
                    k++;
                    if (o->verbose && t->status != KTUNE_TRIAL_OK && t->status != KTUNE_TRIAL_INVALID)
                        fprintf(stderr, "%sktune: %s %s: %s: %s\n", tty ? "\r\033[K" : "",
                                keytext, s->configs[ci].name, status_names[t->status], clean);
                }
                counts[t->status]++;
                noisy += t->status == KTUNE_TRIAL_OK && t->spread > KTUNE_NOISY_SPREAD;
                if (t->status == KTUNE_TRIAL_OK && (best < 0 || t->us < row[best].us)) {
                    best = ci;
                    since_best = 0;
                } else if (t->status != KTUNE_TRIAL_INVALID) {
                    since_best++;
                }
            }
            journal_sync(syncer, journal);
        }
        if (interrupted)
            break;
        int complete = 0;
        for (int i = 0; i < ndone_rows && !complete; i++)
            complete = ktune_space_key_compare(s, done_rows[i].key, key) == 0;
        if (!complete &&
            final_round(o, &w, key, row, fixed, final, syncer, &interrupted, err))
            goto cleanup;
        if (!interrupted)
            spent_update(&w, &spent, &interrupted);
        double elapsed = now_s() - measure_start;
        double eta = measured > 0 ? elapsed / measured * (todo - measured) : -1;
        progress(tty, si + 1, s->nshapes, keytext, best >= 0 ? s->configs[best].name : "-",
                 best >= 0 ? row[best].us : 0, eta);
    }
    if (tty)
        fprintf(stderr, "\n");
    if (!state_query) /* stopped before the last shape */
        state_query = gpu_state_query(o->worker.device);

    /* summary */
    free(done_rows);
    done_rows = NULL;
    fflush(final);
    if (ktune_final_load(o->run_dir, s, &done_rows, &ndone_rows, err))
        goto cleanup;
    int tuned = 0;
    double log_gain = 0;
    for (int i = 0; i < ndone_rows; i++) {
        if (done_rows[i].rank != 1)
            continue;
        tuned++;
        for (int j = 0; j < ndone_rows; j++)
            if (done_rows[j].is_default &&
                ktune_space_key_compare(s, done_rows[j].key, done_rows[i].key) == 0)
                log_gain += log(done_rows[j].us / done_rows[i].us);
    }
    gpu_state_read(state_query, end_state, sizeof end_state);
    state_query = NULL;
    ktune_buf summary = {0};
    ktune_buf_printf(&summary,
                     "ktune: %s: %d of %d shapes tuned%s; trials: %d ok, %d invalid, %d wrong, "
                     "%d failed, %d timeout, %d skipped (early stop or shape budget); worker "
                     "restarts %d; "
                     "%.1f s; gain over the default %.3fx (geomean)\n",
                     o->run_dir, tuned, (s->nshapes - o->shard + o->shards - 1) / o->shards,
                     interrupted    ? " (interrupted: re-run to resume)"
                     : budget_spent ? " (run budget spent: re-run to resume)"
                                    : "",
                     counts[KTUNE_TRIAL_OK],
                     counts[KTUNE_TRIAL_INVALID], counts[KTUNE_TRIAL_WRONG], counts[KTUNE_TRIAL_FAILED], counts[KTUNE_TRIAL_TIMEOUT],
                     skipped, w.restarts, now_s() - start, tuned ? exp(log_gain / tuned) : 1.0);
    if (spent.answered) {
        const double wall = now_s() - start;
        const ktune_stats_answer *t = &spent.total;
        const double in_worker = t->busy - t->timed - t->warmup - t->prepare - t->check - t->flush;
        ktune_buf_printf(&summary,
                         "ktune: %.1f s of the %.1f s in timed samples: sweep overhead %.1f%%; "
                         "the rest: checks %.1f s (their launches %.1f s), L2 flushes %.1f s, "
                         "warm-ups %.1f s, inputs %.1f s, waits and graphs in the worker %.1f s "
                         "(graphs %.1f s, mostly while the GPU ran; the worker waited for the GPU "
                         "%.1f s), outside the worker %.1f s (worker starts %.1f s, requests, the "
                         "journal)\n",
                         t->timed, wall, wall > 0 ? 100 * (wall - t->timed) / wall : 0.0, t->check,
                         t->probe, t->flush, t->warmup, t->prepare, in_worker, t->graph, t->wait,
                         wall - t->busy,
                         w.start_s);
    }
    if (noisy)
        ktune_buf_printf(&summary,
                         "ktune: warning: %d measurements spread more than %.0f%% (MAD/median): "
                         "the GPU was not quiet; consider re-running\n",
                         noisy, KTUNE_NOISY_SPREAD * 100);
    ktune_buf_printf(&summary, "ktune: GPU at the end: %s\n", end_state);
    fputs(summary.data, stderr);
    snprintf(path, sizeof path, "%s/summary.txt", o->run_dir);
    ktune_file_write_if_changed(path, summary.data, summary.len, err);
    ktune_buf_free(&summary);
    rc = interrupted ? KTUNE_SWEEP_INTERRUPTED : budget_spent ? KTUNE_SWEEP_BUDGET_SPENT : 0;
cleanup:
    if (state_query)
        pclose(state_query);
    ktune_syncer_stop(syncer); /* the journals on disk before they close */
    ktune_worker_stop(&w);
    if (committed)
        ktune_registry_free(committed);
    if (journal)
        fclose(journal);
    if (final)
        fclose(final);
    free(trials);
    free(done_rows);
    free(order);
    return rc;
}
