/* The simulated backend: a worker that speaks the sweep protocol without a GPU, so that the
 * sweep's orchestration runs in CI. Its configs misbehave on purpose, by variant:
 *   good_tile<T>    ok; time n / T + 1.5 T microseconds (one best tile a shape)
 *   slow_tile<T>    ok; 1.5 times good_tile<T>
 *   crash_code<S>   raises signal S
 *   hang_seconds<S> sleeps S seconds without answering
 *   wrong_delta<D>  its sum of 1..n is off by D: recorded wrong
 *   oom_mb<M>       answers failed, out of memory
 * It answers every request of gen/worker/protocol.h: a crash or a hang in a SCREEN takes the
 * whole window down, as a lost CUDA context does.
 * Environment: KTUNE_SIM_DELAY_MS (sleep before each answer), KTUNE_SIM_BONUS=<config>:<factor>
 * (scales one config's time), KTUNE_SIM_SCALE=<factor> (scales every time),
 * KTUNE_SIM_FINAL_SCALE=<factor> (scales the times M answers: the final round's, told apart),
 * KTUNE_SIM_HISTORY=<config>:<factor> (scales one config's times M and B answers (as the tuned
 * one) once this process has answered a request of another key: a time that follows what the
 * process measured before),
 * KTUNE_SIM_NO_DEVICE=1 (behaves like a host without a GPU). A B answer's copy ceiling is 3000
 * GB/s plus the n of the process's first key (each process measures its own), or the one given
 * with --copy-ceiling. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "protocol.h"

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* The factor an environment variable of the form <config>:<factor> gives config (1: another's,
 * or none). */
static double config_factor(const char *variable, const char *config)
{
    const char *spec = getenv(variable), *colon = spec ? strchr(spec, ':') : NULL;
    if (!colon || (size_t)(colon - spec) != strlen(config) ||
        strncmp(spec, config, strlen(config)) != 0)
        return 1;
    return atof(colon + 1);
}

/* Time of config for n, or a negative number for a config that is not "good". */
static double sim_time(const char *config, long long n)
{
    int tile;
    double us;
    if (sscanf(config, "good_tile%d", &tile) == 1 && tile >= 1)
        us = (double)n / tile + 1.5 * tile;
    else if (sscanf(config, "slow_tile%d", &tile) == 1 && tile >= 1)
        us = 1.5 * ((double)n / tile + 1.5 * tile);
    else
        return -1;
    if (getenv("KTUNE_SIM_SCALE"))
        us *= atof(getenv("KTUNE_SIM_SCALE"));
    return us * config_factor("KTUNE_SIM_BONUS", config);
}

/* Config's outcome on n; crashes and hangs as the config says. */
static void trial(const char *config, long long n, ktune_answer *a, int at, double *timed_s)
{
    int arg;
    ktune_answer_entry *x = &a->entries[at];
    double us = sim_time(config, n);
    x->status = KTUNE_TRIAL_OK;
    if (sscanf(config, "good_tile%d", &arg) == 1 && arg > n) {
        /* as a kernel's launcher refuses a tile its constraints exclude */
        x->status = KTUNE_TRIAL_INVALID;
        snprintf(a->detail, sizeof a->detail, "a tile of %d is larger than n = %lld", arg, n);
    } else if (us >= 0) {
        *x = (ktune_answer_entry){KTUNE_TRIAL_OK, us, 0.001, 7};
        *timed_s += 7 * us * 1e-6;
    } else if (sscanf(config, "crash_code%d", &arg) == 1) {
        raise(arg);
        exit(1);
    } else if (sscanf(config, "hang_seconds%d", &arg) == 1) {
        sleep((unsigned)arg);
        exit(1);
    } else if (sscanf(config, "wrong_delta%d", &arg) == 1) {
        long long sum = 0;
        for (long long i = 1; i <= n; i++)
            sum += i;
        sum += arg;
        x->status = KTUNE_TRIAL_WRONG;
        snprintf(a->detail, sizeof a->detail, "sum of 1..%lld is %lld; expected %lld", n, sum,
                 n * (n + 1) / 2);
    } else if (sscanf(config, "oom_mb%d", &arg) == 1) {
        x->status = KTUNE_TRIAL_FAILED;
        snprintf(a->detail, sizeof a->detail, "preparing the inputs: out of memory");
    } else {
        x->status = KTUNE_TRIAL_INVALID;
        snprintf(a->detail, sizeof a->detail, "%s is not compiled into this worker", config);
    }
}

