/* A sweep worker: reads requests on stdin, measures on the GPU, answers on stdout.
 *
 *   T <id> <config> <key...>            verify, then time one configuration (the screen's
 *                                       samples, which a staged search keeps short)
 *   X <id> <key...> [@<us>] <config>... T for several configurations at once (at most 128), with
 *                                       fewer waits: answers "ok" then a status (ok, wrong,
 *                                       failed, invalid), time, spread and samples a config; the
 *                                       details of those not ok come from T. With --screen-cut,
 *                                       a config far behind the fastest (the window's, or @us,
 *                                       the shape's so far) stops after one sample. A config
 *                                       written +<config> is one the M to come will time
 *   M <id> <key...> <config>...         time several configurations interleaved (A B C A B C ...)
 *   B <id> <key...> <tuned> <default>   bench: tuned, default, a copy of the same bytes, the copy
 *                                       ceiling (GB/s), the bytes one launch moves, and (0 where
 *                                       the family has none) the vendor library, the FLOPs of
 *                                       one launch, the vendor's FLOP/s on the ceiling key and
 *                                       the vendor's name (-)
 *   S <id>                              where this worker's time went since it started, in
 *                                       seconds: in timed samples, warm-ups, preparing inputs,
 *                                       checks, building graphs, inside requests in all, L2
 *                                       flushes, the checks' probes, waiting for the GPU
 *   Q                                   quit
 *
 * Answers: "H <limits> <driver> <runtime> <name>" first, the limits in KTUNE_DEVICE_LIMIT_MAP's
 * order (sm90a: 1 when the device runs this build's sm_90a code), then
 * "R <id> <status> <numbers...> [detail]" a request, status ok / wrong / failed / invalid.
 * "E <message>" and exit code 2 when no device is usable. After an error that leaves the CUDA
 * context unusable the worker answers, then exits with code 3; the parent starts another. */
#include <algorithm>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#include "worker.h"

namespace {

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
} opt;

/* Where the worker's time went, in seconds: device time in timed samples and in warm-ups; host
 * time preparing inputs; device time in checks (from a window's first check to its last, less
 * the probes that count as samples); host time building graphs (mostly while the GPU runs
 * earlier work) and inside requests in all; device time in L2 flushes before samples (their
 * count times the time of one, measured at start: a span around each would cost GPU time between
 * samples) and in the probes; host time waiting for the GPU to finish what it was given. */
struct accounts {
    double timed, warmup, prepare, check, graph, busy, flush, probe, wait;
} spent;

struct measurement {
    double median_us = 0, spread = 0;
    int samples = 0;
};

const ktune_worker_family &fam = ktune_worker_family_def;
/* Work runs on the first stream; graphs are captured on the second, while the first runs earlier
 * work, and uploaded in the first, between samples. An upload in a stream of its own, while
 * samples run, slowed graphs of short kernels: a softmax of one row of 128 floats took 1.92 to
 * 1.99 us a launch in the configs timed while the next configs' graphs were uploaded, 1.55 to
 * 1.62 us in the others and with the uploads in the first stream (an H100). */
cudaStream_t stream, capture_stream;
void *flush_buffer; /* zeros, twice flush_bytes */
unsigned *flush_sink;
int flush_blocks;
/* The checks of a screen: two counters a config ([0] elements out of tolerance, [1] the first),
 * and their starting values. */
constexpr int max_screen = 128;
unsigned long long *check_counters, check_counters_init[2 * max_screen];
unsigned long long *check_counters_host; /* pinned: copied there in groups (check_enqueue) */
size_t flush_bytes;
double flush_us; /* one flush's time, measured at start */
int64_t l2_bytes;
int64_t current_key[KTUNE_MAX_KEY];
int have_key, nsets;
double ceiling_gbps;

