#define _POSIX_C_SOURCE 200809L
#include "verify.h"

#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apply.h"
#include "bench.h"
#include "sweep.h"

extern char **environ;

/* Recorded and re-measured times agree when within this fraction (reported, not a gate). */
#define KTUNE_AGREE 0.03

/* One comparison of a config with what it is held against: its time and spread now, and the
 * other's (the record, or the other build's or registry's config, measured now). */
typedef struct {
    double us, spread, other_us, other_spread;
    /* against the record: the reference's ratio to its own record, and its spread now (0: no
     * reference) */
    double ref_ratio, ref_spread;
} comparison;

/* The raw slowdown of a comparison. */
static double slowdown(const comparison *c) { return c->us / c->other_us; }

/* The slowdown that counts: against the record, relative to the reference's, which ran in the
 * same request (a GPU running this shape class slower than when the table was recorded, on its
 * clocks or another unit, slows both). */
static double held_slowdown(const comparison *c)
{
    return c->ref_ratio > 0 ? slowdown(c) / c->ref_ratio : slowdown(c);
}

/* The noise a slowdown must exceed to count: the larger of KTUNE_NOISE_FLOOR and twice the larger
 * spread, plus launch jitter (KTUNE_NOISE_FLOOR_US); the reference's too where it divides. */
static double noise(const comparison *c)
{
    const double one = fmax(KTUNE_NOISE_FLOOR, 2 * fmax(c->spread, c->other_spread)) +
                       KTUNE_NOISE_FLOOR_US / c->other_us;
    return c->ref_ratio > 0 ? one + fmax(KTUNE_NOISE_FLOOR, 2 * c->ref_spread) : one;
}

typedef struct {
    const ktune_space *s;
    const ktune_verify_opts *o;
    ktune_worker *w, *other; /* other: another build's worker, or NULL */
    const int64_t *limits;   /* this device's (KTUNE_NLIMITS) */
    FILE *out;
    int slower, broken, suspects, agree, measured;
    int alone;    /* entries measured alone (ktune_worker_measure_alone) */
    int restarts; /* workers started after the first: fresh ones, and the alone measurements' */
    double worst;    /* the ratio farthest from 1 of a first measurement */
    double *spreads; /* the last 4096 spreads measured (a ring) */
    int nspreads;
    char worst_key[256];
} verify_state;

/* Whether runner-up r of e can be a reference here: a config of the space whose constraints hold
 * for the key on this device (a runner-up recorded under other constraints, say a kernel that
 * needed less shared memory then, is not one). */
static int runner_up_usable(const ktune_space *s, const ktune_entry *e, int r,
                            const int64_t *limits)
{
    const int ci = ktune_space_find_config(s, e->runner_ups[r].config);
    return ci >= 0 && ktune_space_valid(s, &s->configs[ci], e->key, limits);
}

/* The first partner an entry is measured with: the default, or its first usable runner-up when it
 * is the default; with its recorded time. NULL: none (compare_once adds the other runner-ups). */
static const char *reference_of(const ktune_space *s, const ktune_entry *e, const int64_t *limits,
                                double *recorded)
{
    const int def = ktune_space_default_for(s, e->key, limits);
    if (def >= 0 && strcmp(s->configs[def].name, e->config) != 0) {
        *recorded = e->default_us;
        return s->configs[def].name;
    }
    for (int r = 0; r < e->nrunner_ups; r++)
        if (runner_up_usable(s, e, r, limits)) {
            *recorded = e->runner_ups[r].us;
            return e->runner_ups[r].config;
        }
    return NULL;
}

/* Whether answer a for configs (n of them) says one failed: 1 with why saying how (a config's
 * reason from the worker's T request), 0 when none did, -1 on an error. */
