#define _POSIX_C_SOURCE 200809L
#include "sweep.h"

#include "apply.h"
#include "journal.h"
#include "search.h"
#include "syncer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Configs a window of the screen measures at most (one X request; the worker's limit). */
#define KTUNE_SCREEN_BATCH KTUNE_PROTOCOL_MAX_CONFIGS

/* A measurement whose MAD is above this fraction of its median counts as noisy. */
#define KTUNE_NOISY_SPREAD 0.05

typedef ktune_sweep_trial trial;

void ktune_limits_from(const ktune_hello *d, int64_t *limits)
{
    int i = 0;
#define KTUNE_LIMIT_COPY(name, type, what) limits[i++] = (int64_t)d->name;
    KTUNE_DEVICE_LIMIT_MAP(KTUNE_LIMIT_COPY)
#undef KTUNE_LIMIT_COPY
}

/* The end of a shape, a block of final.csv: the fastest config by its first time, and those within
 * final_margin of it or KTUNE_NOISE_FLOOR_US, whichever is wider (at most `top` in all), the
 * default and the committed config are re-measured interleaved; the fastest of every other variant
 * joins the block for the runner-ups (re-measured too when within the margin), ranked after the
 * re-measured ones with its first time. The winner is the fastest re-measured config, ties going
 * to the first declared. fixed: the default and the committed config (ktune_final_fixed). */