void reply(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void reply(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* Errors after which the context can still be used. */
bool recoverable(cudaError_t e)
{
    return e == cudaErrorInvalidConfiguration || e == cudaErrorLaunchOutOfResources ||
           e == cudaErrorMemoryAllocation || e == cudaErrorInvalidValue ||
           e == cudaErrorNotSupported || e == cudaErrorInvalidDeviceFunction ||
           e == cudaErrorInvalidClusterSize;
}

/* A gate holds the stream while the host enqueues work that must run back to back on the GPU
 * (probes, rounds of samples), so that no span times the host's latency between two launches: a
 * kernel spins until the host opens the gate. It also opens by itself after gate_timeout_ns, so
 * that a host blocked in the driver cannot deadlock it: in a launch into a full queue, or in an
 * instantiation that waits for the device (in a trace of an exhaustive softmax sweep on an H100,
 * 7 gates held the GPU more than 10 ms, 0.31 s in all, one of them the whole 200 ms of the old
 * timeout). 10 ms is three times the GPU time of the largest piece, which the host enqueues in
 * less. */
unsigned *gate_flag; /* mapped host memory */
unsigned gate_generation;
constexpr unsigned long long gate_timeout_ns = 10000000ull;

__global__ void gate_kernel(const volatile unsigned *flag, unsigned generation,
                            unsigned long long timeout_ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        if ((int)(*flag - generation) >= 0)
            return;
        __nanosleep(500);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < timeout_ns);
}

/* Closes a gate behind what is enqueued so far; *generation names it for gate_open. */
cudaError_t gate_close(unsigned *generation)
{
    *generation = ++gate_generation;
    gate_kernel<<<1, 1, 0, stream>>>(gate_flag, gate_generation, gate_timeout_ns);
    return cudaGetLastError();
}

/* Opens the gate of that generation and every earlier one (a gate never closes again). */
void gate_open(unsigned generation)
{
    if ((int)(generation - __atomic_load_n(gate_flag, __ATOMIC_ACQUIRE)) > 0)
        __atomic_store_n(gate_flag, generation, __ATOMIC_RELEASE);
}

/* Gates in a pipeline, for work enqueued piece by piece: the pieces wait behind the held gate,
 * which opens once the next gate is closed behind them, so the GPU runs pieces while the host
 * enqueues the next and no span holds the host's latency between two pieces. A gate costs the GPU
 * time (about 20 us between two configs of a screen on an H100), so pieces hold at least
 * gate_piece_us of GPU time (by estimate) at first, for the GPU to start soon, and twice as much
 * after each gate up to gate_piece_max_us, for few gates: the host enqueues a piece several times
 * faster than the GPU runs it. */
constexpr double gate_piece_us = 100, gate_piece_max_us = 3200;

struct gate_pipe {
    unsigned held = 0;
    double pending_us = 0, piece_us = gate_piece_us;
    /* first_us: the first piece's (smaller where the host is slow to enqueue it) */
    cudaError_t start(double first_us = gate_piece_us)
    {
        pending_us = 0;
        piece_us = first_us;
        return gate_close(&held);
    }
    /* After a piece of about us microseconds of GPU time. */
    cudaError_t pass(double us)
    {
        pending_us += us;
        if (pending_us < piece_us)
            return cudaSuccess;
        pending_us = 0;
        piece_us = std::min(2 * piece_us, gate_piece_max_us);
        unsigned next = held;
        cudaError_t e = gate_close(&next);
        gate_open(held);
        held = next;
        return e;
    }
    void finish() { gate_open(held); }
};

/* Reports a failed request; exits when the context is lost. */
void fail(long id, const char *what, cudaError_t e)
{
    gate_open(gate_generation);
    cudaGetLastError();
    cudaError_t sync = cudaStreamSynchronize(stream);
    bool lost = !recoverable(e) || sync != cudaSuccess;
    reply("R %ld failed 0 0 0 %s: %s%s\n", id, what, cudaGetErrorString(e),
          lost ? " (context lost)" : "");
    if (lost)
        exit(3);
}

double now_s()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Spans of device time: pairs of events from a pool that is reused after each wait. */
std::vector<cudaEvent_t> event_pool;
size_t events_used;

struct span {
    int first = -1;
};

cudaError_t span_mark(span &s, bool end)
{
    if (!end) {
        if (events_used + 2 > event_pool.size()) {
            cudaEvent_t a, b;
            cudaError_t e = cudaEventCreate(&a);
            if (e == cudaSuccess)
                e = cudaEventCreate(&b);
            if (e != cudaSuccess)
                return e;
            event_pool.push_back(a);
            event_pool.push_back(b);
        }
        s.first = (int)events_used;
        events_used += 2;
    }
    return cudaEventRecord(event_pool[(size_t)s.first + end], stream);
}

/* After a wait. */
double span_us(const span &s)
{
    float ms = 0;
    if (s.first < 0 ||
        cudaEventElapsedTime(&ms, event_pool[(size_t)s.first], event_pool[(size_t)s.first + 1]) !=
            cudaSuccess)
        return 0;
    return ms * 1000.0;
}

/* Whether the GPU has run what was enqueued before event `index` of the pool (no wait). */
bool event_done(int index) { return cudaEventQuery(event_pool[(size_t)index]) == cudaSuccess; }

/* Graphs whose last sample is enqueued, each with the pool index of the event that ends that
 * sample (-1: none), or known to have run (after a wait). A graph is destroyed once it has run,
 * while the GPU runs later work: destroying graphs still to run slowed the samples enqueued after
 * them (a fifth of an exhaustive softmax sweep's configs by more than 8%, on an H100), and
 * graphs kept alive until the next wait made instantiating others slower (a graph of 256
 * launches took 0.54 ms to instantiate with no other graph alive, 1.47 ms with 200). */
struct retiring {
    cudaGraphExec_t exec;
    int done;
    bool ran;
};
std::vector<retiring> retiring_graphs;

/* Destroys the graphs that have run. */
void reap_graphs()
{
    const double t0 = now_s();
    size_t kept = 0;
    for (const retiring &r : retiring_graphs) {
        if (r.ran || (r.done >= 0 && event_done(r.done)))
            cudaGraphExecDestroy(r.exec);
        else
            retiring_graphs[kept++] = r;
    }
    retiring_graphs.resize(kept);
    spent.graph += now_s() - t0;
}

/* Everything enqueued has run: the spans can be read; then the pool is reused. */
cudaError_t wait_all()
{
    reap_graphs();
    const double t0 = now_s();
    cudaError_t e = cudaStreamSynchronize(stream);
    spent.wait += now_s() - t0;
    if (e == cudaSuccess)
        for (retiring &r : retiring_graphs)
            r.ran = true;
    return e;
}

/* The graphs of the current key's fastest screened configs, where the screen's samples last as
 * long as the precise ones (an exhaustive search), for the final round to time as they are: no
 * probe, and no graph built while the GPU waits (in an exhaustive softmax sweep of 20 s on an
 * H100, 673 of the final rounds' 692 runs found their graph kept, and the rounds' time beyond
 * their samples and warm-ups went from 0.52 to 0.14 s, with the destroys moved out of the gates'
 * waits). The screen holds a config's graph until its first sample has run, then while that
 * sample is within hold_margin of the key's fastest (the max_held fastest at most: live graphs
 * make instantiating others slower); after the screen's wait, the max_kept fastest by median
 * stay, with the pinned ones (those the request marks, the final round's whatever their times:
 * the default and the committed config). */
struct kept_run {
    int instance, per;
    bool flush, pinned;
    cudaGraphExec_t exec;
    double us, each_us; /* the median a launch; the probe's (timing::each_us) */
};
std::vector<kept_run> kept;
constexpr size_t max_kept = 8, max_held = 12;
constexpr double hold_margin = 1.15;
double fastest_us = INFINITY; /* the fastest first sample of the current key, a launch */

/* Hands a kept graph to reap_graphs (it has run: a request ends with a wait). */
void kept_drop(size_t i)
{
    retiring_graphs.push_back({kept[i].exec, -1, true});
    kept.erase(kept.begin() + (long)i);
}

/* Keeps a run's graph (after the wait that timed it), in place of the same config's, then drops
 * the slowest of those not pinned beyond max_kept. */
void kept_add(const kept_run &k)
{
    for (size_t i = 0; i < kept.size(); i++)
        if (kept[i].instance == k.instance)
            kept_drop(i--);
    kept.push_back(k);
    std::sort(kept.begin(), kept.end(),
              [](const kept_run &a, const kept_run &b) { return a.us < b.us; });
    size_t unpinned = 0;
    for (size_t i = 0; i < kept.size(); i++)
        if (!kept[i].pinned && ++unpinned > max_kept)
            kept_drop(i--);
}

/* The inputs change: the graphs launch on the old ones. */
void kept_clear()
{
    while (!kept.empty())
        kept_drop(kept.size() - 1);
    fastest_us = INFINITY;
}

/* The L2's line: what a miss allocates, whichever of its 32-byte sectors it reads. */
constexpr size_t l2_line_bytes = 128;

/* Reads one word of each of n lines of p into L2 (not L1); sink is written only if their XOR is a
 * value no flush buffer of zeros can have, so that the reads are not optimized away. */
__global__ void flush_kernel(const unsigned *p, size_t n, unsigned *sink)
{
    constexpr size_t words = l2_line_bytes / sizeof(unsigned);
    unsigned x = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x ^= __ldcg(p + i * words);
    if (x == 0x9e3779b9u)
        *sink = x;
}

/* Pushes what L2 holds out of it: reads a word of as many lines as it holds, leaving it full of
 * clean lines. A write (a memset) would leave as many dirty lines, whose write-back the first
 * launch of the next sample would pay inside its time. On an H100 (50 MB of L2), a 16 MB copy
 * after a 50 MB memset took 14.0 us, after a 50 MB read 11.5 us, as after a 100 MB read: one L2
 * of reads evicts what was there as well as two. A word a line evicts as well as the whole line:
 * a 16 MB read took 9.3 us after either (7.9 with no flush), while the flush took 14.9 us instead
 * of 22.0 (18.4 instead of 28.4 when the 16 MB were written before it). Flushes read the two
 * halves of the buffer in turn, so that one never finds the last one's lines (which would time it
 * short at start). */
cudaError_t flush_l2()
{
    static int half;
    half ^= 1;
    const unsigned *p = static_cast<const unsigned *>(flush_buffer) +
                        half * (flush_bytes / sizeof(unsigned));
    flush_kernel<<<flush_blocks, 512, 0, stream>>>(p, flush_bytes / l2_line_bytes, flush_sink);
    return cudaGetLastError();
}

measurement summarize(std::vector<double> &t)
{
    measurement m;
    std::sort(t.begin(), t.end());
    size_t n = t.size();
    m.samples = (int)n;
    if (n == 0)
        return m;
    m.median_us = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    std::vector<double> dev(n);
    for (size_t i = 0; i < n; i++)
        dev[i] = fabs(t[i] - m.median_us);
    std::sort(dev.begin(), dev.end());
    double mad = n % 2 ? dev[n / 2] : (dev[n / 2 - 1] + dev[n / 2]) / 2;
    m.spread = m.median_us > 0 ? mad / m.median_us : 0;
    return m;
}

/* Whether a sample's launches push the data of its first launch out of L2 before that set comes
 * round again, so that the sample needs no flush before it: true when one launch moves as many
 * bytes as L2 holds, or the launches between two uses of a set do. One L2 of other data between
 * two uses of a line is what a flush reads, and evicts as well as two (on an H100, 4 MB and 16
 * MB read after 1x and 2x the L2 of other reads took the same time; after 0.5x, 4 MB took 17%
 * less and 16 MB 13% less). */
bool sample_evicts_itself(int per_sample, double bytes_per_launch)
{
    const double l2 = (double)l2_bytes;
    const int between = std::min(per_sample, nsets) - 1;
    return bytes_per_launch >= l2 || between * bytes_per_launch >= l2;
}

/* One run (a config, the copy, the vendor library) being timed: its probe, the launches a sample
 * holds, whether samples need a flush before them, its graph, its warm-up and its samples (the
 * probe first where it counts as one). */
struct timing {
    span probe, warm;
    int per = 1;
    bool flush = true, graph = true, probe_is_sample = false;
    cudaGraphExec_t exec = nullptr;
    double each_us = 0; /* a launch: the probe's time (the kept probe's, for a kept graph) */
    std::vector<span> samples;
};

/* The GPU time of one of t's samples, by the probe, for the gates. */
double sample_estimate_us(const timing &t)
{
    return t.per * t.each_us + (t.flush ? flush_us : 0);
}

/* Hands a run's graph to reap_graphs once its last sample is enqueued (a graph with no sample of
 * its own, the probe its only one, waits for the next wait: its upload follows the probe). */
void retire(timing &t)
{
    const bool launched = t.samples.size() > (t.probe_is_sample ? 1u : 0u);
    if (t.exec)
        retiring_graphs.push_back({t.exec, launched ? t.samples.back().first + 1 : -1, false});
    t.exec = nullptr;
}

/* The probe: one launch, timed. Enqueued behind a closed gate, it holds none of the host's launch
 * latency: a probe that did would set too few launches a sample, and the time of launching the
 * sample's graph would go into the sample. */
template <typename Run> cudaError_t enqueue_probe(Run &run, timing &t)
{
    cudaError_t e = span_mark(t.probe, false);
    if (e == cudaSuccess)
        e = run(1 % nsets, stream);
    if (e == cudaSuccess)
        e = span_mark(t.probe, true);
    return e;
}

/* Launches lasting about warmup_us, `each` long. */
template <typename Run>
cudaError_t enqueue_warmup(Run &run, timing &t, double each, double warmup_us)
{
    const int warm = (int)std::min(4096.0, ceil(warmup_us / each));
    if (warm <= 0)
        return cudaSuccess;
    cudaError_t e = span_mark(t.warm, false);
    for (int i = 0; i < warm && e == cudaSuccess; i++)
        e = run(i % nsets, stream);
    if (e == cudaSuccess)
        e = span_mark(t.warm, true);
    return e;
}

/* After the probe was read: the launches of a sample (enough to last min_sample_us; whole rounds
 * of the input sets when there are more launches than sets, so that every set is as long out of
 * use as the others; one round at most when the sample needs a flush, whose launches then all
 * find their data out of L2: with more, a second round would find it there, and configs whose
 * probes set one or two rounds would be timed on different terms, 20% apart for kernels of two
 * microseconds on an H100), the warm-up (launches lasting about warmup_us) and, for a graph run,
 * the sample's launches captured once into a graph, so that replaying it times the kernels
 * without the host's launch overhead between them (which would dominate kernels of a few
 * microseconds). Copies run as plain launches: a graph would hand them to the copy engines rather
 * than the path a stream's cudaMemcpyAsync takes. */
template <typename Run>
cudaError_t enqueue_setup(Run &run, timing &t, precision p, double bytes_per_launch,
                          double warmup_us)
{
    const double each = std::max(span_us(t.probe), 0.01);
    t.each_us = each;
    t.per = (int)std::min(4096.0, std::max(1.0, ceil(p.min_sample_us / each)));
    if (t.per > nsets)
        t.per = (t.per + nsets - 1) / nsets * nsets;
    t.flush = !sample_evicts_itself(t.per, bytes_per_launch);
    if (t.flush)
        t.per = std::min(t.per, nsets);
    cudaError_t e = enqueue_warmup(run, t, each, warmup_us);
    if (e != cudaSuccess || !t.graph)
        return e;
    double t0 = now_s();
    cudaGraph_t graph = nullptr;
    e = cudaStreamBeginCapture(capture_stream, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess)
        return e;
    for (int i = 0; i < t.per && e == cudaSuccess; i++)
        e = run(i % nsets, capture_stream);
    cudaError_t end = cudaStreamEndCapture(capture_stream, &graph);
    if (e == cudaSuccess)
        e = end;
    if (e == cudaSuccess)
        e = cudaGraphInstantiate(&t.exec, graph, 0);
    if (graph)
        cudaGraphDestroy(graph);
    if (e == cudaSuccess)
        e = cudaGraphUpload(t.exec, stream);
    spent.graph += now_s() - t0;
    return e;
}

template <typename Run> cudaError_t enqueue_sample(Run &run, timing &t)
{
    cudaError_t e = cudaSuccess;
    if (t.flush) {
        e = flush_l2();
        spent.flush += flush_us * 1e-6;
    }
    span s;
    if (e == cudaSuccess)
        e = span_mark(s, false);
    if (e == cudaSuccess && t.graph)
        e = cudaGraphLaunch(t.exec, stream);
    for (int i = 0; e == cudaSuccess && !t.graph && i < t.per; i++)
        e = run(i % nsets, stream);
    if (e == cudaSuccess)
        e = span_mark(s, true);
    t.samples.push_back(s);
    return e;
}

/* The probe as a config's first sample, where a sample holds one launch that evicts L2 by
 * itself: the probe then is a sample like the others (its set follows its own launches). */
void count_probe_as_sample(timing &t)
{
    if (t.per == 1 && !t.flush && t.samples.empty()) {
        t.samples.push_back(t.probe);
        t.probe_is_sample = true;
    }
}

/* Once the last sample has run: the median and spread of the samples, and their time in the
 * accounts. */
measurement sample_times(timing &t)
{
    std::vector<double> us;
    for (const span &s : t.samples) {
        const double x = span_us(s);
        spent.timed += x * 1e-6;
        us.push_back(x / t.per);
    }
    if (t.probe_is_sample) { /* in the check's time and the probes' too: counted as a sample */
        spent.check -= span_us(t.probe) * 1e-6;
        spent.probe -= span_us(t.probe) * 1e-6;
    }
    spent.warmup += span_us(t.warm) * 1e-6;
    return summarize(us);
}

/* After the wait: sample_times, and the graph retired. */
measurement finish(timing &t)
{
    const measurement m = sample_times(t);
    retire(t);
    return m;
}

/* Waits for the GPU to have run what was enqueued before event `index` of the pool. */
cudaError_t event_wait(int index)
{
    const double t0 = now_s();
    cudaError_t e = cudaEventSynchronize(event_pool[(size_t)index]);
    spent.wait += now_s() - t0;
    return e;
}

struct launch_run {
    int instance;
    cudaError_t operator()(int set, cudaStream_t s) const { return fam.launch(instance, set, s); }
};

/* Takes a config's kept graph for a run of precise samples (none for runs of other kinds). */
template <typename Run> bool take_kept(const Run &, timing &, precision) { return false; }
bool take_kept(const launch_run &run, timing &t, precision p)
{
    for (size_t i = 0; i < kept.size(); i++) {
        const kept_run &k = kept[i];
        if (k.instance != run.instance || p.min_sample_us != opt.precise.min_sample_us)
            continue;
        t.per = k.per;
        t.flush = k.flush;
        t.exec = k.exec;
        t.each_us = k.each_us;
        kept.erase(kept.begin() + (long)i);
        return true;
    }
    return false;
}

/* Interleaved measurement of several runs: probes of those with no kept graph; the warm-ups and
 * graphs of each run as soon as its probe has run (the host builds one run's graph while the GPU
 * warms the one before up), then rounds of one sample of every run (A B C A B C ...), in pieces
 * behind pipelined gates (the rounds behind one gate of their own held the GPU while the host
 * enqueued all of them); one wait. */
template <typename Run>
cudaError_t measure(std::vector<Run> &runs, std::vector<measurement> &out, precision p,
                    double bytes_per_launch, bool graph = true)
{
    std::vector<timing> t(runs.size());
    events_used = 0;
    gate_pipe gates;
    cudaError_t e = gates.start();
    for (size_t r = 0; r < runs.size() && e == cudaSuccess; r++) {
        t[r].graph = graph;
        if (!graph || !take_kept(runs[r], t[r], p))
            e = enqueue_probe(runs[r], t[r]);
    }
    gates.finish();
    if (e == cudaSuccess)
        e = gates.start();
    for (size_t r = 0; r < runs.size() && e == cudaSuccess; r++) {
        if (t[r].exec) {
            e = enqueue_warmup(runs[r], t[r], t[r].each_us, opt.warmup_us);
        } else {
            e = event_wait(t[r].probe.first + 1); /* the probe has run */
            if (e == cudaSuccess)
                e = enqueue_setup(runs[r], t[r], p, bytes_per_launch, opt.warmup_us);
        }
        if (e == cudaSuccess)
            e = gates.pass(opt.warmup_us);
    }
    for (int s = 0; s < p.samples && e == cudaSuccess; s++)
        for (size_t r = 0; r < runs.size() && e == cudaSuccess; r++) {
            e = enqueue_sample(runs[r], t[r]);
            if (e == cudaSuccess)
                e = gates.pass(sample_estimate_us(t[r]));
        }
    gates.finish();
    reap_graphs(); /* while the GPU runs the samples, not while it waits at a gate */
    for (timing &x : t)
        retire(x);
    if (e == cudaSuccess)
        e = wait_all();
    out.clear();
    for (timing &x : t)
        out.push_back(finish(x));
    return e;
}

struct copy_run {
    cudaError_t operator()(int set, cudaStream_t s) const { return fam.copy(set, s); }
};

/* The instances in the order of their names, for find_instance: a window of 128 configs looked
 * up one by one among a few hundred took about 0.1 ms, while the GPU waited for the request. */
std::vector<int> by_name;

int find_instance(const char *name)
{
    if (by_name.empty()) {
        for (int i = 0; i < fam.ninstances; i++)
            by_name.push_back(i);
        std::sort(by_name.begin(), by_name.end(), [](int a, int b) {
            return strcmp(fam.instances[a].name, fam.instances[b].name) < 0;
        });
    }
    auto at = std::lower_bound(by_name.begin(), by_name.end(), name, [](int i, const char *n) {
        return strcmp(fam.instances[i].name, n) < 0;
    });
    return at != by_name.end() && strcmp(fam.instances[*at].name, name) == 0 ? *at : -1;
}

/* Parses nkey integers. */
bool parse_key(long id, char **save, int64_t *key)
{
    for (int d = 0; d < fam.nkey; d++) {
        char *tok = strtok_r(NULL, " \n", save);
        if (!tok) {
            reply("R %ld failed 0 0 0 malformed request\n", id);
            return false;
        }
        key[d] = strtoll(tok, NULL, 10);
    }
    return true;
}

/* Prepares the inputs of key unless they are the current ones. */
bool use_key(long id, const int64_t *key)
{
    if (have_key && memcmp(key, current_key, sizeof current_key) == 0)
        return true;
    kept_clear();
    if (have_key)
        fam.release();
    have_key = 0;
    cudaError_t e = cudaSuccess;
    double t0 = now_s();
    nsets = fam.prepare(key, l2_bytes, &e);
    spent.prepare += now_s() - t0;
    if (nsets < 1) {
        fail(id, "preparing the inputs", e);
        return false;
    }
    memcpy(current_key, key, sizeof current_key);
    have_key = 1;
    return true;
}

bool take_key(long id, char **save)
{
    int64_t key[KTUNE_MAX_KEY] = {0};
    return parse_key(id, save, key) && use_key(id, key);
}

/* A config of a screen: its instance (-1: not compiled in), what became of it, its check (done:
 * its counters are on the host; the output's shape), its timing. */
struct trial {
    int instance = -1;
    const char *status = "ok";
    char detail[512] = "";
    span checked;
    int64_t rows = 0, cols = 0;
    timing t;
    bool pinned = false; /* its graph kept for the final round whatever its time */
    measurement m;
    bool timed = false; /* m is known */
    bool ok() const { return instance >= 0 && strcmp(status, "ok") == 0; }
};

/* A launch error the context survives fails the config alone (*e cleared); others stay in *e. */
void fail_alone(trial &x, const char *what, cudaError_t *e)
{
    if (*e == cudaSuccess || !recoverable(*e))
        return;
    cudaGetLastError();
    x.status = "failed";
    snprintf(x.detail, sizeof x.detail, "%s: %s", what, cudaGetErrorString(*e));
    *e = cudaSuccess;
}

/* Enqueues the checks of configs (those of ts with an instance), in pieces behind pipelined
 * gates, waiting for none: each poisons the output, runs the config on set 0 (timed: the config's
 * probe) and compares. The counters go to the host in groups of consecutive configs, one copy a
 * group, the first of one config, each twice as long as the last up to max_check_group (in a
 * trace of an exhaustive softmax sweep on an H100, a copy a check and the GPU's idle time around
 * it took 12.8 us a check). `all` spans them. A config whose launch fails where the
 * context survives is failed alone; an error that loses the context is returned. check_result
 * then reads a config's outcome as soon as its group's copy has run. */
constexpr size_t max_check_group = 16;
/* A check's GPU time for the gates, which is not known before its probe: a piece of
 * gate_piece_us holds 8. */
constexpr double check_gate_us = gate_piece_us / 8;

cudaError_t check_enqueue(std::vector<trial> &ts, span &all)
{
    events_used = 0;
    const size_t n = ts.size();
    gate_pipe gates;
    cudaError_t e = n <= (size_t)max_screen ? cudaSuccess : cudaErrorInvalidValue;
    if (e == cudaSuccess) /* the first piece one check: the host enqueues it in microseconds */
        e = gates.start(check_gate_us);
    if (e == cudaSuccess)
        e = span_mark(all, false);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(check_counters, check_counters_init, sizeof check_counters_init,
                            cudaMemcpyHostToDevice, stream);
    size_t group = 0, group_size = 1; /* the first config whose counters are not copied yet */
    for (size_t i = 0; i < n && e == cudaSuccess; i++) {
        trial &x = ts[i];
        if (x.instance >= 0) {
            e = fam.poison(stream);
            if (e == cudaSuccess)
                e = span_mark(x.t.probe, false);
            if (e == cudaSuccess)
                e = fam.launch(x.instance, 0, stream);
            if (e == cudaSuccess)
                e = span_mark(x.t.probe, true);
            if (e == cudaSuccess)
                e = fam.compare(stream, check_counters + 2 * i, &x.rows, &x.cols);
            fail_alone(x, "check", &e);
        }
        if (e == cudaSuccess && (i + 1 - group == group_size || i + 1 == n)) {
            span copied;
            e = cudaMemcpyAsync(check_counters_host + 2 * group, check_counters + 2 * group,
                                2 * (i + 1 - group) * sizeof *check_counters,
                                cudaMemcpyDeviceToHost, stream);
            if (e == cudaSuccess)
                e = span_mark(copied, false);
            for (; group <= i; group++)
                ts[group].checked = copied;
            group_size = std::min(2 * group_size, max_check_group);
        }
        if (e == cudaSuccess && x.instance >= 0)
            e = gates.pass(check_gate_us);
    }
    if (e == cudaSuccess)
        e = span_mark(all, true);
    gates.finish();
    return e;
}

/* Waits for the check of x (ts[i] of check_enqueue) to have run, then marks x wrong if it was. */
cudaError_t check_result(trial &x, size_t i)
{
    cudaError_t e = event_wait(x.checked.first);
    if (e != cudaSuccess)
        return e;
    spent.probe += span_us(x.t.probe) * 1e-6;
    const unsigned long long *bad = check_counters_host + 2 * i;
    if (x.ok() && bad[0] != 0) {
        x.status = "wrong";
        snprintf(x.detail, sizeof x.detail,
                 "%llu of %lld elements out of tolerance; first at row %lld col %lld", bad[0],
                 (long long)(x.rows * x.cols), (long long)(bad[1] / x.cols),
                 (long long)(bad[1] % x.cols));
    }
    return cudaSuccess;
}

/* The checks' device time, after the wait that follows them. */
void count_checks(const span &all) { spent.check += span_us(all) * 1e-6; }

/* Verifies configs and waits for the outcome. */
cudaError_t check_all(std::vector<trial> &ts)
{
    span all;
    cudaError_t e = check_enqueue(ts, all);
    if (e == cudaSuccess)
        e = wait_all();
    for (size_t i = 0; i < ts.size() && e == cudaSuccess; i++)
        if (ts[i].ok())
            e = check_result(ts[i], i);
    if (e == cudaSuccess)
        count_checks(all);
    return e;
}

/* Verifies, then times, configs with the screen's samples (precise ones when none are given),
 * with no warm-up besides the check's launch. The checks are enqueued first, all of them; then,
 * config after config as soon as its own check has run (the host builds a config's graph while
 * the GPU checks the next ones), its first sample, or all of them where there is no cut, in
 * pieces behind pipelined gates; one wait. With a cut, a config whose first sample takes more
 * than screen_cut times the fastest first sample (the window's, or `best_us`, the shape's fastest
 * so far) stops there; the others' remaining samples follow, behind pipelined gates; one wait. */
cudaError_t screen(std::vector<trial> &ts, double best_us = INFINITY)
{
    precision p = opt.precise;
    if (opt.screen.samples > 0)
        p.samples = opt.screen.samples;
    if (opt.screen.min_sample_us > 0)
        p.min_sample_us = opt.screen.min_sample_us;
    const bool cut = opt.screen_cut > 0 && p.samples > 1;
    const size_t n = ts.size();
    auto first_us = [](const trial &x) { return span_us(x.t.samples[0]) / x.t.per; };
    /* Configs whose last sample is enqueued: retired, or pending for `kept` (where the final
     * round can use their graphs) until their first sample has run (all: after the wait), then
     * held or retired. */
    const bool keep = p.min_sample_us == opt.precise.min_sample_us;
    std::vector<trial *> pending, held;
    auto done = [&](trial &x) {
        if (keep && x.ok() && x.pinned)
            return; /* kept after the wait, whatever its time */
        if (keep && x.ok() && x.t.exec && !x.t.samples.empty())
            pending.push_back(&x);
        else
            retire(x.t);
    };
    auto settle = [&](bool all) {
        size_t left = 0;
        for (trial *x : pending) {
            if (!all && !event_done(x->t.samples[0].first + 1)) {
                pending[left++] = x;
                continue;
            }
            fastest_us = std::min(fastest_us, first_us(*x));
            held.push_back(x);
        }
        pending.resize(left);
        std::sort(held.begin(), held.end(),
                  [&](trial *a, trial *b) { return first_us(*a) < first_us(*b); });
        while (!held.empty() && (held.size() > max_held ||
                                 first_us(*held.back()) > hold_margin * fastest_us)) {
            retire(held.back()->t);
            held.pop_back();
        }
    };
    /* Configs whose samples have all run are timed while the GPU runs later ones' (the spans of
     * a window read after its wait held the GPU 0.33 ms a window of an exhaustive softmax sweep
     * on an H100): ts[0..timed_upto) are timed or have nothing to time yet. */
    size_t timed_upto = 0;
    auto time_ready = [&](size_t upto) {
        for (; timed_upto < upto; timed_upto++) {
            trial &y = ts[timed_upto];
            if (!y.ok() || y.t.samples.size() < (size_t)p.samples)
                continue;
            if (!event_done(y.t.samples.back().first + 1))
                break;
            y.m = sample_times(y.t);
            y.timed = true;
        }
    };
    span checks;
    cudaError_t e = check_enqueue(ts, checks);
    if (e != cudaSuccess)
        return e;
    const double bytes = fam.bytes(current_key);
    gate_pipe gates;
    e = gates.start();
    for (size_t i = 0; i < n && e == cudaSuccess; i++) {
        trial &x = ts[i];
        if (!x.ok())
            continue;
        e = check_result(x, i);
        if (e != cudaSuccess || !x.ok())
            continue;
        launch_run run{x.instance};
        e = enqueue_setup(run, x.t, p, bytes, 0);
        if (e == cudaSuccess)
            count_probe_as_sample(x.t);
        const int first = (int)x.t.samples.size(), last = cut ? 1 : p.samples;
        for (int r = first; r < last && e == cudaSuccess; r++)
            e = enqueue_sample(run, x.t);
        fail_alone(x, "timing", &e);
        if (!cut)
            done(x);
        settle(false);
        if (e == cudaSuccess)
            e = gates.pass((last - first) * sample_estimate_us(x.t));
        reap_graphs();
        if (!cut)
            time_ready(i);
    }
    gates.finish();
    if (e == cudaSuccess)
        e = wait_all();
    if (e == cudaSuccess)
        count_checks(checks);
    if (e == cudaSuccess && cut) {
        for (const trial &x : ts)
            if (x.ok())
                best_us = std::min(best_us, first_us(x));
        e = gates.start();
        timed_upto = 0;
        for (size_t i = 0; i < n && e == cudaSuccess; i++) {
            trial &x = ts[i];
            if (!x.ok() || first_us(x) > opt.screen_cut * best_us) {
                retire(x.t);
                continue;
            }
            launch_run run{x.instance};
            for (int r = 1; r < p.samples && e == cudaSuccess; r++)
                e = enqueue_sample(run, x.t);
            fail_alone(x, "timing", &e);
            done(x);
            settle(false);
            if (e == cudaSuccess)
                e = gates.pass((p.samples - 1) * sample_estimate_us(x.t));
            time_ready(i);
        }
        gates.finish();
        reap_graphs();
        if (e == cudaSuccess)
            e = wait_all();
    }
    if (e == cudaSuccess)
        settle(true);
    for (trial &x : ts) {
        if (!x.ok()) {
            retire(x.t);
            continue;
        }
        const bool hold = e == cudaSuccess && x.t.exec &&
                          (x.pinned || std::count(held.begin(), held.end(), &x) > 0);
        if (!x.timed)
            x.m = sample_times(x.t);
        const cudaGraphExec_t exec = hold ? x.t.exec : nullptr;
        if (hold)
            x.t.exec = nullptr;
        else
            retire(x.t);
        if (exec)
            kept_add({x.instance, x.t.per, x.t.flush, x.pinned, exec, x.m.median_us,
                      x.t.each_us});
    }
    return e;
}

void do_trial(long id, char **save)
{
    const char *config = strtok_r(NULL, " \n", save);
    std::vector<trial> ts(1);
    ts[0].instance = config ? find_instance(config) : -1;
    if (ts[0].instance < 0) {
        reply("R %ld invalid 0 0 0 %s is not compiled into this worker\n", id,
              config ? config : "(none)");
        return;
    }
    if (!take_key(id, save))
        return;
    cudaError_t e = screen(ts);
    if (e != cudaSuccess)
        return fail(id, "check and timing", e);
    if (!ts[0].ok())
        reply("R %ld %s 0 0 0 %s\n", id, ts[0].status, ts[0].detail);
    else
        reply("R %ld ok %.4f %.5f %d\n", id, ts[0].m.median_us, ts[0].m.spread, ts[0].m.samples);
}

void do_screen(long id, char **save)
{
    if (!take_key(id, save))
        return;
    std::vector<trial> ts;
    double best_us = INFINITY;
    for (char *tok = strtok_r(NULL, " \n", save); tok; tok = strtok_r(NULL, " \n", save)) {
        if (tok[0] == '@' && ts.empty()) {
            const double us = atof(tok + 1);
            best_us = us > 0 ? us : INFINITY;
            continue;
        }
        if (ts.size() == (size_t)max_screen) {
            reply("R %ld failed 0 0 0 more than %d configs\n", id, max_screen);
            return;
        }
        ts.emplace_back();
        ts.back().pinned = tok[0] == '+';
        ts.back().instance = find_instance(tok + ts.back().pinned);
    }
    cudaError_t e = screen(ts, best_us);
    if (e != cudaSuccess)
        return fail(id, "screening", e);
    printf("R %ld ok", id);
    for (const trial &x : ts)
        printf(" %s %.4f %.5f %d", x.instance < 0 ? "invalid" : x.status, x.m.median_us, x.m.spread,
               x.m.samples);
    reply("\n");
}

void do_interleaved(long id, char **save)
{
    if (!take_key(id, save))
        return;
    std::vector<launch_run> runs;
    for (char *tok = strtok_r(NULL, " \n", save); tok; tok = strtok_r(NULL, " \n", save)) {
        int instance = find_instance(tok);
        if (instance < 0) {
            reply("R %ld invalid 0 0 0 %s is not compiled into this worker\n", id, tok);
            return;
        }
        runs.push_back({instance});
    }
    std::vector<measurement> m;
    cudaError_t e = measure(runs, m, opt.precise, fam.bytes(current_key));
    if (e != cudaSuccess)
        return fail(id, "timing", e);
    printf("R %ld ok", id);
    for (auto &x : m)
        printf(" %.4f %.5f", x.median_us, x.spread);
    reply("\n");
}

/* The time of one flush, for the accounts: measured as samples are (the accounts then start
 * afresh, this being the worker's start). */
double time_flush()
{
    auto run = [](int, cudaStream_t) { return flush_l2(); };
    std::vector<decltype(run)> runs{run};
    std::vector<measurement> m;
    nsets = 1;
    /* one flush a sample; a flush evicts L2 by itself, so none before its samples */
    cudaError_t e = measure(runs, m, {5, 0}, 2.0 * (double)l2_bytes, false);
    nsets = 0;
    spent = accounts();
    return e == cudaSuccess ? m[0].median_us : 0;
}

cudaError_t measure_ceiling()
{
    if (ceiling_gbps > 0)
        return cudaSuccess;
    const size_t bytes = (size_t)1 << 30;
    void *a, *b;
    cudaError_t e = cudaMalloc(&a, bytes);
    if (e != cudaSuccess)
        return e;
    e = cudaMalloc(&b, bytes);
    if (e != cudaSuccess) {
        cudaFree(a);
        return e;
    }
    cudaMemsetAsync(a, 1, bytes, stream);
    auto run = [&](int, cudaStream_t s) {
        return cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s);
    };
    std::vector<decltype(run)> runs{run};
    std::vector<measurement> m;
    int saved = nsets;
    nsets = 1;
    e = measure(runs, m, opt.precise, 2.0 * (double)bytes, false);
    nsets = saved;
    cudaFree(a);
    cudaFree(b);
    if (e == cudaSuccess)
        ceiling_gbps = 2.0 * (double)bytes / (m[0].median_us * 1e3);
    return e;
}