static int answer_failed(verify_state *v, ktune_worker *w, const int64_t *key,
                         const char *const *configs, int n, const ktune_answer *a, char *why,
                         size_t size, ktune_err *err)
{
    if (a->status != KTUNE_TRIAL_OK) {
        snprintf(why, size, "%s %.900s", ktune_trial_status_names[a->status], a->detail);
        return 1;
    }
    for (int i = 0; i < n; i++)
        if (a->entries[i].status != KTUNE_TRIAL_OK) {
            static ktune_answer one;
            ktune_reply_kind kind;
            if (ktune_worker_trial(w, v->s->nkey, key, configs[i], v->o->timeout_s, &one, &kind,
                                   err))
                return -1;
            snprintf(why, size, "%.100s: %s %.800s", configs[i],
                     ktune_trial_status_names[a->entries[i].status], one.detail);
            return 1;
        }
    return 0;
}

/* The times of answer a (n configs) into us and spread, and its spreads into the ring. */
static void answer_times(verify_state *v, const ktune_answer *a, int n, double *us,
                         double *spread)
{
    for (int i = 0; i < n; i++) {
        us[i] = a->entries[i].median_us;
        spread[i] = a->entries[i].spread;
        v->spreads[v->nspreads++ % 4096] = spread[i];
    }
}

/* Checks then times configs (n of them) of key interleaved in w; us and spread per config.
 * 0, 1 when the worker found a config wrong, failed or could not measure (why says so), -1 on an
 * error. */
static int measure(verify_state *v, ktune_worker *w, const int64_t *key, const char *const *configs,
                   int n, int check, double *us, double *spread, char *why, size_t size,
                   ktune_err *err)
{
    static ktune_answer a;
    ktune_reply_kind kind;
    if (check) {
        if (ktune_worker_screen_post(w, v->s->nkey, key, 0, configs, NULL, n, err))
            return -1;
        ktune_worker_collect(w, v->o->timeout_s * n, &a, &kind);
        const int failed = answer_failed(v, w, key, configs, n, &a, why, size, err);
        if (failed)
            return failed;
    }
    if (ktune_worker_interleave(w, v->s->nkey, key, configs, n, v->o->timeout_s * n, &a, &kind,
                                err))
        return -1;
    const int failed = answer_failed(v, w, key, configs, n, &a, why, size, err);
    if (failed)
        return failed;
    answer_times(v, &a, n, us, spread);
    return 0;
}

/* measure() alone (ktune_worker_measure_alone): in a worker started for it; a failed config's
 * reason comes from v's worker. */
static int measure_alone(verify_state *v, const int64_t *key, const char *const *configs, int n,
                         double *us, double *spread, char *why, size_t size, ktune_err *err)
{
    static ktune_answer a;
    ktune_reply_kind kind;
    if (ktune_worker_measure_alone(&v->w->opts, v->s->nkey, key, configs, n,
                                   v->o->timeout_s * (n + 1), &a, &kind, NULL, err))
        return -1;
    v->restarts++;
    const int failed = answer_failed(v, v->w, key, configs, n, &a, why, size, err);
    if (failed)
        return failed;
    answer_times(v, &a, n, us, spread);
    return 0;
}