static void answer(ktune_request_kind kind, const ktune_answer *a)
{
    char line[KTUNE_PROTOCOL_LINE];
    if (ktune_answer_format(kind, a, line, sizeof line) > 0)
        fputs(line, stdout);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    char line[KTUNE_PROTOCOL_LINE];
    int device = 0;            /* --device N: the simulated GPU's UUID ends in N */
    double given_ceiling = 0; /* --copy-ceiling G: a bench's copy ceiling, not measured */
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--device") == 0)
            device = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--copy-ceiling") == 0)
            given_ceiling = atof(argv[i + 1]);
    if (getenv("KTUNE_SIM_NO_DEVICE")) {
        if (ktune_no_device_format("no usable CUDA device 0: no CUDA-capable device is detected "
                                   "(simulated)",
                                   line, sizeof line) > 0)
            fputs(line, stdout);
        return 2;
    }
    long delay = getenv("KTUNE_SIM_DELAY_MS") ? atol(getenv("KTUNE_SIM_DELAY_MS")) : 0;
    double timed_s = 0; /* what 7 samples of each ok trial would have taken */
    long long first_n = -1; /* the key of the first request */
    int history = 0;        /* a request of another key came after it */
    ktune_hello hello = {"ktune simulated GPU", 132, 90, 1024, 232448, 52428800, 1,
                         "13.0", "13.0", ""};
    snprintf(hello.uuid, sizeof hello.uuid, "GPU-00000000-0000-0000-0000-%012d",
             device < 0 ? 0 : device % 1000000);
    if (getenv("KTUNE_SIM_DEVICE_NAME")) /* a real device's name, whose table the library has */
        snprintf(hello.name, sizeof hello.name, "%.*s", (int)sizeof hello.name - 1,
                 getenv("KTUNE_SIM_DEVICE_NAME"));
    if (ktune_hello_format(&hello, line, sizeof line) > 0)
        fputs(line, stdout);
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
        ktune_request r;
        static ktune_answer a;
        char why[256];
        memset(&a, 0, sizeof a);
        if (ktune_request_parse(line, 1, &r, why, sizeof why)) {
            ktune_answer_fail(&a, r.id, KTUNE_TRIAL_FAILED, "%s", why);
            answer(r.kind, &a);
            continue;
        }
        if (r.kind == KTUNE_REQUEST_QUIT)
            break;
        if (delay)
            sleep_ms(delay);
        const long long n = r.key[0];
        if (r.kind != KTUNE_REQUEST_STATS) { /* the requests that name a key */
            if (first_n < 0)
                first_n = n;
            history |= n != first_n;
        }
        a.id = r.id;
        a.status = KTUNE_TRIAL_OK;
        a.n = r.nconfigs;
        switch (r.kind) {
        case KTUNE_REQUEST_TRIAL:
            trial(r.configs[0], n, &a, 0, &timed_s);
            a.status = a.entries[0].status;
            break;
        case KTUNE_REQUEST_SCREEN:
            /* the statuses alone; a crash or a hang takes the whole window down; no cut at @us,
             * nothing kept for the configs marked + */
            for (int i = 0; i < r.nconfigs; i++)
                trial(r.configs[i], n, &a, i, &timed_s);
            break;
        case KTUNE_REQUEST_INTERLEAVE: {
            const char *scale = getenv("KTUNE_SIM_FINAL_SCALE");
            for (int i = 0; i < r.nconfigs; i++)
                a.entries[i] = (ktune_answer_entry){
                    KTUNE_TRIAL_OK,
                    sim_time(r.configs[i], n) * (scale ? atof(scale) : 1.0) *
                        (history ? config_factor("KTUNE_SIM_HISTORY", r.configs[i]) : 1.0),
                    0.001, 7};
            break;
        }
        case KTUNE_REQUEST_BENCH:
            a.bench = (ktune_bench_answer){.tuned_us = sim_time(r.configs[0], n) *
                                                       (history ? config_factor("KTUNE_SIM_HISTORY",
                                                                                r.configs[0])
                                                                : 1.0),
                                           .tuned_spread = 0.001,
                                           .default_us = sim_time(r.configs[1], n),
                                           .default_spread = 0.001,
                                           .copy_us = n / 10.0,
                                           .copy_spread = 0.001,
                                           /* as each process measures its own: 3000
                                              GB/s and the first key's n */
                                           .ceiling_gbps = given_ceiling > 0
                                                               ? given_ceiling
                                                               : 3000.0 + (double)first_n,
                                           .bytes = 8.0 * n,
                                           .nvendors = 2,
                                           .vendors = {{"sim_blas", n / 8.0, 0.001},
                                                       {"sim_blas_wide", n / 4.0, 0.001}}};
            break;
        case KTUNE_REQUEST_STATS:
            a.stats = (ktune_stats_answer){.timed = timed_s, .busy = timed_s};
            break;
        default:
            ktune_answer_fail(&a, r.id, KTUNE_TRIAL_FAILED, "unknown request");
        }
        answer(r.kind, &a);
    }
    return 0;
}
