#define _POSIX_C_SOURCE 200809L
#include "apply.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run_folder.h"

double ktune_apply_noise(double us, double spread_a, double spread_b)
{
    return fmax(fmax(KTUNE_NOISE_FLOOR, 2 * fmax(spread_a, spread_b)),
                us > 0 ? KTUNE_NOISE_FLOOR_US / us : 0);
}

int ktune_registry_path_for_run(const ktune_space *s, const char *run_dir,
                                const char *registry_dir, char *out, size_t size, ktune_err *err)
{
    char meta[4096], slug[256];
    ktune_run_info run;
    snprintf(meta, sizeof meta, "%s/meta.yaml", run_dir);
    if (ktune_run_info_load(meta, &run, err))
        return -1;
    ktune_device_slug(run.device, slug, sizeof slug, '-');
    snprintf(out, size, "%s/%s/%s.yaml", registry_dir, slug, s->family);
    return 0;
}

/* Status of config for key in the run's trials.csv, or "" when it was not tried. */
static void trial_status(const ktune_space *s, const char *run_dir, const int64_t *key,
                         const char *config, char *out, size_t size)
{
    char path[4096], keytext[256], line[4096];
    snprintf(path, sizeof path, "%s/trials.csv", run_dir);
    ktune_space_key_format(s, key, keytext, sizeof keytext);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t klen = strlen(keytext), clen = strlen(config);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, keytext, klen) == 0 && line[klen] == ',' &&
            strncmp(line + klen + 1, config, clen) == 0 && line[klen + 1 + clen] == ',') {
            char *st = line + klen + 2 + clen, *end = strchr(st, ',');
            if (end)
                snprintf(out, size, "%.*s", (int)(end - st), st);
        }
    fclose(f);
}

/* The variant of a config of the space (final.csv names only configs of the space). */
static int config_variant(const ktune_space *s, const char *config)
{
    int c = ktune_space_find_config(s, config);
    return c >= 0 ? s->configs[c].variant : -1;
}

/* A kept entry's runner-ups gain the fastest config of each variant they do not name (the
 * entry's own included) from the run's block first .. first + count - 1 of final.csv, in the
 * block's order (fastest first), while there is room; again is the kept config's row there, the
 * scale that carries the run's times to the record's. Returns how many were added, and says which
 * on log. */
static int widen_runner_ups(const ktune_space *s, ktune_entry *kept, const ktune_final_row *rows,
                            int first, int count, const ktune_final_row *again,
                            const char *keytext, FILE *log)
{
    const double scale = kept->us / again->us;
    int added = 0;
    for (int j = first; j < first + count && kept->nrunner_ups < KTUNE_RUNNER_UPS; j++) {
        const int variant = config_variant(s, rows[j].config);
        if (&rows[j] == again || variant < 0 || !(rows[j].us > 0))
            continue;
        int named = config_variant(s, kept->config) == variant;
        for (int q = 0; q < kept->nrunner_ups; q++)
            named |= config_variant(s, kept->runner_ups[q].config) == variant;
        /* a time the registry holds (written with 3 decimals, at most KTUNE_TIME_MAX_US) */
        const double us = rows[j].us * scale;
        if (named || !(us >= 0.001 && us <= KTUNE_TIME_MAX_US))
            continue;
        ktune_runner_up *r = &kept->runner_ups[kept->nrunner_ups++];
        snprintf(r->config, sizeof r->config, "%s", rows[j].config);
        r->us = us;
        fprintf(log, "ktune: %s: %s gains the runner-up %s at %.3f us (%.3f in this run)\n",
                keytext, kept->config, r->config, r->us, rows[j].us);
        added++;
    }
    return added;
}

