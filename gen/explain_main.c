/* ktune-explain: which configuration the library would launch for a key, on the current device or
 * on a described one (no GPU needed). `ktune explain` runs it, and its --holdout, the vote judged
 * on the table's own keys; `ktune bench` runs its --selection-cost, the host cost of the library's
 * selection, and its --keys, the choices for the keys a bench was given. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adapt.h"
#include "device.h"
#include "families.h"
#include "ktune/ktune.h"
#include "select.h"

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* The family named and the device described (spec with a name) or current: 0, or the exit code
 * after saying why. The device outlives the calls (the launch path keeps its pointer). */
static int family_device(const char *name, const ktune_device_spec *spec, const ktune_family **f,
                         const ktune_device **dev)
{
    static ktune_device described;
    *f = ktune__family_find(name);
    *dev = &described;
    const ktune_status st = !*f                ? KTUNE_ERROR_INVALID_ARGUMENT
                            : spec && spec->name ? ktune__device_from_spec(spec, &described)
                                                 : ktune__device_current(dev);
    if (st != KTUNE_OK) {
        fprintf(stderr, "ktune-explain: %s: %s\n", name, ktune_status_string(st));
        return st == KTUNE_ERROR_CUDA ? 4 : 1;
    }
    return 0;
}

/* The host cost of a selection, for the keys of every table of the family: on the launch path
 * (ktune__select without a choice, as ktune_<family>() calls it, after each key's first call) and
 * explained (with its choice and text). */
static int selection_cost(const char *name, const ktune_device_spec *spec)
{
    const ktune_family *f;
    const ktune_device *dev;
    const int found = family_device(name, spec, &f, &dev);
    if (found)
        return found;
    setenv("KTUNE_LOG", "quiet", 1); /* keys of other devices' tables are untuned here */
    ktune__select_reset();
    int nkeys = 0;
    for (int t = 0; t < f->ntables; t++)
        nkeys += f->tables[t]->nrows;
    if (nkeys == 0) {
        printf("%s: no table, no key to time\n", name);
        return 0;
    }
    const int rounds = 2000000 / nkeys + 1;
    int instance, failed = 0;
    double launch = 0, explained = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int t = 0; t < f->ntables; t++)
            for (int r = 0; r < f->tables[t]->nrows; r++) /* each key's first call, untimed */
                failed |= ktune__select(f, f->tables[t]->rows[r].key, dev, &instance, NULL) !=
                          KTUNE_OK;
    double t0 = now_ns();
    for (int round = 0; round < rounds; round++)
        for (int t = 0; t < f->ntables; t++)
            for (int r = 0; r < f->tables[t]->nrows; r++)
                failed |= ktune__select(f, f->tables[t]->rows[r].key, dev, &instance, NULL) !=
                          KTUNE_OK;
    const double lookup = (now_ns() - t0) / ((double)rounds * nkeys);
    /* the launch path as the families' entry points take it: the lookup and adaptation's check,
     * which with adaptation off must cost nothing beside it */
    ktune_adapt_enable(0);
    t0 = now_ns();
    for (int round = 0; round < rounds; round++)
        for (int t = 0; t < f->ntables; t++)
            for (int r = 0; r < f->tables[t]->nrows; r++) {
                ktune_adapt_token token;
                failed |= ktune__select_launch(f, f->tables[t]->rows[r].key, dev, 0, &instance,
                                               &token) != KTUNE_OK;
            }
    launch = (now_ns() - t0) / ((double)rounds * nkeys);
    const int explain_rounds = rounds / 20 + 1;
    t0 = now_ns();
    for (int round = 0; round < explain_rounds; round++)
        for (int t = 0; t < f->ntables; t++)
            for (int r = 0; r < f->tables[t]->nrows; r++) {
                ktune_choice c;
                failed |= ktune__select(f, f->tables[t]->rows[r].key, dev, &instance, &c) !=
                          KTUNE_OK;
            }
    explained = (now_ns() - t0) / ((double)explain_rounds * nkeys);
    printf("%s selection on %s: %.3f us a call on the launch path (%.3f us of it the table "
           "lookup; adaptation off), %.3f us explained (%d keys, %d and %d rounds)\n",
           name, dev->name, launch / 1000, lookup / 1000, explained / 1000, nkeys, rounds,
           explain_rounds);
    return failed ? 1 : 0;
}

