/* The worker's state, one struct passed explicitly (its member functions), and the types its
 * parts share: measurement (measure.cu: gates, spans, L2 flushes, graphs, interleaved samples),
 * checks (check.cu), the screen (screen.cu), the bench and its ceilings (bench.cu) and the
 * requests (worker_main.cu). Internal to the worker; a family sees worker.h only. */
#pragma once

#include <math.h>
#include <stdint.h>
#include <time.h>
#include <vector>

#include "protocol.h"
#include "worker.h"

inline double now_s()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

struct precision {
    int samples;
    double min_sample_us;
};

struct settings {
    precision precise = {7, 200}; /* interleaved rounds, the bench, the ceilings */
    precision screen = {0, 0};    /* single trials; a 0 field: as precise */
    double warmup_us = 50;        /* before interleaved rounds (a screen's is the check's launch) */
    double screen_cut = 0; /* > 0: a screened config whose first sample takes more than this
                              times the fastest first sample stops at that sample */
    int device = 0;
    bool lazy_modules = false; /* each kernel loaded at its first launch (an alone measurement) */
};

struct measurement {
    double median_us = 0, spread = 0;
    int samples = 0;
};

/* A span of device time: a pair of events of the pool (first: the first's index). */
struct span {
    int first = -1;
};

/* One run (a config, the copy, the vendor library) being timed: its probe, the launches a sample
 * holds, whether samples have a flush before them (a screen's where its launches do not evict L2
 * by themselves, a precise one's always), its graph, its warm-up and its samples (the probe first
 * where it counts as one). */
struct timing {
    span probe, warm;
    int per = 1;
    bool flush = true, graph = true, probe_is_sample = false;
    cudaGraphExec_t exec = nullptr;
    double each_us = 0; /* a launch: the probe's time (the kept probe's, for a kept graph) */
    std::vector<span> samples;
};

/* What a measurement times: a config of the family (instance >= 0; its graph may be kept for the
 * final round), or a call of `call` with ctx (the copy, the vendor library, a flush). */
struct run {
    int instance = -1;
    cudaError_t (*call)(void *ctx, int set, cudaStream_t stream) = nullptr;
    void *ctx = nullptr;
};

/* A graph whose last sample is enqueued, with the pool index of the event that ends that sample
 * (-1: none), or known to have run (after a wait). */
struct retiring {
    cudaGraphExec_t exec;
    int done;
    bool ran;
};

/* A graph kept for the final round (kept_add). */
struct kept_run {
    int instance, per;
    bool flush, pinned;
    cudaGraphExec_t exec;
    double us, each_us; /* the median a launch; the probe's (timing::each_us) */
};

/* A config of a screen: its instance (-1: not compiled in), what became of it, its check (done:
 * its counters are on the host; the output's shape), its timing. */
struct trial {
    int instance = -1;
    ktune_trial_status status = KTUNE_TRIAL_OK;
    char detail[512] = "";
    span checked;
    int64_t rows = 0, cols = 0;
    timing t;
    bool pinned = false; /* its graph kept for the final round whatever its time */
    measurement m;
    bool timed = false; /* m is known */
    bool ok() const { return instance >= 0 && status == KTUNE_TRIAL_OK; }
};

/* The most configs one screen checks. */
constexpr int max_screen = KTUNE_PROTOCOL_MAX_CONFIGS;
/* The L2's line: what a miss allocates, whichever of its 32-byte sectors it reads. */
constexpr size_t l2_line_bytes = 128;
/* Gates in a pipeline (gate_pipe): a piece holds at least gate_piece_us of GPU time at first,
 * twice as much after each gate up to gate_piece_max_us. */
constexpr double gate_piece_us = 100, gate_piece_max_us = 3200;

struct ktune_worker_state;

/* Gates in a pipeline, for work enqueued piece by piece: the pieces wait behind the held gate,
 * which opens once the next gate is closed behind them, so the GPU runs pieces while the host
 * enqueues the next and no span holds the host's latency between two pieces. A gate costs the GPU
 * time, so pieces hold at least gate_piece_us of GPU time (by estimate) at first, for the GPU to
 * start soon, and twice as much after each gate up to gate_piece_max_us, for few gates: the host
 * enqueues a piece several times faster than the GPU runs it. */
struct gate_pipe {
    ktune_worker_state &w;
    unsigned held = 0;
    double pending_us = 0, piece_us = gate_piece_us;
    explicit gate_pipe(ktune_worker_state &state) : w(state) {}
    /* first_us: the first piece's (smaller where the host is slow to enqueue it) */
    cudaError_t start(double first_us = gate_piece_us);
    /* After a piece of about us microseconds of GPU time. */
    cudaError_t pass(double us);
    void finish();
};

struct ktune_worker_state {
    explicit ktune_worker_state(const ktune_worker_family &family) : fam(family) {}

    const ktune_worker_family &fam;
    settings opt;
    /* Where the worker's time went (the STATS answer): device time in timed samples and in
     * warm-ups; host time preparing inputs; device time in checks (from a window's first check to
     * its last, less the probes that count as samples); host time building graphs and inside
     * requests in all; device time in L2 flushes before samples (their count times the time of
     * one, measured at start: a span around each would cost GPU time between samples) and in the
     * probes; host time waiting for the GPU to finish what it was given. */
    ktune_stats_answer spent = {};
    /* Work runs on the first stream; graphs are captured on the second, while the first runs
     * earlier work, and uploaded in the first, between samples (an upload in a stream of its own,
     * while samples ran, slowed the graphs of short kernels). */
    cudaStream_t stream = nullptr, capture_stream = nullptr;