struct vendor_run {
    cudaError_t operator()(int set, cudaStream_t s) const { return fam.vendor(set, s); }
};

/* The vendor library's throughput (FLOP/s) on the family's ceiling key for key's types, measured
 * once a ceiling key. */
bool measure_flops_ceiling(long id, const int64_t *key, double *flops_per_s)
{
    static int64_t done_keys[8][KTUNE_MAX_KEY];
    static double done_values[8];
    static int ndone;
    *flops_per_s = 0;
    if (!fam.vendor)
        return true;
    int64_t ck[KTUNE_MAX_KEY] = {0};
    fam.ceiling_key(key, ck);
    for (int i = 0; i < ndone; i++)
        if (memcmp(done_keys[i], ck, sizeof ck) == 0) {
            *flops_per_s = done_values[i];
            return true;
        }
    if (!use_key(id, ck))
        return false;
    std::vector<vendor_run> runs{{}};
    std::vector<measurement> m;
    cudaError_t e = measure(runs, m, opt.precise, fam.bytes(ck));
    if (e != cudaSuccess) {
        fail(id, "timing the vendor library's ceiling", e);
        return false;
    }
    *flops_per_s = fam.flops(ck) / (m[0].median_us * 1e-6);
    if (ndone < 8) {
        memcpy(done_keys[ndone], ck, sizeof ck);
        done_values[ndone++] = *flops_per_s;
    }
    return true;
}

