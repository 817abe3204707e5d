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

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

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
    double deadline = now_s() + timeout_s;
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
        double left = deadline - now_s();
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
    const double t0 = now_s();
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
              "--warmup-us", warm_us, "--device", dev, (char *)NULL);
        fprintf(stderr, "ktune: cannot run %s: %s\n", w->opts.program, strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    w->pid = pid;
    w->to_fd = in[1];
    w->from_fd = out[0];
    w->len = 0;
    char line[1024];
    int r = read_line(w, KTUNE_START_TIMEOUT_S, line, sizeof line);
    if (r != 1) {
        char how[256];
        reap(w, 1, how, sizeof how);
        return ktune_fail(err, "%s: no answer at start (%s)", w->opts.program,
                          r == -1 ? "timed out" : r == -2 ? "interrupted" : how);
    }
    if (line[0] == 'E') {
        reap(w, 1, NULL, 0);
        ktune_fail(err, "%s: %s", w->opts.program, line + 2);
        return KTUNE_WORKER_NO_DEVICE;
    }
    /* "H <limits, KTUNE_DEVICE_LIMIT_MAP's order> <driver> <runtime> <name>" */
    ktune_worker_device *d = &w->device;
    int name_at = 0, ok = strncmp(line, "H ", 2) == 0;
    char *p = line + 1;
#define KTUNE_LIMIT_READ(name, type, what)                                                         \
    if (ok) {                                                                                      \
        char *end;                                                                                 \
        long long v = strtoll(p, &end, 10);                                                        \
        ok = end != p && *end == ' ' && v >= 0;                                                    \
        d->name = (type)v;                                                                         \
        p = end;                                                                                   \
    }
    KTUNE_DEVICE_LIMIT_MAP(KTUNE_LIMIT_READ)
#undef KTUNE_LIMIT_READ
    if (!ok || sscanf(p, " %31s %31s %n", d->driver_api, d->runtime, &name_at) != 2 ||
        name_at == 0) {
        reap(w, 1, NULL, 0);
        return ktune_fail(err, "%s: unexpected first line '%s'", w->opts.program, line);
    }
    snprintf(d->name, sizeof d->name, "%s", p + name_at);
    w->start_s += now_s() - t0;
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

int ktune_worker_send(ktune_worker *w, const char *line, ktune_err *err)
{
    if (w->pid > 0) {
        int status;
        if (waitpid(w->pid, &status, WNOHANG) == w->pid) {
            close(w->to_fd);
            close(w->from_fd);
            w->pid = -1;
        }
    }
    if (w->pid <= 0) {
        char name[256];
        snprintf(name, sizeof name, "%s", w->device.name);
        if (spawn(w, err))
            return -1;
        w->restarts++;
        if (strcmp(name, w->device.name) != 0)
            return ktune_fail(err, "the restarted worker reports device '%s', not '%s'",
                              w->device.name, name);
    }
    char msg[8192];
    int n = snprintf(msg, sizeof msg, "%s\n", line);
    if (n >= (int)sizeof msg)
        return ktune_fail(err, "request too long");
    w->sent = write(w->to_fd, msg, (size_t)n) == n;
    w->sent_at = now_s();
    return 0;
}

void ktune_worker_receive(ktune_worker *w, double timeout_s, char *reply, size_t size,
                          ktune_reply_kind *kind)
{
    int r = w->sent ? read_line(w, w->sent_at + timeout_s - now_s(), reply, size) : 0;
    w->sent = 0;
    if (r == 1) {
        /* the worker leaves after this answer: wait for it so the next request starts a new one */
        if (strstr(reply, "(context lost)"))
            reap(w, 0, NULL, 0);
        *kind = KTUNE_REPLY_OK;
        return;
    }
    if (r < 0) {
        reap(w, 1, NULL, 0);
        if (r == -2) {
            snprintf(reply, size, "interrupted");
            *kind = KTUNE_REPLY_INTERRUPTED;
        } else {
            snprintf(reply, size, "no answer within %g s; worker killed", timeout_s);
            *kind = KTUNE_REPLY_TIMEOUT;
        }
        return;
    }
    reap(w, 0, reply, size);
    *kind = KTUNE_REPLY_CRASHED;
}

int ktune_worker_request(ktune_worker *w, const char *line, double timeout_s, char *reply,
                         size_t size, ktune_reply_kind *kind, ktune_err *err)
{
    if (ktune_worker_send(w, line, err))
        return -1;
    ktune_worker_receive(w, timeout_s, reply, size, kind);
    return 0;
}

void ktune_worker_stop(ktune_worker *w)
{
    if (w->pid <= 0)
        return;
    ssize_t ignored = write(w->to_fd, "Q\n", 2);
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
