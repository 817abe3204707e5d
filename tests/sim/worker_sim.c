/* The simulated backend: a worker that speaks the sweep protocol without a GPU, so that the
 * sweep's orchestration runs in CI. Its configs misbehave on purpose, by variant:
 *   good_tile<T>    ok; time n / T + 1.5 T microseconds (one best tile a shape)
 *   slow_tile<T>    ok; 1.5 times good_tile<T>
 *   crash_code<S>   raises signal S
 *   hang_seconds<S> sleeps S seconds without answering
 *   wrong_delta<D>  its sum of 1..n is off by D: recorded wrong
 *   oom_mb<M>       answers failed, out of memory
 * It answers T (one config), X (a window of configs; a crash or a hang in it takes the window
 * down, as a lost CUDA context does), M, B and S.
 * Environment: KTUNE_SIM_DELAY_MS (sleep before each answer), KTUNE_SIM_BONUS=<config>:<factor>
 * (scales one config's time), KTUNE_SIM_SCALE=<factor> (scales every time),
 * KTUNE_SIM_FINAL_SCALE=<factor> (scales the times M answers: the final round's, told apart),
 * KTUNE_SIM_NO_DEVICE=1 (behaves like a host without a GPU). */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
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
    const char *bonus = getenv("KTUNE_SIM_BONUS");
    if (bonus) {
        const char *colon = strchr(bonus, ':');
        if (colon && (size_t)(colon - bonus) == strlen(config) &&
            strncmp(bonus, config, strlen(config)) == 0)
            us *= atof(colon + 1);
    }
    return us;
}

/* The answer to T for config on n, after "R <id> ": a status, numbers and a detail; crashes and
 * hangs as the config says. */
static void trial(const char *config, long long n, char *out, size_t size, double *timed_s)
{
    int arg;
    double us = sim_time(config, n);
    if (us >= 0) {
        snprintf(out, size, "ok %.4f 0.00100 7", us);
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
        snprintf(out, size, "wrong 0 0 0 sum of 1..%lld is %lld; expected %lld", n, sum,
                 n * (n + 1) / 2);
    } else if (sscanf(config, "oom_mb%d", &arg) == 1) {
        snprintf(out, size, "failed 0 0 0 preparing the inputs: out of memory");
    } else {
        snprintf(out, size, "invalid 0 0 0 %s is not compiled into this worker", config);
    }
}

int main(void)
{
    if (getenv("KTUNE_SIM_NO_DEVICE")) {
        printf("E no usable CUDA device 0: no CUDA-capable device is detected (simulated)\n");
        return 2;
    }
    long delay = getenv("KTUNE_SIM_DELAY_MS") ? atol(getenv("KTUNE_SIM_DELAY_MS")) : 0;
    double timed_s = 0; /* what 7 samples of each ok trial would have taken */
    /* the limits in KTUNE_DEVICE_LIMIT_MAP's order: sms cc max_threads smem_per_block l2_bytes sm90a */
    printf("H 132 90 1024 232448 52428800 1 13.0 13.0 ktune simulated GPU\n");
    fflush(stdout);
    char line[8192];
    while (fgets(line, sizeof line, stdin)) {
        char *save = NULL;
        char *cmd = strtok_r(line, " \n", &save);
        if (!cmd || strcmp(cmd, "Q") == 0)
            break;
        long id = atol(strtok_r(NULL, " \n", &save));
        if (delay)
            sleep_ms(delay);
        if (strcmp(cmd, "T") == 0) {
            char *config = strtok_r(NULL, " \n", &save);
            long long n = atoll(strtok_r(NULL, " \n", &save));
            char answer[512];
            trial(config, n, answer, sizeof answer, &timed_s);
            printf("R %ld %s\n", id, answer);
        } else if (strcmp(cmd, "X") == 0) {
            /* a window: the statuses alone; a crash or a hang takes the whole window down */
            long long n = atoll(strtok_r(NULL, " \n", &save));
            char answers[8192] = "";
            size_t len = 0;
            for (char *c = strtok_r(NULL, " \n", &save); c; c = strtok_r(NULL, " \n", &save)) {
                if (c[0] == '@') /* the shape's fastest so far: no cut here */
                    continue;
                c += c[0] == '+'; /* a config the final round will time: nothing kept here */
                char answer[512], st[32];
                double us = 0;
                trial(c, n, answer, sizeof answer, &timed_s);
                sscanf(answer, "%31s %lf", st, &us);
                len += (size_t)snprintf(answers + len, sizeof answers - len, " %s %.4f 0.00100 %d",
                                        st, us, strcmp(st, "ok") == 0 ? 7 : 0);
            }
            printf("R %ld ok%s\n", id, answers);
        } else if (strcmp(cmd, "M") == 0) {
            long long n = atoll(strtok_r(NULL, " \n", &save));
            const char *scale = getenv("KTUNE_SIM_FINAL_SCALE");
            printf("R %ld ok", id);
            for (char *c = strtok_r(NULL, " \n", &save); c; c = strtok_r(NULL, " \n", &save))
                printf(" %.4f 0.00100", sim_time(c, n) * (scale ? atof(scale) : 1.0));
            printf("\n");
        } else if (strcmp(cmd, "B") == 0) {
            long long n = atoll(strtok_r(NULL, " \n", &save));
            char *tuned = strtok_r(NULL, " \n", &save), *def = strtok_r(NULL, " \n", &save);
            printf("R %ld ok %.4f 0.00100 %.4f 0.00100 %.4f 0.00100 3000.00 %.0f\n", id,
                   sim_time(tuned, n), sim_time(def, n), n / 10.0, 8.0 * n);
        } else if (strcmp(cmd, "S") == 0) {
            printf("R %ld ok %.6f 0 0 0 0 %.6f 0 0 0\n", id, timed_s, timed_s);
        } else {
            printf("R %ld failed 0 0 0 unknown request\n", id);
        }
        fflush(stdout);
    }
    return 0;
}