int ktune_apply_run(const ktune_space *s, const char *run_dir, const char *reg_path, int force,
                    int retime, FILE *log, ktune_apply_counts *counts, int *changed, ktune_err *err)
{
    char meta[4096];
    ktune_run_info run;
    ktune_registry reg;
    ktune_final_row *rows = NULL;
    int nrows = 0, rc = -1;
    memset(counts, 0, sizeof *counts);
    *changed = 0;
    snprintf(meta, sizeof meta, "%s/meta.yaml", run_dir);
    if (ktune_run_info_load(meta, &run, err))
        return -1;
    if (access(reg_path, F_OK) == 0) {
        if (ktune_registry_load(reg_path, s, &reg, err))
            return -1;
        if (strcmp(reg.device, run.device) != 0 || reg.sms != run.sms) {
            ktune_registry_free(&reg);
            return ktune_fail(err, "%s is the registry of %s (%d SMs); run %s was made on %s (%d SMs)",
                              reg_path, reg.device, reg.sms, run_dir, run.device, run.sms);
        }
    } else {
        memset(&reg, 0, sizeof reg);
        snprintf(reg.family, sizeof reg.family, "%s", s->family);
        snprintf(reg.device, sizeof reg.device, "%s", run.device);
        reg.sms = run.sms;
        reg.cc = run.cc;
    }
    if (ktune_final_load(run_dir, s, &rows, &nrows, err))
        goto cleanup;
    /* the id this run gets if it changes anything */
    int run_id = ktune_registry_next_run_id(&reg);
    for (int i = 0; i < nrows; i++) {
        const ktune_final_row *win = &rows[i];
        if (win->rank != 1)
            continue;
        char keytext[256];
        ktune_space_key_format(s, win->key, keytext, sizeof keytext);
        ktune_entry e;
        memset(&e, 0, sizeof e);
        memcpy(e.key, win->key, sizeof e.key);
        e.run = run_id;
        const ktune_final_row *committed = NULL, *def = NULL;
        for (int j = i; j < i + win->of && j < nrows; j++) {
            if (rows[j].is_default)
                def = &rows[j];
            if (rows[j].is_committed)
                committed = &rows[j];
        }
        /* the default stays unless the winner beats it beyond the noise */
        if (def && def != win &&
            win->us >= def->us * (1 - ktune_apply_noise(def->us, win->spread, def->spread)))
            win = def;
        snprintf(e.config, sizeof e.config, "%s", win->config);
        e.us = win->us;
        e.spread = win->spread;
        e.default_us = def ? def->us : win->us;
        /* the next few, then the fastest of each variant not yet named */
        const int win_variant = config_variant(s, win->config);
        for (int j = i, top = 0; j < i + rows[i].of && j < nrows && e.nrunner_ups < KTUNE_RUNNER_UPS;
             j++) {
            if (&rows[j] == win)
                continue;
            if (top < KTUNE_RUNNER_UPS_TOP) {
                top++;
            } else {
                const int variant = config_variant(s, rows[j].config);
                int named = win_variant == variant;
                for (int q = 0; q < e.nrunner_ups; q++)
                    named |= config_variant(s, e.runner_ups[q].config) == variant;
                if (named)
                    continue;
            }
            ktune_runner_up *r = &e.runner_ups[e.nrunner_ups++];
            snprintf(r->config, sizeof r->config, "%s", rows[j].config);
            r->us = rows[j].us;
        }
        int at = ktune_registry_find(&reg, s, win->key);
        char why[512];
        int take = 0;
        if (at < 0) {
            take = 1;
            snprintf(why, sizeof why, "new key");
        } else if (strcmp(reg.entries[at].config, win->config) == 0) {
            snprintf(why, sizeof why, "the committed config won again");
        } else if (force) {
            take = 1;
            snprintf(why, sizeof why, "--force");
        } else if (committed && win == def && committed->us > def->us) {
            /* the default stays unless beaten beyond the noise, and the committed config did not
             * even beat it in this run (kept, its time would be the default's or slower) */
            take = 1;
            snprintf(why, sizeof why,
                     "the committed %s at %.3f us in this run, the default at %.3f",
                     committed->config, committed->us, def->us);
        } else if (committed) {
            double noise = ktune_apply_noise(committed->us, win->spread, committed->spread);
            take = win->us < committed->us * (1 - noise);
            snprintf(why, sizeof why, "%.3f us vs the committed %s at %.3f us in this run: %s %.1f%% noise",
                     win->us, committed->config, committed->us,
                     take ? "faster beyond the" : "not faster beyond the", noise * 100);
        } else {
            char st[32];
            trial_status(s, run_dir, win->key, reg.entries[at].config, st, sizeof st);
            take = strcmp(st, "wrong") == 0 || strcmp(st, "invalid") == 0;
            snprintf(why, sizeof why, "the committed %s is %s in this run", reg.entries[at].config,
                     st[0] ? st : "not measured");
        }
        fprintf(log, "ktune: %s: %s %s (%s)\n", keytext, take ? "takes" : "keeps",
                take ? win->config : reg.entries[at].config, why);
        if (take) {
            if (at < 0)
                counts->added++;
            else
                counts->replaced++;
            ktune_registry_put(&reg, s, &e);
            continue;
        }
        counts->kept++;
        /* the kept config's time in this run's final round, measured as the record was */
        ktune_entry *kept = &reg.entries[at];
        const ktune_final_row *again = NULL;
        for (int j = i; j < i + rows[i].of && j < nrows && !again; j++)
            if (strcmp(rows[j].config, kept->config) == 0)
                again = &rows[j];
        if (!again || !(kept->us > 0))
            continue;
        const double change = again->us / kept->us - 1;
        if (fabs(change) > KTUNE_APPLY_FAR)
            fprintf(log, "ktune: warning: %s: %s re-measured at %.3f us, %+.1f%% from its record "
                         "%.3f us\n", keytext, kept->config, again->us, 100 * change, kept->us);
        if ((retime ? fabs(change) : -change) >
            ktune_apply_noise(kept->us, kept->spread, again->spread)) {
            fprintf(log, "ktune: %s: %s's recorded time %.3f -> %.3f us (this run's)\n", keytext,
                    kept->config, kept->us, again->us);
            kept->us = again->us;
            kept->spread = again->spread;
            if (def)
                kept->default_us = def->us;
            kept->run = run_id;
            counts->refreshed++;
        }
        if (widen_runner_ups(s, kept, rows, i, rows[i].of, again, keytext, log) > 0)
            counts->widened++;
    }
    if (counts->added + counts->replaced + counts->refreshed + counts->widened > 0) {
        const char *base = strrchr(run_dir, '/');
        base = base && base[1] ? base + 1 : run_dir;
        if (!ktune_is_safe_text(base, sizeof run.name - 1)) {
            ktune_fail(err, "%s: the run folder's name '%s' may hold only printable characters "
                            "without \\ \" ' ` [ ] ( ) , $ # /* */ ??; rename it to apply it",
                       run_dir, base);
            goto cleanup;
        }
        snprintf(run.name, sizeof run.name, "%s", base);
        ktune_registry_add_run(&reg, &run);
        /* drop runs no entry refers to any more */
        int w = 0;
        for (int r = 0; r < reg.nruns; r++) {
            int used = 0;
            for (int k = 0; k < reg.nentries && !used; k++)
                used = reg.entries[k].run == reg.runs[r].id;
            if (used)
                reg.runs[w++] = reg.runs[r];
        }
        reg.nruns = w;
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", reg_path);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = '\0';
            if (ktune_mkdirs(dir, err))
                goto cleanup;
        }
        int w2 = ktune_registry_write(reg_path, &reg, s, err);
        if (w2 < 0)
            goto cleanup;
        *changed = w2 > 0;
    }
    rc = 0;
cleanup:
    free(rows);
    ktune_registry_free(&reg);
    return rc;
}