void do_bench(long id, char **save)
{
    cudaError_t e = measure_ceiling();
    if (e != cudaSuccess)
        return fail(id, "measuring the copy ceiling", e);
    int64_t key[KTUNE_MAX_KEY] = {0};
    double flops_ceiling = 0;
    if (!parse_key(id, save, key) || !measure_flops_ceiling(id, key, &flops_ceiling) ||
        !use_key(id, key))
        return;
    int inst[2];
    std::vector<trial> ts(2);
    for (int i = 0; i < 2; i++) {
        const char *tok = strtok_r(NULL, " \n", save);
        inst[i] = ts[i].instance = tok ? find_instance(tok) : -1;
        if (inst[i] < 0) {
            reply("R %ld invalid 0 0 0 %s is not compiled into this worker\n", id,
                  tok ? tok : "(none)");
            return;
        }
    }
    e = check_all(ts);
    if (e != cudaSuccess)
        return fail(id, "check", e);
    for (int i = 0; i < 2; i++)
        if (!ts[i].ok()) {
            reply("R %ld %s 0 0 0 %s: %s\n", id, ts[i].status, fam.instances[inst[i]].name,
                  ts[i].detail);
            return;
        }
    const double bytes = fam.bytes(current_key);
    std::vector<launch_run> runs{{inst[0]}, {inst[1]}};
    std::vector<measurement> m;
    e = measure(runs, m, opt.precise, bytes);
    if (e != cudaSuccess)
        return fail(id, "timing", e);
    std::vector<copy_run> copies{{}};
    std::vector<measurement> c;
    e = measure(copies, c, opt.precise, bytes, false);
    if (e != cudaSuccess)
        return fail(id, "timing the copy", e);
    measurement v;
    if (fam.vendor) {
        std::vector<vendor_run> vendors{{}};
        std::vector<measurement> vm;
        e = measure(vendors, vm, opt.precise, bytes);
        if (e != cudaSuccess)
            return fail(id, "timing the vendor library", e);
        v = vm[0];
    }
    reply("R %ld ok %.4f %.5f %.4f %.5f %.4f %.5f %.2f %.0f %.4f %.5f %.0f %.0f %s\n", id,
          m[0].median_us, m[0].spread, m[1].median_us, m[1].spread, c[0].median_us, c[0].spread,
          ceiling_gbps, fam.bytes(current_key), v.median_us, v.spread,
          fam.flops ? fam.flops(current_key) : 0.0, flops_ceiling,
          fam.vendor_name ? fam.vendor_name : "-");
}

