/* The parent's side of a worker process: start it, send a request, wait for the answer with a
 * timeout, and tell a crash or a hang from an answer. */
#ifndef KTUNE_GEN_WORKER_CLIENT_H
#define KTUNE_GEN_WORKER_CLIENT_H

#include <stdint.h>
#include <sys/types.h>

#include "ktune_table.h"
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
} ktune_worker_opts;

/* What the worker said of its device in its first line. */
/* The worker's device: its name, its limits (KTUNE_DEVICE_LIMIT_MAP; sm90a: 1 where the worker
 * carries sm_90a code) and the CUDA versions it runs with. */
typedef struct {
    char name[256];
    KTUNE_DEVICE_LIMIT_MAP(KTUNE_DEVICE_LIMIT_FIELD)
    char driver_api[32], runtime[32];
} ktune_worker_device;

typedef struct {
    ktune_worker_opts opts;
    pid_t pid;
    int to_fd, from_fd;
    char buf[16384];
    size_t len;
    ktune_worker_device device;
    int restarts;
    double start_s; /* spent starting workers until their first line, in seconds */
    int sent;       /* the last request reached the worker's pipe */
    double sent_at; /* when (seconds, CLOCK_MONOTONIC) */
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
/* Sends line (without newline); restarts the worker first if it is gone. */
int ktune_worker_request(ktune_worker *w, const char *line, double timeout_s, char *reply,
                         size_t size, ktune_reply_kind *kind, ktune_err *err);
/* ktune_worker_request in two halves, for work to do while the worker measures: the request
 * goes out; then its answer comes, timeout_s from the sending at most. */
int ktune_worker_send(ktune_worker *w, const char *line, ktune_err *err);
void ktune_worker_receive(ktune_worker *w, double timeout_s, char *reply, size_t size,
                          ktune_reply_kind *kind);
void ktune_worker_stop(ktune_worker *w);

#endif
