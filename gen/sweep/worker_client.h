/* The parent's side of a worker process: start it, send a request of gen/worker/protocol.h,
 * wait for the answer with a timeout, and tell a crash or a hang from an answer. */
#ifndef KTUNE_GEN_WORKER_CLIENT_H
#define KTUNE_GEN_WORKER_CLIENT_H

#include <stdint.h>
#include <sys/types.h>

#include "ktune_table.h"
#include "protocol.h"
#include "util.h"

typedef struct {
    const char *program;
    int samples;          /* the precise measurements': interleaved rounds, bench */
    double min_sample_us;
    int screen_samples;   /* a single trial's; 0: as precise */
    double screen_min_sample_us;
    double screen_cut;    /* > 0: a screened config this many times slower than the fastest
                             after its first sample stops there */
    double warmup_us;
    int device;
    const char *log_path; /* the worker's stderr is appended here; NULL: inherit */
    int lazy_modules; /* load each kernel at its first launch, not every candidate at start */
    double copy_ceiling_gbps, flops_ceiling; /* a bench's ceilings, measured already (the
                                                worker's --copy-ceiling, --flops-ceiling):
                                                passed where copy_ceiling_gbps > 0 */
} ktune_worker_opts;

typedef struct {
    ktune_worker_opts opts;
    pid_t pid;
    int to_fd, from_fd;
    char buf[KTUNE_PROTOCOL_LINE];
    size_t len;
    ktune_hello device; /* what its hello said */
    int restarts;
    double start_s; /* spent starting workers until their first line, in seconds */
    int sent;       /* the last request reached the worker's pipe */
    double sent_at; /* when (seconds, CLOCK_MONOTONIC) */
    ktune_request_kind posted; /* the last request's kind and configs, for its answer */
    int posted_configs;
} ktune_worker;

typedef enum {
    KTUNE_REPLY_OK,      /* reply holds the worker's line */
    KTUNE_REPLY_CRASHED, /* the worker died; reply says how */
    KTUNE_REPLY_TIMEOUT, /* no answer in time; the worker was killed */
    KTUNE_REPLY_INTERRUPTED /* SIGINT or SIGTERM arrived; the worker was stopped */
} ktune_reply_kind;

#include <signal.h>
/* Set by the tool's SIGINT/SIGTERM handler; a wait for an answer gives up when it is set. */
extern volatile sig_atomic_t ktune_interrupted;

/* What ktune_worker_start returns when the worker started but found no usable GPU (no driver, no
 * device, a device it cannot use): err says which. */
#define KTUNE_WORKER_NO_DEVICE (-2)

/* 0, KTUNE_WORKER_NO_DEVICE, or -1 (the worker did not start or did not answer). */
int ktune_worker_start(ktune_worker *w, const ktune_worker_opts *opts, ktune_err *err);
/* Sends r and waits for its answer, timeout_s at most (restarting the worker first if it is
 * gone). *kind says whether an answer came; where none did (a crash, a hang, an interruption), a
 * is failed with the reason. -1 (err set) only when r cannot be sent: it does not fit a line, or
 * no worker can be started. */
int ktune_worker_call(ktune_worker *w, const ktune_request *r, double timeout_s, ktune_answer *a,
                      ktune_reply_kind *kind, ktune_err *err);
/* ktune_worker_call in two halves, for work to do while the worker measures: the request goes
 * out; then its answer comes, timeout_s from the sending at most. */
int ktune_worker_post(ktune_worker *w, const ktune_request *r, ktune_err *err);
void ktune_worker_collect(ktune_worker *w, double timeout_s, ktune_answer *a,
                          ktune_reply_kind *kind);

/* The requests, typed (keys of nkey values): a TRIAL of one config; a SCREEN posted (its answer
 * by ktune_worker_collect; pinned may be NULL); an INTERLEAVE of n configs; a BENCH of the tuned
 * and the default config; STATS. */
int ktune_worker_trial(ktune_worker *w, int nkey, const int64_t *key, const char *config,
                       double timeout_s, ktune_answer *a, ktune_reply_kind *kind, ktune_err *err);
int ktune_worker_screen_post(ktune_worker *w, int nkey, const int64_t *key, double best_us,
                             const char *const *configs, const unsigned char *pinned, int n,
                             ktune_err *err);
int ktune_worker_interleave(ktune_worker *w, int nkey, const int64_t *key,
                            const char *const *configs, int n, double timeout_s, ktune_answer *a,
                            ktune_reply_kind *kind, ktune_err *err);
int ktune_worker_bench(ktune_worker *w, int nkey, const int64_t *key, const char *tuned,
                       const char *def, double timeout_s, ktune_answer *a, ktune_reply_kind *kind,
                       ktune_err *err);
int ktune_worker_stats(ktune_worker *w, double timeout_s, ktune_answer *a, ktune_reply_kind *kind,
                       ktune_err *err);
void ktune_worker_stop(ktune_worker *w);

/* Keys whose fastest config runs below this many microseconds are measured alone (below), by the
 * sweep's final round, by verify and by bench. */
#define KTUNE_ALONE_BELOW_US 10.0

/* A key's configs measured alone: in a worker started for this request only (with opts, loading
 * only the kernels it launches), which checks them (a screen of one sample each) and then times
 * them interleaved, both in the order of their names whatever the caller's, and stops. A kernel of
 * a few microseconds runs in one of two launch contexts about 0.4 us apart, which a long-lived
 * worker's history picks; a worker that measured nothing before gives the same request the same
 * contexts in every process (README: What a recorded time means). a->entries follow configs; a
 * config the check finds wrong or failing leaves a->status OK and its entry's status not, and
 * nothing timed. *kind as ktune_worker_call's; the worker's start is added to *start_s where
 * start_s is not NULL. -1 (err set) when the worker does not start or the request cannot be
 * sent. */
int ktune_worker_measure_alone(const ktune_worker_opts *opts, int nkey, const int64_t *key,
                               const char *const *configs, int n, double timeout_s,
                               ktune_answer *a, ktune_reply_kind *kind, double *start_s,
                               ktune_err *err);

/* ktune_worker_bench in a worker started for it alone, as ktune_worker_measure_alone's: the bench
 * of a key of a few microseconds, timed in the launch context its record was. The ceilings of
 * opts (copy_ceiling_gbps, flops_ceiling), where given, are the answer's, not measured again. */
int ktune_worker_bench_alone(const ktune_worker_opts *opts, int nkey, const int64_t *key,
                             const char *tuned, const char *def, double timeout_s,
                             ktune_answer *a, ktune_reply_kind *kind, double *start_s,
                             ktune_err *err);

#endif