void do_stats(long id)
{
    reply("R %ld ok %.6f %.6f %.6f %.6f %.6f %.6f %.6f %.6f %.6f\n", id, spent.timed,
          spent.warmup, spent.prepare, spent.check, spent.graph, spent.busy, spent.flush,
          spent.probe, spent.wait);
}

int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--samples N] [--min-sample-us U] [--screen-samples N]\n"
            "          [--screen-min-sample-us U] [--screen-cut F] [--warmup-us U] [--device D]\n"
            "Started by ktune sweep, bench and verify; requests on stdin, answers on stdout.\n",
            argv0);
    return 1;
}

} // namespace

void *ktune_worker_arena(size_t bytes, cudaError_t *error)
{
    static void *block;
    static size_t block_bytes;
    if (bytes > block_bytes) {
        cudaFree(block);
        block = nullptr;
        block_bytes = 0;
        const cudaError_t e = cudaMalloc(&block, bytes);
        if (e != cudaSuccess) {
            block = nullptr;
            *error = e;
            return nullptr;
        }
        block_bytes = bytes;
    }
    return block;
}

/* Why there is no device to measure on, in words a user can act on. */
static const char *device_error_text(cudaError_t e)
{
    switch (e) {
    case cudaErrorInsufficientDriver:
        return "no NVIDIA driver is loaded, or it is older than this CUDA runtime needs "
               "(cudaErrorInsufficientDriver)";
    case cudaErrorNoDevice:
        return "the driver sees no CUDA device (cudaErrorNoDevice; is CUDA_VISIBLE_DEVICES "
               "empty?)";
    case cudaErrorInvalidDevice:
        return "there is no device of that number (cudaErrorInvalidDevice; see --gpu)";
    default:
        return cudaGetErrorString(e);
    }
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            return usage(argv[0]);
        if (strcmp(argv[i], "--samples") == 0)
            opt.precise.samples = std::max(1, atoi(argv[++i]));
        else if (strcmp(argv[i], "--min-sample-us") == 0)
            opt.precise.min_sample_us = atof(argv[++i]);
        else if (strcmp(argv[i], "--screen-samples") == 0)
            opt.screen.samples = std::max(0, atoi(argv[++i]));
        else if (strcmp(argv[i], "--screen-min-sample-us") == 0)
            opt.screen.min_sample_us = atof(argv[++i]);
        else if (strcmp(argv[i], "--screen-cut") == 0)
            opt.screen_cut = std::max(0.0, atof(argv[++i]));
        else if (strcmp(argv[i], "--warmup-us") == 0)
            opt.warmup_us = atof(argv[++i]);
        else if (strcmp(argv[i], "--device") == 0)
            opt.device = atoi(argv[++i]);
        else
            return usage(argv[0]);
    }
    /* every candidate's code loaded at start: a kernel's first launch, the check's, which times
     * the probe, must not carry the loading of its module */
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    cudaDeviceProp p;
    int driver = 0, runtime = 0;
    cudaError_t e = cudaSetDevice(opt.device);
    if (e == cudaSuccess)
        e = cudaGetDeviceProperties(&p, opt.device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&capture_stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaMalloc(&check_counters, sizeof check_counters_init);
    if (e == cudaSuccess)
        e = cudaHostAlloc(&check_counters_host, sizeof check_counters_init, cudaHostAllocDefault);
    if (e == cudaSuccess)
        e = cudaHostAlloc(&gate_flag, sizeof *gate_flag, cudaHostAllocMapped);
    if (e == cudaSuccess)
        *gate_flag = gate_generation;
    for (int i = 0; i < max_screen; i++)
        check_counters_init[2 * i + 1] = ~0ULL;
    if (e != cudaSuccess) {
        reply("E no usable CUDA device %d: %s\n", opt.device, device_error_text(e));
        return 2;
    }
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    l2_bytes = p.l2CacheSize;
    flush_bytes = (size_t)std::max<int64_t>(l2_bytes, 1 << 20) / l2_line_bytes * l2_line_bytes;
    flush_blocks = 4 * p.multiProcessorCount;
    e = cudaMalloc(&flush_buffer, 2 * flush_bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(&flush_sink, sizeof *flush_sink);
    if (e == cudaSuccess)
        e = cudaMemset(flush_buffer, 0, 2 * flush_bytes);
    if (e != cudaSuccess) {
        reply("E cannot allocate the L2 flush buffer: %s\n", cudaGetErrorString(e));
        return 2;
    }
    flush_us = time_flush();
    ktune_device dev;
    dev.sms = p.multiProcessorCount;
    dev.cc = p.major * 10 + p.minor;
    dev.max_threads = p.maxThreadsPerBlock;
    dev.smem_per_block = (int64_t)p.sharedMemPerBlockOptin;
    dev.l2_bytes = p.l2CacheSize;
    dev.sm90a = dev.cc == 90 && KTUNE_SM90A;
    char limits[512];
    int used = 0;
#define KTUNE_LIMIT_PRINT(name, type, what)                                                        \
    used += snprintf(limits + used, sizeof limits - (size_t)used, " %lld", (long long)dev.name);
    KTUNE_DEVICE_LIMIT_MAP(KTUNE_LIMIT_PRINT)
#undef KTUNE_LIMIT_PRINT
    reply("H%s %d.%d %d.%d %s\n", limits, driver / 1000, (driver % 1000) / 10, runtime / 1000,
          (runtime % 1000) / 10, p.name);
    char line[16384];
    while (fgets(line, sizeof line, stdin)) {
        char *save = NULL;
        char *cmd = strtok_r(line, " \n", &save);
        if (!cmd)
            continue;
        if (strcmp(cmd, "Q") == 0)
            break;
        char *idtok = strtok_r(NULL, " \n", &save);
        long id = idtok ? strtol(idtok, NULL, 10) : -1;
        double t0 = now_s();
        if (strcmp(cmd, "T") == 0)
            do_trial(id, &save);
        else if (strcmp(cmd, "X") == 0)
            do_screen(id, &save);
        else if (strcmp(cmd, "M") == 0)
            do_interleaved(id, &save);
        else if (strcmp(cmd, "B") == 0)
            do_bench(id, &save);
        else if (strcmp(cmd, "S") == 0)
            do_stats(id);
        else
            reply("R %ld failed 0 0 0 unknown request '%s'\n", id, cmd);
        spent.busy += now_s() - t0;
    }
    if (have_key)
        fam.release();
    return 0;
}
