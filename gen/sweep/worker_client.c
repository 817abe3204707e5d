#define _POSIX_C_SOURCE 200809L
#include "worker_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KTUNE_START_TIMEOUT_S 120.0

volatile sig_atomic_t ktune_interrupted;

static void describe_exit(int status, char *out, size_t size)
{
    if (WIFSIGNALED(status))
        snprintf(out, size, "worker killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status))
        snprintf(out, size, "worker exited with code %d", WEXITSTATUS(status));
    else
        snprintf(out, size, "worker ended");
}

/* Reads one line within timeout_s: 1 line, 0 EOF, -1 timeout, -2 interrupted. */
static int read_line(ktune_worker *w, double timeout_s, char *line, size_t size)
{
    double deadline = ktune_now_s() + timeout_s;
    for (;;) {
        char *nl = memchr(w->buf, '\n', w->len);
        if (nl) {
            size_t n = (size_t)(nl - w->buf);
            snprintf(line, size, "%.*s", (int)n, w->buf);
            memmove(w->buf, nl + 1, w->len - n - 1);
            w->len -= n + 1;
            return 1;
        }
        if (ktune_interrupted)
            return -2;
        double left = deadline - ktune_now_s();
        if (left <= 0)
            return -1;
        /* spinning, not asleep in poll: the GPU waits from the answer until the next request,
         * and a process that slept through a request of 20 ms ran 75 us after the answer came
         * on average (1.6 ms at worst), against 4 us spinning, on the H100 host */
        struct pollfd p = {w->from_fd, POLLIN, 0};
        int r = poll(&p, 1, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            sched_yield();
            continue;
        }
        if (w->len == sizeof w->buf - 1)
            w->len = 0; /* a line longer than the buffer: drop it */
        ssize_t got = read(w->from_fd, w->buf + w->len, sizeof w->buf - 1 - w->len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return 0;
        w->len += (size_t)got;
    }
}

static void reap(ktune_worker *w, int kill_first, char *how, size_t size)
{
    if (w->pid <= 0)
        return;
    if (kill_first)
        kill(w->pid, SIGKILL);
    int status = 0;
    waitpid(w->pid, &status, 0);
    if (how)
        describe_exit(status, how, size);
    close(w->to_fd);
    close(w->from_fd);
    w->pid = -1;
    w->len = 0;
}

static int spawn(ktune_worker *w, ktune_err *err)
{
    int in[2], out[2];
    const double t0 = ktune_now_s();
    if (pipe(in) != 0 || pipe(out) != 0)
        return ktune_fail(err, "pipe: %s", strerror(errno));
    char samples[32], min_us[32], screen[32], screen_us[32], cut[32], warm_us[32], dev[32];
    snprintf(samples, sizeof samples, "%d", w->opts.samples);
    snprintf(min_us, sizeof min_us, "%g", w->opts.min_sample_us);
    snprintf(screen, sizeof screen, "%d", w->opts.screen_samples);
    snprintf(screen_us, sizeof screen_us, "%g", w->opts.screen_min_sample_us);
    snprintf(cut, sizeof cut, "%g", w->opts.screen_cut);
    snprintf(warm_us, sizeof warm_us, "%g", w->opts.warmup_us);
    snprintf(dev, sizeof dev, "%d", w->opts.device);
    const char *loading = w->opts.lazy_modules ? "lazy" : "eager";
    /* the ceilings only where given: a worker of another revision (verify --against) may not know
     * the options */
    char copy_gbps[32], flops[32];
    snprintf(copy_gbps, sizeof copy_gbps, "%.17g", w->opts.copy_ceiling_gbps);
    snprintf(flops, sizeof flops, "%.17g", w->opts.flops_ceiling);
    const int ceilings_given = w->opts.copy_ceiling_gbps > 0;
    pid_t pid = fork();
    if (pid < 0)
        return ktune_fail(err, "fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (w->opts.log_path) {
            int fd = open(w->opts.log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0)
                dup2(fd, 2);
        }
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        setpgid(0, 0); /* a Ctrl-C reaches the parent, which stops the worker itself */
        execl(w->opts.program, w->opts.program, "--samples", samples, "--min-sample-us", min_us,
              "--screen-samples", screen, "--screen-min-sample-us", screen_us, "--screen-cut", cut,
              "--warmup-us", warm_us, "--device", dev, "--module-loading", loading,
              ceilings_given ? "--copy-ceiling" : (char *)NULL, copy_gbps, "--flops-ceiling", flops,
              (char *)NULL);
        fprintf(stderr, "ktune: cannot run %s: %s\n", w->opts.program, strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    w->pid = pid;
    w->to_fd = in[1];
    w->from_fd = out[0];
    w->len = 0;
    char line[KTUNE_PROTOCOL_LINE];
    int r = read_line(w, KTUNE_START_TIMEOUT_S, line, sizeof line);
    if (r != 1) {
        char how[256];
        reap(w, 1, how, sizeof how);
        return ktune_fail(err, "%s: no answer at start (%s)", w->opts.program,
                          r == -1 ? "timed out" : r == -2 ? "interrupted" : how);
    }
    char why[512];
    const int hello = ktune_hello_parse(line, &w->device, why, sizeof why);
    if (hello != 0) {
        reap(w, 1, NULL, 0);
        ktune_fail(err, "%s: %s", w->opts.program, why);
        return hello == 1 ? KTUNE_WORKER_NO_DEVICE : -1;
    }
    w->start_s += ktune_now_s() - t0;
    return 0;
}

int ktune_worker_start(ktune_worker *w, const ktune_worker_opts *opts, ktune_err *err)
{
    memset(w, 0, sizeof *w);
    w->opts = *opts;
    w->pid = -1;
    signal(SIGPIPE, SIG_IGN);
    return spawn(w, err);
}

int ktune_worker_post(ktune_worker *w, const ktune_request *r, ktune_err *err)
{
    char msg[KTUNE_PROTOCOL_LINE];
    const int n = ktune_request_format(r, msg, sizeof msg);
    if (n < 0)
        return ktune_fail(err, "a %c request of %d configs does not fit the protocol's line",
                          ktune_request_letter(r->kind), r->nconfigs);
    if (w->pid > 0) {
        int status;
        if (waitpid(w->pid, &status, WNOHANG) == w->pid) {
            close(w->to_fd);
            close(w->from_fd);
            w->pid = -1;
        }
    }
    if (w->pid <= 0) {
        char name[256], uuid[sizeof w->device.uuid];
        snprintf(name, sizeof name, "%s", w->device.name);
        snprintf(uuid, sizeof uuid, "%s", w->device.uuid);
        if (spawn(w, err))
            return -1;
        w->restarts++;
        if (strcmp(name, w->device.name) != 0 || strcmp(uuid, w->device.uuid) != 0)
            return ktune_fail(err, "the restarted worker reports device '%s' (%s), not '%s' (%s)",
                              w->device.name, w->device.uuid[0] ? w->device.uuid : "no UUID",
                              name, uuid[0] ? uuid : "no UUID");
    }
    w->sent = write(w->to_fd, msg, (size_t)n) == n;
    w->sent_at = ktune_now_s();
    w->posted = r->kind;
    w->posted_configs = r->nconfigs;
    return 0;
}

void ktune_worker_collect(ktune_worker *w, double timeout_s, ktune_answer *a,
                          ktune_reply_kind *kind)
{
    char reply[KTUNE_PROTOCOL_LINE];
    int r = w->sent ? read_line(w, w->sent_at + timeout_s - ktune_now_s(), reply, sizeof reply) : 0;
    w->sent = 0;
    if (r == 1) {
        ktune_answer_parse(reply, w->posted, w->posted_configs, a);
        /* the worker leaves after this answer: wait for it so the next request starts a new one */
        if (a->context_lost)
            reap(w, 0, NULL, 0);
        *kind = KTUNE_REPLY_OK;
        return;
    }
    memset(a, 0, sizeof *a);
    if (r < 0) {
        reap(w, 1, NULL, 0);
        if (r == -2) {
            ktune_answer_fail(a, -1, KTUNE_TRIAL_FAILED, "interrupted");
            *kind = KTUNE_REPLY_INTERRUPTED;
        } else {
            ktune_answer_fail(a, -1, KTUNE_TRIAL_TIMEOUT, "no answer within %g s; worker killed",
                              timeout_s);
            *kind = KTUNE_REPLY_TIMEOUT;
        }
        return;
    }
    char how[256];
    reap(w, 0, how, sizeof how);
    ktune_answer_fail(a, -1, KTUNE_TRIAL_FAILED, "%s", how);
    *kind = KTUNE_REPLY_CRASHED;
}

int ktune_worker_call(ktune_worker *w, const ktune_request *r, double timeout_s, ktune_answer *a,
                      ktune_reply_kind *kind, ktune_err *err)
{
    if (ktune_worker_post(w, r, err))
        return -1;
    ktune_worker_collect(w, timeout_s, a, kind);
    return 0;
}

/* A request of kind for key (nkey values) and n configs. */
static int keyed_request(ktune_request *r, ktune_request_kind kind, int nkey, const int64_t *key,
                         const char *const *configs, int n, ktune_err *err)
{
    memset(r, 0, sizeof *r);
    if (nkey < 0 || nkey > KTUNE_MAX_KEY || n < 0 || n > KTUNE_PROTOCOL_MAX_CONFIGS)
        return ktune_fail(err, "a %c request of %d key values and %d configs is out of bounds",
                          ktune_request_letter(kind), nkey, n);
    r->kind = kind;
    r->nkey = nkey;
    memcpy(r->key, key, sizeof *key * (size_t)nkey);
    r->nconfigs = n;
    memcpy(r->configs, configs, sizeof *configs * (size_t)n);
    return 0;
}

int ktune_worker_trial(ktune_worker *w, int nkey, const int64_t *key, const char *config,
                       double timeout_s, ktune_answer *a, ktune_reply_kind *kind, ktune_err *err)
{
    ktune_request r;
    return keyed_request(&r, KTUNE_REQUEST_TRIAL, nkey, key, &config, 1, err)
               ? -1
               : ktune_worker_call(w, &r, timeout_s, a, kind, err);
}

int ktune_worker_screen_post(ktune_worker *w, int nkey, const int64_t *key, double best_us,
                             const char *const *configs, const unsigned char *pinned, int n,
                             ktune_err *err)
{
    ktune_request r;
    if (keyed_request(&r, KTUNE_REQUEST_SCREEN, nkey, key, configs, n, err))
        return -1;
    r.best_us = best_us;
    if (pinned)
        memcpy(r.pinned, pinned, (size_t)n);
    return ktune_worker_post(w, &r, err);
}

int ktune_worker_interleave(ktune_worker *w, int nkey, const int64_t *key,
                            const char *const *configs, int n, double timeout_s, ktune_answer *a,
                            ktune_reply_kind *kind, ktune_err *err)
{
    ktune_request r;
    return keyed_request(&r, KTUNE_REQUEST_INTERLEAVE, nkey, key, configs, n, err)
               ? -1
               : ktune_worker_call(w, &r, timeout_s, a, kind, err);
}

int ktune_worker_bench(ktune_worker *w, int nkey, const int64_t *key, const char *tuned,
                       const char *def, double timeout_s, ktune_answer *a, ktune_reply_kind *kind,
                       ktune_err *err)
{
    const char *configs[2] = {tuned, def};
    ktune_request r;
    return keyed_request(&r, KTUNE_REQUEST_BENCH, nkey, key, configs, 2, err)
               ? -1
               : ktune_worker_call(w, &r, timeout_s, a, kind, err);
}

int ktune_worker_stats(ktune_worker *w, double timeout_s, ktune_answer *a, ktune_reply_kind *kind,
                       ktune_err *err)
{
    ktune_request r = {.kind = KTUNE_REQUEST_STATS};
    return ktune_worker_call(w, &r, timeout_s, a, kind, err);
}

void ktune_worker_stop(ktune_worker *w)
{
    if (w->pid <= 0)
        return;
    ktune_request quit = {.kind = KTUNE_REQUEST_QUIT};
    char msg[64];
    const int n = ktune_request_format(&quit, msg, sizeof msg);
    ssize_t ignored = n > 0 ? write(w->to_fd, msg, (size_t)n) : 0;
    (void)ignored;
    char how[128];
    /* give it a moment to leave on its own, then make sure */
    for (int i = 0; i < 50; i++) {
        int status;
        if (waitpid(w->pid, &status, WNOHANG) == w->pid) {
            close(w->to_fd);
            close(w->from_fd);
            w->pid = -1;
            return;
        }
        struct timespec t = {0, 20 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    reap(w, 1, how, sizeof how);
}

/* A worker for one alone request: opts with lazy loading and a screen that only checks. */
static int start_alone(const ktune_worker_opts *opts, ktune_worker *w, double *start_s,
                       ktune_err *err)
{
    ktune_worker_opts mine = *opts;
    mine.lazy_modules = 1;
    mine.screen_samples = 1; /* the screen is a check; the times come from the interleave */
    mine.screen_min_sample_us = 1;
    mine.screen_cut = 0;
    if (ktune_worker_start(w, &mine, err))
        return -1;
    if (start_s)
        *start_s += w->start_s;
    return 0;
}

int ktune_worker_measure_alone(const ktune_worker_opts *opts, int nkey, const int64_t *key,
                               const char *const *configs, int n, double timeout_s,
                               ktune_answer *a, ktune_reply_kind *kind, double *start_s,
                               ktune_err *err)
{
    if (n < 1 || n > KTUNE_PROTOCOL_MAX_CONFIGS)
        return ktune_fail(err, "an alone measurement of %d configs", n);
    /* the request's order: by name (insertion sort of at most a protocol line's configs) */
    int order[KTUNE_PROTOCOL_MAX_CONFIGS];
    const char *names[KTUNE_PROTOCOL_MAX_CONFIGS];
    for (int i = 0; i < n; i++) {
        int j = i;
        for (; j > 0 && strcmp(configs[order[j - 1]], configs[i]) > 0; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    for (int i = 0; i < n; i++)
        names[i] = configs[order[i]];
    ktune_worker w;
    static ktune_answer got; /* large: not on the stack */
    if (start_alone(opts, &w, start_s, err))
        return -1;
    int rc = ktune_worker_screen_post(&w, nkey, key, 0, names, NULL, n, err);
    if (rc == 0) {
        ktune_worker_collect(&w, timeout_s, &got, kind);
        int checked = *kind == KTUNE_REPLY_OK && got.status == KTUNE_TRIAL_OK;
        for (int i = 0; i < n && checked; i++)
            checked = got.entries[i].status == KTUNE_TRIAL_OK;
        if (checked)
            rc = ktune_worker_interleave(&w, nkey, key, names, n, timeout_s, &got, kind, err);
    }
    ktune_worker_stop(&w);
    if (rc)
        return -1;
    *a = got;
    for (int i = 0; i < n; i++)
        a->entries[order[i]] = got.entries[i];
    return 0;
}

int ktune_worker_bench_alone(const ktune_worker_opts *opts, int nkey, const int64_t *key,
                             const char *tuned, const char *def, double timeout_s,
                             ktune_answer *a, ktune_reply_kind *kind, double *start_s,
                             ktune_err *err)
{
    ktune_worker w;
    if (start_alone(opts, &w, start_s, err))
        return -1;
    const int rc = ktune_worker_bench(&w, nkey, key, tuned, def, timeout_s, a, kind, err);
    ktune_worker_stop(&w);
    return rc;
}