    /* L2 flushes: a buffer of zeros, twice flush_bytes, read half by half in turn */
    void *flush_buffer = nullptr;
    unsigned *flush_sink = nullptr;
    int flush_blocks = 0, flush_half = 0;
    size_t flush_bytes = 0;
    double flush_us = 0; /* one flush's time, measured at start */
    int64_t l2_bytes = 0;

    /* The SM clock a precise measurement starts at (rest_at_boost): the device's peak (MHz), a
     * word of device memory the clock probe writes, and its pinned host copy; when the last rest
     * ended (now_s), the GPU at work since as far as the worker knows. */
    double peak_mhz = 0;
    float *clock_probe = nullptr, *clock_probe_host = nullptr;
    double rested_at = now_s();

    /* The checks of a screen: two counters a config ([0] elements out of tolerance, [1] the
     * first), and their starting values; pinned host memory they are copied to in groups. */
    unsigned long long *check_counters = nullptr, check_counters_init[2 * max_screen] = {};
    unsigned long long *check_counters_host = nullptr;

    /* The inputs prepared: their key and input sets. */
    int64_t current_key[KTUNE_MAX_KEY] = {};
    int have_key = 0, nsets = 0;

    /* The copy ceiling (GB/s; 0: not measured yet, else measured or given by --copy-ceiling) and
     * the fastest vendor path's FLOP/s a ceiling key; given_flops_per_s (> 0: the worker's
     * --flops-ceiling) stands for every ceiling key. */
    double ceiling_gbps = 0, given_flops_per_s = 0;
    struct vendor_ceiling {
        int64_t key[KTUNE_MAX_KEY];
        double flops_per_s;
    } vendor_ceilings[8] = {};
    int nvendor_ceilings = 0;

    /* Gates: a flag in mapped host memory the gate kernel spins on. */
    unsigned *gate_flag = nullptr;
    unsigned gate_generation = 0;

    /* Spans: pairs of events from a pool that is reused after each wait. */
    std::vector<cudaEvent_t> event_pool;
    size_t events_used = 0;
    /* Graphs to destroy once they have run (reap_graphs), and graphs kept for the final round. */
    std::vector<retiring> retiring_graphs;
    std::vector<kept_run> kept;
    double fastest_us = INFINITY; /* the fastest first sample of the current key, a launch */

    /* The instances in the order of their names, for find_instance. */
    std::vector<int> by_name;

    /* A build with KTUNE_TEST_KNOBS: the instance every timed launch of which is followed by a
     * delay of slow_ns (KTUNE_TEST_SLOW=<config>:<us>), a config made slower on purpose for the
     * tests of verify. -1: none. */
    int slow_instance = -1;
    unsigned long long slow_ns = 0;

    /* measure.cu */
    cudaError_t gate_close(unsigned *generation);
    void gate_open(unsigned generation);
    cudaError_t span_mark(span &s, bool end);
    double span_us(const span &s);
    bool event_done(int index);
    cudaError_t event_wait(int index);
    void reap_graphs();
    cudaError_t wait_all();
    void kept_drop(size_t i);
    void kept_add(const kept_run &k);
    void kept_clear();
    cudaError_t flush_l2();
    bool sample_evicts_itself(int per_sample, double bytes_per_launch);
    double sample_estimate_us(const timing &t);
    void retire(timing &t);
    cudaError_t call(const run &r, int set, cudaStream_t s);
    cudaError_t enqueue_probe(const run &r, timing &t);
    cudaError_t enqueue_warmup(const run &r, timing &t, double each, double warmup_us);
    cudaError_t enqueue_setup(const run &r, timing &t, precision p, double bytes_per_launch,
                              double warmup_us);
    cudaError_t enqueue_sample(const run &r, timing &t);
    void count_probe_as_sample(timing &t);
    measurement sample_times(timing &t);
    measurement finish(timing &t);
    bool take_kept(const run &r, timing &t, precision p);
    cudaError_t measure(const std::vector<run> &runs, std::vector<measurement> &out, precision p,
                        double bytes_per_launch, bool graph = true);
    double time_flush();
    cudaError_t rest_at_boost();

    /* check.cu */
    void fail_alone(trial &x, const char *what, cudaError_t *e);
    cudaError_t check_enqueue(std::vector<trial> &ts, span &all);
    cudaError_t check_result(trial &x, size_t i);
    void count_checks(const span &all);
    cudaError_t check_all(std::vector<trial> &ts);

    /* screen.cu */
    cudaError_t screen(std::vector<trial> &ts, double best_us = INFINITY);

    /* bench.cu */
    cudaError_t measure_ceiling();
    bool measure_vendors(long id, const char **names, std::vector<measurement> &m);
    bool measure_flops_ceiling(long id, const int64_t *key, double *flops_per_s);
    void bench(const ktune_request &r);

    /* worker_main.cu */
    void answer(ktune_request_kind kind, const ktune_answer &a);
    void fail(long id, const char *what, cudaError_t e);
    int find_instance(const char *name);
    bool use_key(long id, const int64_t *key);
};

/* Errors after which the context can still be used. */
bool recoverable(cudaError_t e);