/* The library's choice for each key of a file (a key a line, as KEY), a line each on stdout:
 * "<config> <reason> <nearest>", nearest being the nearest valid row's answer ("-": none), the
 * rule the nearest keys' vote replaced. `ktune bench` reads it. */
static int choices(const char *name, const char *path, const ktune_device_spec *spec)
{
    const ktune_family *f;
    const ktune_device *dev;
    const int found = family_device(name, spec, &f, &dev);
    if (found)
        return found;
    ktune_status st;
    FILE *in = fopen(path, "r");
    if (!in) {
        fprintf(stderr, "ktune-explain: --keys %s: cannot read it\n", path);
        return 1;
    }
    setenv("KTUNE_LOG", "quiet", 1); /* the keys are untuned on purpose */
    ktune__select_reset();
    char line[600];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, in)) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        int64_t key[KTUNE_MAX_KEY];
        int instance = -1;
        ktune_choice c;
        if (ktune__key_parse(f, line, key)) {
            fprintf(stderr, "%s:%d:1: not a key of %s: '%.200s'\n", path, lineno, name, line);
            rc = 1;
        } else if ((st = ktune__select(f, key, dev, &instance, &c)) != KTUNE_OK) {
            fprintf(stderr, "%s:%d:1: %s\n", path, lineno, ktune_status_string(st));
            rc = 1;
        } else {
            const int nearest = ktune__select_nearest(f, key, dev);
            printf("%s %s %s\n", c.config, ktune_reason_string(c.reason),
                   nearest >= 0 ? f->instances[nearest].name : "-");
        }
    }
    fclose(in);
    return rc;
}

/* The vote (step 3 of ktune.h) judged on the keys of the device's table: each key left out in
 * turn, the pick of the others' vote against what the key's row measured. A pick the row
 * measured (its answer, or a runner-up) has a known time; one it did not is counted apart. A line
 * for each key whose pick is not its answer, then the summary. */
static int holdout(const char *name, const ktune_device_spec *spec)
{
    const ktune_family *f;
    const ktune_device *dev;
    const int found = family_device(name, spec, &f, &dev);
    if (found)
        return found;
    const int ti = ktune__select_table(f, dev);
    if (ti < 0) {
        printf("%s: no table for %s\n", name, dev->name);
        return 1;
    }
    const ktune_table *t = f->tables[ti];
    int answer = 0, runner = 0, unmeasured = 0, bounded = 0, none = 0;
    double log_runner = 0, log_bound = 0;
    char key[256];
    for (int r = 0; r < t->nrows; r++) {
        const int pick = ktune__select_holdout(f, dev, ti, r);
        const int own = f->table_instances[ti][r];
        if (pick >= 0 && pick == own) {
            answer++;
            continue;
        }
        /* the pick's time there, and its variant's fastest there (own: the answer) */
        double us = 0, variant_us = 0;
        const int variant = pick >= 0 ? f->instances[pick].variant : -1;
        if (own >= 0 && f->instances[own].variant == variant)
            variant_us = t->rows[r].us;
        for (int j = 0; pick >= 0 && f->table_runner_instances && j < KTUNE_TABLE_RUNNER_UPS; j++) {
            const int i = f->table_runner_instances[ti][r * KTUNE_TABLE_RUNNER_UPS + j];
            const double at = f->table_runner_us[ti][r * KTUNE_TABLE_RUNNER_UPS + j];
            if (i == pick)
                us = at;
            if (i >= 0 && at > 0 && f->instances[i].variant == variant &&
                (variant_us == 0 || at < variant_us))
                variant_us = at;
        }
        ktune__key_format(f, t->rows[r].key, key, sizeof key);
        if (pick < 0) {
            none++;
            printf("  %s: the others vote for nothing valid (a default answers)\n", key);
        } else if (us > 0) {
            runner++;
            log_runner += log(t->rows[r].us / us);
            printf("  %s: %s, a runner-up there at %.3fx the speed of its answer %s\n", key,
                   f->instances[pick].name, t->rows[r].us / us,
                   own >= 0 ? f->instances[own].name : t->rows[r].config);
        } else {
            unmeasured++;
            printf("  %s: %s, which it did not measure (its answer %s", key,
                   f->instances[pick].name, own >= 0 ? f->instances[own].name : t->rows[r].config);
            if (variant_us > 0) {
                bounded++;
                log_bound += log(t->rows[r].us / variant_us);
                printf("; its variant's fastest there at %.3fx its speed",
                       t->rows[r].us / variant_us);
            }
            printf(")\n");
        }
    }
    printf("%s holdout on %s: %d keys, each voted for by the others: its own answer %d, a "
           "runner-up it measured %d (at %.3fx the answer's speed, geomean; %.3fx over the %d "
           "measured picks), a config it did not measure %d (%d of them of a variant it measured, "
           "whose fastest there ran at %.3fx the answer's speed, geomean: the most they could), "
           "nothing %d\n",
           name, dev->name, t->nrows, answer, runner, runner ? exp(log_runner / runner) : 1.0,
           answer + runner ? exp(log_runner / (answer + runner)) : 1.0, answer + runner,
           unmeasured, bounded, bounded ? exp(log_bound / bounded) : 1.0, none);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: ktune-explain FAMILY KEY|--selection-cost|--keys FILE|--holdout "
                    "[--device NAME --sms N --cc C [--max-threads N] [--smem-per-block B] "
                    "[--l2-bytes B]]\n"
                    "  KEY: every dimension of the family's key as name=value, e.g. "
                    "'dtype=f16 rows=4 cols=1000'\n"
                    "  --keys FILE: a key a line; prints '<config> <reason> <nearest>' a line\n"
                    "  --holdout: each key of the device's table voted for by the others\n");
    return 2;
}