static int final_round(const ktune_sweep_opts *o, ktune_worker *w, const int64_t *key,
                       const trial *row, const int fixed[2], FILE *final, ktune_syncer *syncer,
                       int *interrupted, ktune_err *err)
{
    const ktune_space *s = o->space;
    ktune_final_pick picks[KTUNE_FINAL_MAX_PICKS];
    const int n = ktune_final_picks(s, row, o->top, o->final_margin, fixed, picks);
    char keytext[256], line[8192];
    ktune_space_key_format(s, key, keytext, sizeof keytext);
    if (n == 0) {
        snprintf(line, sizeof line, "%s,-,0,0,0,0,0,0\n", keytext);
        ktune_journal_write(syncer, final, line);
        return 0;
    }
    /* even a single config is re-measured: a recorded time is always the final round's, taken as
     * verify and bench take theirs */
    int remeasure = 0;
    for (int i = 0; i < n; i++)
        remeasure += picks[i].remeasured;
    /* Two interleaved rounds: the first ranks, the second times. A time taken by the round that
     * picked the fastest of several is biased low (the winner is the one the noise favoured), and
     * a record so taken is one that later measurements, verify's included, find slower. */
    for (int round = 0; round < 2 && remeasure > 0; round++) {
        const char *names[KTUNE_FINAL_MAX_PICKS];
        int at[KTUNE_FINAL_MAX_PICKS], nnames = 0;
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
        /* on any failure the times before stand */
        for (int i = 0; kind == KTUNE_REPLY_OK && a.status == KTUNE_TRIAL_OK && i < nnames; i++) {
            picks[at[i]].us = a.entries[i].median_us;
            picks[at[i]].spread = a.entries[i].spread;
        }
        if (round == 0)
            ktune_final_rank(picks, n);
    }
    if (remeasure == 0)
        ktune_final_rank(picks, n);
    /* a key of a few microseconds: the winner and the config verify holds it against (the
     * default; the next where the winner is the default) timed again, alone, as verify
     * re-measures such a key (ktune_worker_measure_alone), and with them the committed config,
     * which apply compares with the winner and whose record it may refresh; on any failure the
     * times before stand */
    if (picks[0].remeasured && picks[0].us < KTUNE_ALONE_BELOW_US) {
        int partner = n > 1 ? 1 : -1;
        for (int i = 1; i < n; i++)
            if (picks[i].is_default)
                partner = i;
        int at[3] = {0}, nnames = 0;
        const char *names[3];
        for (int i = 0; i < n && nnames < 3; i++)
            if (i == 0 || i == partner || (picks[i].is_committed && picks[i].remeasured)) {
                at[nnames] = i;
                names[nnames++] = s->configs[picks[i].config].name;
            }
        ktune_answer a;
        ktune_reply_kind kind;
        ktune_err why;
        if (ktune_worker_measure_alone(&w->opts, s->nkey, key, names, nnames,
                                       o->config_timeout_s * (nnames + 1), &a, &kind, &w->start_s,
                                       &why)) {
            fprintf(stderr, "ktune: %s: not timed alone (%s): its times are the round's\n",
                    keytext, why.msg);
            kind = KTUNE_REPLY_CRASHED;
        }
        if (kind == KTUNE_REPLY_INTERRUPTED) {
            *interrupted = 1;
            return 0;
        }
        int ok = kind == KTUNE_REPLY_OK && a.status == KTUNE_TRIAL_OK;
        for (int i = 0; i < nnames; i++)
            ok = ok && a.entries[i].status == KTUNE_TRIAL_OK;
        for (int i = 0; ok && i < nnames; i++) {
            picks[at[i]].us = a.entries[i].median_us;
            picks[at[i]].spread = a.entries[i].spread;
        }
    }
    for (int i = 0; i < n; i++) { /* a block cut short by a kill is not loaded: one sync */
        snprintf(line, sizeof line, "%s,%s,%d,%d,%.4f,%.5f,%d,%d\n", keytext,
                 s->configs[picks[i].config].name, i + 1, n, picks[i].us, picks[i].spread,
                 picks[i].is_default, picks[i].is_committed);
        ktune_journal_line(final, line);
    }
    ktune_journal_sync(syncer, final);
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
    double start = ktune_now_s();
    char path[4096], log_path[4096];
    /* the worker starts before anything is written: no device, no run folder */
    ktune_worker_opts wopts = o->worker;
    wopts.log_path = NULL;
    char start_state[256], end_state[256];
    FILE *state_query = NULL;
    int started = ktune_worker_start(&w, &wopts, err);
    if (started == KTUNE_WORKER_NO_DEVICE)
        return KTUNE_SWEEP_NO_DEVICE;
    if (started != 0)
        return -1;
    /* asked by the UUID the worker found at its device number */
    ktune_gpu_state_read(ktune_gpu_state_query(w.device.uuid), start_state, sizeof start_state);
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
    if (ktune_meta_write(o, &w.device, start_state, err))
        goto cleanup;

    size_t ntrials = (size_t)s->nshapes * (size_t)s->nconfigs;
    trials = calloc(ntrials ? ntrials : 1, sizeof *trials);
    snprintf(path, sizeof path, "%s/trials.csv", o->run_dir);
    int fresh = access(path, F_OK) != 0;
    ktune_journal_trim(path);
    ktune_journal_load(path, s, trials);
    journal = fopen(path, "a");
    snprintf(path, sizeof path, "%s/final.csv", o->run_dir);
    int fresh_final = access(path, F_OK) != 0;
    ktune_journal_trim(path);
    if (!fresh_final && ktune_final_load(o->run_dir, s, &done_rows, &ndone_rows, err))
        goto cleanup;
    final = fopen(path, "a");
    if (!journal || !final) {
        ktune_fail(err, "%s: cannot write the journal", o->run_dir);
        goto cleanup;
    }
    if (fresh)
        ktune_journal_write(syncer, journal, "key,config,status,median_us,spread,samples,detail\n");
    if (fresh_final)
        ktune_journal_write(syncer, final, "key,config,rank,of,us,spread,is_default,is_committed\n");

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
    double measure_start = ktune_now_s();
    int budget_spent = 0;
    for (int si = 0; si < s->nshapes && !interrupted && !budget_spent; si++) {
        if (si % o->shards != o->shard)
            continue;
        if (o->run_budget_s > 0 && ktune_now_s() - start > o->run_budget_s) {
            budget_spent = 1;
            break;
        }
        if (si + o->shards >= s->nshapes) /* the last shape: the state at the end, meanwhile */
            state_query = ktune_gpu_state_query(w.device.uuid);
        double shape_start = ktune_now_s();
        const int64_t *key = s->shapes[si].key;
        trial *row = &trials[(size_t)si * (size_t)s->nconfigs];
        char keytext[256];
        ktune_space_key_format(s, key, keytext, sizeof keytext);
        int best = -1, since_best = 0, shape_measured = 0, fixed[2];
        ktune_final_fixed(s, committed, key, limits, fixed);
        ktune_search_order(s, o->seed, si, order);
        ktune_search_fixed_first(s, fixed, order);
        int oi = 0;
        while (oi < s->nconfigs && !interrupted) {
            if ((o->patience > 0 && since_best >= o->patience) ||
                (o->shape_budget_s > 0 && ktune_now_s() - shape_start > o->shape_budget_s)) {
                for (; oi < s->nconfigs; oi++)
                    skipped += row[order[oi]].status == KTUNE_TRIAL_NONE;
                break;
            }
            /* a window of the order (search.h) */
            const int cap = ktune_search_cap(o->shape_budget_s, ktune_now_s() - shape_start,
                                             shape_measured);
            int todo_configs[KTUNE_SCREEN_BATCH], ntodo = 0;
            const int end = ktune_search_window(s, key, limits, row, order, oi, cap,
                                                o->patience > 0 ? o->patience - since_best : 0,
                                                todo_configs, &ntodo);
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
                    ktune_journal_trial(journal, keytext, s, ci, &row[ci], 0, invalid, clean);
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
                    ktune_journal_trial(journal, keytext, s, ci, t, samples[k], details[k], clean);
                    k++;
                    if (o->verbose && t->status != KTUNE_TRIAL_OK && t->status != KTUNE_TRIAL_INVALID)
                        fprintf(stderr, "%sktune: %s %s: %s: %s\n", tty ? "\r\033[K" : "",
                                keytext, s->configs[ci].name, ktune_trial_status_names[t->status], clean);
                }
                counts[t->status]++;
                noisy += t->status == KTUNE_TRIAL_OK && t->spread > KTUNE_NOISY_SPREAD;
                ktune_search_note(row, ci, &best, &since_best);
            }
            ktune_journal_sync(syncer, journal);
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
        double elapsed = ktune_now_s() - measure_start;
        double eta = measured > 0 ? elapsed / measured * (todo - measured) : -1;
        progress(tty, si + 1, s->nshapes, keytext, best >= 0 ? s->configs[best].name : "-",
                 best >= 0 ? row[best].us : 0, eta);
    }
    if (tty)
        fprintf(stderr, "\n");
    if (!state_query) /* stopped before the last shape */
        state_query = ktune_gpu_state_query(w.device.uuid);

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
    ktune_gpu_state_read(state_query, end_state, sizeof end_state);
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
                     skipped, w.restarts, ktune_now_s() - start, tuned ? exp(log_gain / tuned) : 1.0);
    if (spent.answered) {
        const double wall = ktune_now_s() - start;
        const ktune_stats_answer *t = &spent.total;
        const double in_worker =
            t->busy - t->timed - t->warmup - t->prepare - t->check - t->flush - t->rest;
        ktune_buf_printf(&summary,
                         "ktune: %.1f s of the %.1f s in timed samples: sweep overhead %.1f%%; "
                         "the rest: checks %.1f s (their launches %.1f s), L2 flushes %.1f s, "
                         "warm-ups %.1f s, inputs %.1f s, rests before precise rounds and "
                         "between their samples %.1f s, waits and graphs in the worker %.1f s "
                         "(graphs %.1f s, mostly while the GPU ran; the worker waited for the GPU "
                         "%.1f s), outside the worker %.1f s (worker starts %.1f s, requests, the "
                         "journal)\n",
                         t->timed, wall, wall > 0 ? 100 * (wall - t->timed) / wall : 0.0, t->check,
                         t->probe, t->flush, t->warmup, t->prepare, t->rest, in_worker, t->graph,
                         t->wait, wall - t->busy, w.start_s);
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