/* The median of x[0..n) (reordered). */
static double median(double *x, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && x[j - 1] > x[j]; j--) {
            const double t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

/* One comparison of entry e. Against the record: e's config with its reference (alone: the two
 * measured alone, as the sweep recorded a key of a few microseconds); against a registry: e's
 * config with the other registry's for the key (other_config); against a worker: e's config in
 * each build, one after the other (first: which goes first). */
static int compare_once(verify_state *v, const ktune_entry *e, const char *reference,
                        double reference_us, const char *other_config, int first, int check,
                        int alone, comparison *c, char *why, size_t size, ktune_err *err)
{
    double us[2] = {0, 0}, sp[2] = {0, 0};
    const char *configs[2] = {e->config, NULL};
    int rc;
    memset(c, 0, sizeof *c);
    if (v->other) {
        ktune_worker *order[2] = {first ? v->w : v->other, first ? v->other : v->w};
        for (int i = 0; i < 2; i++) {
            rc = measure(v, order[i], e->key, configs, 1, check, &us[i], &sp[i], why, size, err);
            if (rc)
                return rc;
        }
        const int mine = first ? 0 : 1;
        *c = (comparison){us[mine], sp[mine], us[1 - mine], sp[1 - mine], 0, 0};
        return 0;
    }
    if (other_config) {
        configs[1] = other_config;
        if (!first) {
            configs[0] = other_config;
            configs[1] = e->config;
        }
        rc = measure(v, v->w, e->key, configs, 2, check, us, sp, why, size, err);
        if (rc)
            return rc;
        const int mine = first ? 0 : 1;
        *c = (comparison){us[mine], sp[mine], us[1 - mine], sp[1 - mine], 0, 0};
        return 0;
    }
    /* against the record: the entry with the configs of its final round that the table names
     * (the default, the runner-ups), as the round interleaved them; their ratios to their own
     * records, by their median, are the reference. Alone: the entry and its first reference only,
     * the two the sweep's final round timed alone */
    const char *names[KTUNE_RUNNER_UPS + 2];
    double recorded[KTUNE_RUNNER_UPS + 2], now[KTUNE_RUNNER_UPS + 2], spread[KTUNE_RUNNER_UPS + 2];
    int n = 0;
    names[n] = e->config;
    recorded[n++] = e->us;
    if (reference && reference_us > 0) {
        names[n] = reference;
        recorded[n++] = reference_us;
    }
    for (int r = 0; !alone && r < e->nrunner_ups && n < KTUNE_RUNNER_UPS + 2; r++) {
        int seen = !runner_up_usable(v->s, e, r, v->limits);
        for (int q = 0; q < n; q++)
            seen |= strcmp(names[q], e->runner_ups[r].config) == 0;
        if (!seen && e->runner_ups[r].us > 0) {
            names[n] = e->runner_ups[r].config;
            recorded[n++] = e->runner_ups[r].us;
        }
    }
    if (!first) { /* the entry last */
        names[0] = names[n - 1];
        names[n - 1] = e->config;
        const double t = recorded[0];
        recorded[0] = recorded[n - 1];
        recorded[n - 1] = t;
    }
    rc = alone ? measure_alone(v, e->key, names, n, now, spread, why, size, err)
               : measure(v, v->w, e->key, names, n, check, now, spread, why, size, err);
    if (rc)
        return rc;
    const int mine = first ? 0 : n - 1;
    *c = (comparison){now[mine], spread[mine], e->us, e->spread, 0, 0};
    double ratios[KTUNE_RUNNER_UPS + 2], spreads[KTUNE_RUNNER_UPS + 2];
    int m = 0;
    for (int q = 0; q < n; q++)
        if (q != mine) {
            ratios[m] = now[q] / recorded[q];
            spreads[m++] = spread[q];
        }
    if (m > 0) {
        c->ref_ratio = median(ratios, m);
        c->ref_spread = median(spreads, m);
    }
    return 0;
}

/* The entries' order: shuffled by seed (xorshift64). */
static void shuffled(int n, unsigned seed, int *order)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    uint64_t x = (uint64_t)seed * 0x9e3779b97f4a7c15ULL + 1;
    for (int i = n - 1; i > 0; i--) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const int j = (int)(x % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* An entry the worker found wrong, failed or could not measure. */
static int report_failed(verify_state *v, const char *key, const ktune_entry *e, const char *why)
{
    fprintf(v->out, "%-36s %-40s FAILED: %s\n", key, e->config, why);
    v->broken++;
    return 0;
}

/* Whether a comparison shows a slowdown that counts: beyond the threshold, and relative to the
 * reference beyond the threshold and the noise. */
static int slower_beyond_noise(const comparison *c, double limit)
{
    return slowdown(c) > limit && held_slowdown(c) > limit + noise(c);
}

/* Replaces the workers with fresh ones, started as they were. */
static int restart_workers(verify_state *v, ktune_err *err)
{
    ktune_worker *ws[2] = {v->w, v->other};
    for (int i = 0; i < 2; i++) {
        if (!ws[i])
            continue;
        const ktune_worker_opts opts = ws[i]->opts;
        ktune_worker_stop(ws[i]);
        if (ktune_worker_start(ws[i], &opts, err))
            return -1;
    }
    v->restarts++;
    return 0;
}

static int verify_entry(verify_state *v, const ktune_entry *e, const ktune_registry *against_reg,
                        const int64_t *limits, ktune_err *err)
{
    const ktune_space *s = v->s;
    char key[256], why[1024] = "";
    ktune_space_key_format(s, e->key, key, sizeof key);
    const char *other_config = NULL;
    if (against_reg) {
        const int at = ktune_registry_find(against_reg, s, e->key);
        if (at < 0 || strcmp(against_reg->entries[at].config, e->config) == 0 ||
            ktune_space_find_config(s, against_reg->entries[at].config) < 0)
            return 0; /* the same config, or none: nothing to compare */
        other_config = against_reg->entries[at].config;
    }
    double reference_us = 0;
    const char *reference = reference_of(s, e, limits, &reference_us);
    /* measured alone against the record: an entry of a few microseconds, as the sweep recorded
     * it, and with --fresh every entry; against another build or registry, --fresh starts fresh
     * workers for every entry after the first instead */
    const int against = v->other || other_config;
    const int alone = !against && (v->o->fresh || e->us < KTUNE_ALONE_BELOW_US);
    if (against && v->o->fresh && v->measured + v->broken > 0 && restart_workers(v, err))
        return -1;
    comparison c;
    int rc = compare_once(v, e, reference, reference_us, other_config, 1, 1, alone, &c, why,
                          sizeof why, err);
    if (rc < 0)
        return -1;
    if (rc > 0)
        return report_failed(v, key, e, why);
    v->measured++;
    v->alone += alone;
    const double first = slowdown(&c);
    v->agree += fabs(first - 1) <= KTUNE_AGREE;
    if (fabs(first - 1) > fabs(v->worst - 1)) {
        v->worst = first;
        snprintf(v->worst_key, sizeof v->worst_key, "%s", key);
    }
    /* an entry that looks slower: measured again, each time in fresh workers (alone: as the first
     * time), the order alternating; it fails only when the slowdown holds beyond the noise every
     * time, also relative to the reference. Fresh workers: a kernel of a few microseconds can run
     * in one of two launch contexts a measurement apart, and a worker process keeps the one its
     * history gave it (the README's "What a recorded time means") */
    const double limit = 1 + v->o->threshold;
    int holds = slower_beyond_noise(&c, limit);
    double least = held_slowdown(&c), most_noise = noise(&c);
    if (first > limit) {
        v->suspects++;
        for (int k = 0; k < v->o->repeats && holds; k++) {
            comparison again;
            if (!alone && restart_workers(v, err))
                return -1;
            rc = compare_once(v, e, reference, reference_us, other_config, k % 2, 0, alone, &again,
                              why, sizeof why, err);
            if (rc < 0)
                return -1;
            if (rc > 0)
                return report_failed(v, key, e, why);
            least = fmin(least, held_slowdown(&again));
            most_noise = fmax(most_noise, noise(&again));
            holds = slower_beyond_noise(&again, limit);
        }
    }
    v->slower += holds;
    char ref[64] = "-";
    if (c.ref_ratio > 0)
        snprintf(ref, sizeof ref, "%.3f", c.ref_ratio);
    const char *verdict = holds           ? "SLOWER"
                          : first <= limit  ? "ok"
                          : least > limit   ? "ok (within the noise)"
                                            : "ok (so is the reference, or not again)";
    fprintf(v->out, "%-36s %-40s %10.3f %10.3f %7.3f %7s %6.1f%%  %s\n", key, e->config,
            c.other_us, c.us, first, ref, 100 * most_noise, verdict);
    return 0;
}

/* Runs argv (no shell) with its output appended to log; 0 when it exits 0. */
static int run_logged(char *const argv[], const char *log, ktune_err *err)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return ktune_fail(err, "cannot run %s: %s", argv[0], strerror(rc));
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return ktune_fail(err, "%s %s failed; see %s", argv[0], argv[1], log);
    return 0;
}

/* A revision's worker of the family, built under build_dir from a worktree of source_dir. */
static int build_revision(const ktune_verify_opts *o, const char *family, char *worker,
                          size_t size, ktune_err *err)
{
    const char *rev = o->against;
    if (rev[0] == '/' || rev[0] == '.')
        return ktune_fail(err, "--against %s: no such registry or worker", rev);
    if (!rev[0] || rev[0] == '-' || strlen(rev) > 100 ||
        strspn(rev, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~^/-") !=
            strlen(rev))
        return ktune_fail(err, "--against %s: not a registry, a worker or a revision name", rev);
    if (!o->source_dir || !o->build_dir)
        return ktune_fail(err, "--against %s: no source checkout to build it from", rev);
    char dir[4096], build[4200], log[4200], slug[128];
    snprintf(slug, sizeof slug, "%s", rev);
    for (char *c = slug; *c; c++)
        if (*c == '/' || *c == '~' || *c == '^')
            *c = '_';
    snprintf(dir, sizeof dir, "%s/%s", o->build_dir, slug);
    snprintf(build, sizeof build, "%s/build", dir);
    snprintf(log, sizeof log, "%s.log", dir);
    if (ktune_mkdirs(o->build_dir, err))
        return -1;
    fprintf(stderr, "ktune: building %s's ktune-worker-%s in %s (log: %s)\n", rev, family, dir,
            log);
    struct stat st;
    if (stat(dir, &st) == 0) {
        char *checkout[] = {"git", "-C", dir, "checkout", "--quiet", "--detach", (char *)rev, NULL};
        if (run_logged(checkout, log, err))
            return -1;
    } else {
        char *add[] = {"git", "-C", (char *)o->source_dir, "worktree", "add", "--detach",
                       dir, (char *)rev, NULL};
        if (run_logged(add, log, err))
            return -1;
    }
    char target[128];
    snprintf(target, sizeof target, "ktune-worker-%s", family);
    char *configure[] = {"cmake", "-S", dir, "-B", build, "-G", "Ninja", "-DKTUNE_BUILD_TESTS=OFF",
                         "-DKTUNE_CANDIDATES=ALL", NULL};
    char *compile[] = {"cmake", "--build", build, "--target", target, NULL};
    if (run_logged(configure, log, err) || run_logged(compile, log, err))
        return -1;
    snprintf(worker, size, "%s/%s", build, target);
    return 0;
}

int ktune_verify_run(const ktune_space *s, const char *registry_dir,
                     const ktune_worker_opts *wopts, const ktune_verify_opts *o, FILE *out,
                     ktune_err *err)
{
    ktune_worker w, other;
    ktune_registry reg, against_reg;
    int have_against_reg = 0, have_other = 0, rc = -1;
    int *order = NULL;
    char path[4096], against_worker[4400] = "";
    verify_state v = {.s = s, .o = o, .w = &w, .out = out, .worst = 1};
    /* screens in verify are checks: one short sample, the times come from interleaved rounds */
    ktune_worker_opts mine = *wopts;
    mine.screen_samples = 1;
    mine.screen_min_sample_us = 1;
    if (o->against) {
        struct stat st;
        const size_t len = strlen(o->against);
        if (stat(o->against, &st) == 0 && S_ISREG(st.st_mode) && access(o->against, X_OK) == 0 &&
            !(len > 5 && strcmp(o->against + len - 5, ".yaml") == 0)) {
            snprintf(against_worker, sizeof against_worker, "%s", o->against);
        } else if (stat(o->against, &st) != 0 && build_revision(o, s->family, against_worker,
                                                                sizeof against_worker, err)) {
            return -1;
        }
    }
    int opened = ktune_open_device_registry(s, registry_dir, &mine, &w, &reg, path, sizeof path,
                                            err);
    if (opened)
        return opened;
    if (o->against && !against_worker[0]) {
        char slug[256], file[4400];
        struct stat st;
        ktune_device_slug(w.device.name, slug, sizeof slug, '-');
        if (stat(o->against, &st) == 0 && S_ISDIR(st.st_mode))
            snprintf(file, sizeof file, "%s/%s/%s.yaml", o->against, slug, s->family);
        else
            snprintf(file, sizeof file, "%s", o->against);
        if (ktune_registry_load(file, s, &against_reg, err))
            goto cleanup;
        have_against_reg = 1;
    }
    if (against_worker[0]) {
        ktune_worker_opts theirs = mine;
        theirs.program = against_worker;
        if (ktune_worker_start(&other, &theirs, err))
            goto cleanup;
        have_other = 1;
        v.other = &other;
        if (strcmp(other.device.name, w.device.name) != 0) {
            ktune_fail(err, "%s runs on %s, this build's worker on %s", against_worker,
                       other.device.name, w.device.name);
            goto cleanup;
        }
    }
    int64_t limits[KTUNE_NLIMITS];
    ktune_limits_from(&w.device, limits);
    v.limits = limits;
    v.spreads = calloc(4096, sizeof *v.spreads);
    order = malloc(sizeof *order * (size_t)(reg.nentries + 1));
    /* the default order differs between runs started within the same second */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    const unsigned seed = o->seed ? o->seed
                                  : (unsigned)now.tv_sec ^ (unsigned)now.tv_nsec ^
                                        ((unsigned)getpid() << 16);
    shuffled(reg.nentries, seed, order);
    fprintf(out, "%-36s %-40s %10s %10s %7s %7s %7s  %s\n", "key", "config",
            o->against ? "theirs_us" : "recorded", "now_us", "ratio", "ref", "noise", "verdict");
    for (int i = 0; i < reg.nentries; i++)
        if (verify_entry(&v, &reg.entries[order[i]], have_against_reg ? &against_reg : NULL,
                         limits, err))
            goto cleanup;
    const int nsp = v.nspreads < 4096 ? v.nspreads : 4096;
    double median_spread = 0, max_spread = 0;
    if (nsp > 0) {
        for (int i = 1; i < nsp; i++) /* insertion sort: a few thousand at most */
            for (int j = i; j > 0 && v.spreads[j - 1] > v.spreads[j]; j--) {
                const double t = v.spreads[j];
                v.spreads[j] = v.spreads[j - 1];
                v.spreads[j - 1] = t;
            }
        median_spread = v.spreads[nsp / 2];
        max_spread = v.spreads[nsp - 1];
    }
    fprintf(out,
            "ktune verify %s on %s%s%s (order seed %u%s): %d entries compared (%d alone), %d "
            "slower by more than %.1f%% beyond the noise (%d looked slower and were measured %d "
            "more times), %d failed; %d fresh worker starts\n",
            s->family, w.device.name, o->against ? " against " : "", o->against ? o->against : "",
            seed, o->fresh ? (o->against ? ", every entry in fresh workers" : ", every entry alone")
                           : "",
            v.measured, v.alone, v.slower, o->threshold * 100, v.suspects, o->repeats, v.broken,
            v.restarts);
    fprintf(out,
            "ktune: %s vs now: %d of %d within %.0f%% (%.1f%%), the farthest %.3fx (%s); noise "
            "seen: median spread %.2f%%, largest %.2f%%\n",
            o->against ? "theirs" : "recorded", v.agree, v.measured, KTUNE_AGREE * 100,
            v.measured ? 100.0 * v.agree / v.measured : 100.0, v.worst,
            v.worst_key[0] ? v.worst_key : "-", 100 * median_spread, 100 * max_spread);
    rc = v.slower || v.broken ? 1 : 0;
cleanup:
    free(order);
    free(v.spreads);
    if (have_other)
        ktune_worker_stop(&other);
    ktune_worker_stop(&w);
    if (have_against_reg)
        ktune_registry_free(&against_reg);
    ktune_registry_free(&reg);
    return rc;
}