static int number(const char *text, long long max, long long *out)
{
    char *end;
    if (!text || text[0] < '0' || text[0] > '9' || strlen(text) > 18)
        return 0;
    *out = strtoll(text, &end, 10);
    return !*end && *out <= max;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    ktune_device_spec spec = {0};
    int described = 0, cost = strcmp(argv[2], "--selection-cost") == 0;
    const int held = strcmp(argv[2], "--holdout") == 0;
    const int keys = strcmp(argv[2], "--keys") == 0;
    if (keys && argc < 4)
        return usage();
    for (int i = keys ? 4 : 3; i < argc; i += 2) {
        long long v = 0;
        const char *name = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!value)
            return usage();
        described = 1;
        if (strcmp(name, "--device") == 0)
            spec.name = value;
        else if (strcmp(name, "--sms") == 0 && number(value, 100000, &v))
            spec.sms = (int)v;
        else if (strcmp(name, "--cc") == 0 && number(value, 1000, &v))
            spec.cc = (int)v;
        else if (strcmp(name, "--max-threads") == 0 && number(value, 1 << 20, &v))
            spec.max_threads = (int)v;
        else if (strcmp(name, "--smem-per-block") == 0 && number(value, 1LL << 40, &v))
            spec.smem_per_block = v;
        else if (strcmp(name, "--l2-bytes") == 0 && number(value, 1LL << 40, &v))
            spec.l2_bytes = v;
        else {
            fprintf(stderr, "ktune-explain: %s: '%s' is not a value it takes\n", name, value);
            return usage();
        }
    }
    if (cost)
        return selection_cost(argv[1], described ? &spec : NULL);
    if (keys)
        return choices(argv[1], argv[3], described ? &spec : NULL);
    if (held)
        return holdout(argv[1], described ? &spec : NULL);
    ktune_choice c;
    ktune_status st = ktune_explain(argv[1], argv[2], described ? &spec : NULL, &c);
    if (st != KTUNE_OK) {
        fprintf(stderr, "ktune-explain: %s '%s'%s: %s%s\n", argv[1], argv[2],
                described ? " on the described device" : "", ktune_status_string(st),
                st == KTUNE_ERROR_CUDA ? " (no usable GPU here: describe one with --device, --sms "
                                         "and --cc)"
                                       : "");
        return st == KTUNE_ERROR_CUDA ? 4 : 1;
    }
    printf("%s %s: %s (%s", argv[1], argv[2], c.config, ktune_reason_string(c.reason));
    if (c.table[0])
        printf("; table of %s, tuned %.3f us", c.table, c.tuned_us);
    printf(")\n  %s\n", c.why);
    return 0;
}
