#define _POSIX_C_SOURCE 200809L
#include "journal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Cuts a file back to its last newline: a line cut short by a kill is dropped. */
void ktune_journal_trim(const char *path)
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

void ktune_journal_line(FILE *f, const char *line) { fputs(line, f); }

void ktune_journal_sync(ktune_syncer *syncer, FILE *f)
{
    fflush(f);
    ktune_syncer_request(syncer, fileno(f));
}

void ktune_journal_write(ktune_syncer *syncer, FILE *f, const char *line)
{
    ktune_journal_line(f, line);
    ktune_journal_sync(syncer, f);
}

static void sanitize(char *s)
{
    for (; *s; s++)
        if (*s == ',' || *s == '\n' || *s == '\r')
            *s = ';';
}

void ktune_journal_trial(FILE *journal, const char *keytext, const ktune_space *s, int ci,
                         const ktune_sweep_trial *t, int samples, const char *detail,
                         char clean[1024])
{
    char line[8192];
    snprintf(clean, 1024, "%s", detail);
    sanitize(clean);
    snprintf(line, sizeof line, "%s,%s,%s,%.4f,%.5f,%d,%s\n", keytext, s->configs[ci].name,
             ktune_trial_status_names[t->status], t->status == KTUNE_TRIAL_OK ? t->us : INFINITY,
             t->status == KTUNE_TRIAL_OK ? t->spread : 0.0f, samples, clean);
    ktune_journal_line(journal, line);
}

void ktune_journal_load(const char *path, const ktune_space *s, ktune_sweep_trial *trials)
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
        ktune_sweep_trial *row = &trials[(size_t)si * (size_t)s->nconfigs + (size_t)t.config];
        row->status = t.status;
        row->us = (float)t.us;
        row->spread = (float)t.spread;
    }
    fclose(f);
}

int ktune_meta_write(const ktune_sweep_opts *o, const ktune_hello *d, const char *state,
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
    ktune_buf_printf(&b, "gpu: %d\ngpu_uuid: \"%s\"\n", o->worker.device,
                     ktune_gpu_uuid_valid(d->uuid) ? d->uuid : "unknown");
    ktune_buf_printf(&b, "gpu_state_start: \"%s\"\n", state);
    int rc = ktune_file_write_if_changed(path, b.data, b.len, err) < 0 ? -1 : 0;
    ktune_buf_free(&b);
    return rc;
}

/* started, not waited for: nvidia-smi takes tens of milliseconds */
FILE *ktune_gpu_state_query(const char *uuid)
{
    if (!ktune_gpu_uuid_valid(uuid)) /* it goes on a command line: only a UUID */
        return NULL;
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw "
             "--format=csv,noheader -i %s 2>/dev/null",
             uuid);
    return popen(cmd, "re");
}

void ktune_gpu_state_read(FILE *query, char *out, size_t size)
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
