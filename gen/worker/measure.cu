/* Measurement: gates that hold the GPU while the host enqueues, spans of device time, L2 flushes,
 * graphs (built, kept for the final round, destroyed once run) and interleaved samples. */
#include <algorithm>
#include <math.h>
#include <time.h>

#include "worker_state.cuh"

/* A gate holds the stream while the host enqueues work that must run back to back on the GPU
 * (probes, rounds of samples), so that no span times the host's latency between two launches: a
 * kernel spins until the host opens the gate. It also opens by itself after gate_timeout_ns, so
 * that a host blocked in the driver cannot deadlock it: in a launch into a full queue, or in an
 * instantiation that waits for the device (in a trace of an exhaustive softmax sweep on an H100,
 * 7 gates held the GPU more than 10 ms, 0.31 s in all, one of them the whole 200 ms of the old
 * timeout). 10 ms is three times the GPU time of the largest piece, which the host enqueues in
 * less. */
constexpr unsigned long long gate_timeout_ns = 10000000ull;

/* The GPU's nanosecond timer. */
__device__ __forceinline__ unsigned long long globaltimer_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void gate_kernel(const volatile unsigned *flag, unsigned generation,
                            unsigned long long timeout_ns)
{
    const unsigned long long start = globaltimer_ns();
    do {
        if ((int)(*flag - generation) >= 0)
            return;
        __nanosleep(500);
    } while (globaltimer_ns() - start < timeout_ns);
}

/* Holds the GPU for ns nanoseconds with one thread, napping nap_ns between reads of the timer
 * (0: spinning): idle between precise samples, which leaves the power limit's budget to recover
 * while the clocks stay up (a GPU left without work drops them, and its next launch runs slower
 * while they come back); the test knob's delay, spinning so as not to overshoot short ones. */
__global__ void idle_kernel(unsigned long long ns, unsigned nap_ns)
{
    const unsigned long long start = globaltimer_ns();
    do
        if (nap_ns)
            __nanosleep(nap_ns);
    while (globaltimer_ns() - start < ns);
}

/* Closes a gate behind what is enqueued so far; *generation names it for gate_open. */
cudaError_t ktune_worker_state::gate_close(unsigned *generation)
{
    *generation = ++gate_generation;
    gate_kernel<<<1, 1, 0, stream>>>(gate_flag, gate_generation, gate_timeout_ns);
    return cudaGetLastError();
}

/* Opens the gate of that generation and every earlier one (a gate never closes again). */
void ktune_worker_state::gate_open(unsigned generation)
{
    if ((int)(generation - __atomic_load_n(gate_flag, __ATOMIC_ACQUIRE)) > 0)
        __atomic_store_n(gate_flag, generation, __ATOMIC_RELEASE);
}

cudaError_t gate_pipe::start(double first_us)
{
    pending_us = 0;
    piece_us = first_us;
    return w.gate_close(&held);
}

cudaError_t gate_pipe::pass(double us)
{
    pending_us += us;
    if (pending_us < piece_us)
        return cudaSuccess;
    pending_us = 0;
    piece_us = std::min(2 * piece_us, gate_piece_max_us);
    unsigned next = held;
    cudaError_t e = w.gate_close(&next);
    w.gate_open(held);
    held = next;
    return e;
}

void gate_pipe::finish() { w.gate_open(held); }

/* Starts a span (end false) or ends it, in the stream. */
cudaError_t ktune_worker_state::span_mark(span &s, bool end)
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
double ktune_worker_state::span_us(const span &s)
{
    float ms = 0;
    if (s.first < 0 ||
        cudaEventElapsedTime(&ms, event_pool[(size_t)s.first], event_pool[(size_t)s.first + 1]) !=
            cudaSuccess)
        return 0;
    return ms * 1000.0;
}

/* Whether the GPU has run what was enqueued before event `index` of the pool (no wait). */
bool ktune_worker_state::event_done(int index)
{
    return cudaEventQuery(event_pool[(size_t)index]) == cudaSuccess;
}

/* Destroys the graphs of retiring_graphs that have run. A graph is destroyed once it has run,
 * while the GPU runs later work: destroying graphs still to run slowed the samples enqueued after
 * them (a fifth of an exhaustive softmax sweep's configs by more than 8%, on an H100), and
 * graphs kept alive until the next wait made instantiating others slower (a graph of 256
 * launches took 0.54 ms to instantiate with no other graph alive, 1.47 ms with 200). */
void ktune_worker_state::reap_graphs()
{
    const double t0 = now_s();
    size_t left = 0;
    for (const retiring &r : retiring_graphs) {
        if (r.ran || (r.done >= 0 && event_done(r.done)))
            cudaGraphExecDestroy(r.exec);
        else
            retiring_graphs[left++] = r;
    }
    retiring_graphs.resize(left);
    spent.graph += now_s() - t0;
}

/* Everything enqueued has run: the spans can be read; then the pool is reused. */
cudaError_t ktune_worker_state::wait_all()
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
constexpr size_t max_kept = 8;

/* Hands a kept graph to reap_graphs (it has run: a request ends with a wait). */
void ktune_worker_state::kept_drop(size_t i)
{
    retiring_graphs.push_back({kept[i].exec, -1, true});
    kept.erase(kept.begin() + (long)i);
}

/* Keeps a run's graph (after the wait that timed it), in place of the same config's, then drops
 * the slowest of those not pinned beyond max_kept. */
void ktune_worker_state::kept_add(const kept_run &k)
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
void ktune_worker_state::kept_clear()
{
    while (!kept.empty())
        kept_drop(kept.size() - 1);
    fastest_us = INFINITY;
}


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
cudaError_t ktune_worker_state::flush_l2()
{
    flush_half ^= 1;
    const unsigned *p = static_cast<const unsigned *>(flush_buffer) +
                        flush_half * (flush_bytes / sizeof(unsigned));
    flush_kernel<<<flush_blocks, 512, 0, stream>>>(p, flush_bytes / l2_line_bytes, flush_sink);
    return cudaGetLastError();
}

static measurement summarize(std::vector<double> &t)
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
 * round again, so that the sample may hold several rounds of the sets and a screen's sample needs
 * no flush before it (a precise sample has one anyway: measure()): true when one launch moves as
 * many bytes as L2 holds, or the launches between two uses of a set do. One L2 of other data
 * between two uses of a line is what a flush reads, and evicts as well as two (on an H100, 4 MB
 * and 16 MB read after 1x and 2x the L2 of other reads took the same time; after 0.5x, 4 MB took
 * 17% less and 16 MB 13% less). */
bool ktune_worker_state::sample_evicts_itself(int per_sample, double bytes_per_launch)
{
    const double l2 = (double)l2_bytes;
    const int between = std::min(per_sample, nsets) - 1;
    return bytes_per_launch >= l2 || between * bytes_per_launch >= l2;
}

/* The GPU time of one of t's samples, by the probe, for the gates. */
double ktune_worker_state::sample_estimate_us(const timing &t)
{
    return t.per * t.each_us + (t.flush ? flush_us : 0);
}

/* Hands a run's graph to reap_graphs once its last sample is enqueued (a graph with no sample of
 * its own, the probe its only one, waits for the next wait: its upload follows the probe). */
void ktune_worker_state::retire(timing &t)
{
    const bool launched = t.samples.size() > (t.probe_is_sample ? 1u : 0u);
    if (t.exec)
        retiring_graphs.push_back({t.exec, launched ? t.samples.back().first + 1 : -1, false});
    t.exec = nullptr;
}

/* Runs r on input set `set` (with a build's test knob, the config it names and a delay). */
cudaError_t ktune_worker_state::call(const run &r, int set, cudaStream_t s)
{
    cudaError_t e = r.instance >= 0 ? fam.launch(r.instance, set, s) : r.call(r.ctx, set, s);
#if KTUNE_WORKER_TEST_KNOBS
    if (e == cudaSuccess && r.instance >= 0 && r.instance == slow_instance) {
        idle_kernel<<<1, 1, 0, s>>>(slow_ns, 0);
        e = cudaGetLastError();
    }
#endif
    return e;
}

/* The probe: one launch, timed. Enqueued behind a closed gate, it holds none of the host's launch
 * latency: a probe that did would set too few launches a sample, and the time of launching the
 * sample's graph would go into the sample. */
cudaError_t ktune_worker_state::enqueue_probe(const run &r, timing &t)
{
    cudaError_t e = span_mark(t.probe, false);
    if (e == cudaSuccess)
        e = call(r, 1 % nsets, stream);
    if (e == cudaSuccess)
        e = span_mark(t.probe, true);
    return e;
}

/* Launches lasting about warmup_us, `each` long. */
cudaError_t ktune_worker_state::enqueue_warmup(const run &r, timing &t, double each,
                                               double warmup_us)
{
    const int warm = (int)std::min(4096.0, ceil(warmup_us / each));
    if (warm <= 0)
        return cudaSuccess;
    cudaError_t e = span_mark(t.warm, false);
    for (int i = 0; i < warm && e == cudaSuccess; i++)
        e = call(r, i % nsets, stream);
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
cudaError_t ktune_worker_state::enqueue_setup(const run &r, timing &t, precision p,
                                              double bytes_per_launch, double warmup_us)
{
    const double each = std::max(span_us(t.probe), 0.01);
    t.each_us = each;
    t.per = (int)std::min(4096.0, std::max(1.0, ceil(p.min_sample_us / each)));
    if (t.per > nsets)
        t.per = (t.per + nsets - 1) / nsets * nsets;
    t.flush = !sample_evicts_itself(t.per, bytes_per_launch);
    if (t.flush)
        t.per = std::min(t.per, nsets);
    cudaError_t e = enqueue_warmup(r, t, each, warmup_us);
    if (e != cudaSuccess || !t.graph)
        return e;
    double t0 = now_s();
    cudaGraph_t graph = nullptr;
    e = cudaStreamBeginCapture(capture_stream, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess)
        return e;
    for (int i = 0; i < t.per && e == cudaSuccess; i++)
        e = call(r, i % nsets, capture_stream);
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

cudaError_t ktune_worker_state::enqueue_sample(const run &r, timing &t)
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
        e = call(r, i % nsets, stream);
    if (e == cudaSuccess)
        e = span_mark(s, true);
    t.samples.push_back(s);
    return e;
}

/* The probe as a config's first sample, where a sample holds one launch that evicts L2 by
 * itself: the probe then is a sample like the others (its set follows its own launches). */
void ktune_worker_state::count_probe_as_sample(timing &t)
{
    if (t.per == 1 && !t.flush && t.samples.empty()) {
        t.samples.push_back(t.probe);
        t.probe_is_sample = true;
    }
}

/* Once the last sample has run: the median and spread of the samples, and their time in the
 * accounts. */
measurement ktune_worker_state::sample_times(timing &t)
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
measurement ktune_worker_state::finish(timing &t)
{
    const measurement m = sample_times(t);
    retire(t);
    return m;
}

/* Waits for the GPU to have run what was enqueued before event `index` of the pool. */
cudaError_t ktune_worker_state::event_wait(int index)
{
    const double t0 = now_s();
    cudaError_t e = cudaEventSynchronize(event_pool[(size_t)index]);
    spent.wait += now_s() - t0;
    return e;
}


/* Takes a config's kept graph for a run of precise samples (none for runs of other kinds). */
bool ktune_worker_state::take_kept(const run &r, timing &t, precision p)
{
    for (size_t i = 0; i < kept.size(); i++) {
        const kept_run &k = kept[i];
        if (r.instance < 0 || k.instance != r.instance || p.min_sample_us != opt.precise.min_sample_us)
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
 * enqueued all of them); one wait. Each sample is followed by as long idle on the GPU
 * (idle_kernel, by the sample's estimate): every sample starts from the same state of the power
 * limit's budget, whatever the round holds and however long its runs are (a GPU holds its clock
 * only for some tens of milliseconds of a heavy load: a round of many long configs would time the
 * last ones at a lower clock than a round of two; README, "What a recorded time means"). Each
 * sample is preceded by an L2 flush, also where its launches evict L2 by themselves: what the GPU
 * ran before a sample changes the time of kernels of a few microseconds through the whole sample
 * (not the data L2 holds, which the sample's first launches replace), and a flush puts every
 * sample in the same state whatever ran before it. */
cudaError_t ktune_worker_state::measure(const std::vector<run> &runs, std::vector<measurement> &out,
                                        precision p, double bytes_per_launch, bool graph)
{
    std::vector<timing> t(runs.size());
    events_used = 0;
    gate_pipe gates(*this);
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
    for (timing &x : t)
        x.flush = true;
    for (int s = 0; s < p.samples && e == cudaSuccess; s++)
        for (size_t r = 0; r < runs.size() && e == cudaSuccess; r++) {
            const double us = sample_estimate_us(t[r]);
            e = enqueue_sample(runs[r], t[r]);
            if (e == cudaSuccess) {
                idle_kernel<<<1, 1, 0, stream>>>((unsigned long long)(us * 1e3), 1000);
                e = cudaGetLastError();
                spent.rest += us * 1e-6;
            }
            if (e == cudaSuccess)
                e = gates.pass(2 * us);
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

/* The time of one flush, for the accounts: measured as samples are (the accounts then start
 * afresh, this being the worker's start). */
double ktune_worker_state::time_flush()
{
    run flush;
    flush.call = [](void *state, int, cudaStream_t) {
        return static_cast<ktune_worker_state *>(state)->flush_l2();
    };
    flush.ctx = this;
    const std::vector<run> runs{flush};
    std::vector<measurement> m;
    nsets = 1;
    /* one flush a sample, each preceded by a flush as every precise sample is */
    cudaError_t e = measure(runs, m, {5, 0}, 2.0 * (double)l2_bytes, false);
    nsets = 0;
    spent = ktune_stats_answer();
    return e == cudaSuccess ? m[0].median_us : 0;
}

/* The SM clock (MHz) over a few microseconds of one thread: clock cycles over %globaltimer's
 * nanoseconds. */
__global__ void clock_probe_kernel(float *mhz)
{
    unsigned long long t1;
    const long long c0 = clock64();
    const unsigned long long t0 = globaltimer_ns();
    do
        t1 = globaltimer_ns();
    while (t1 - t0 < 3000);
    *mhz = (float)(clock64() - c0) * 1000.f / (float)(t1 - t0);
}

/* The host sleeps ms milliseconds (less than a second). */
static void sleep_ms(double ms)
{
    const struct timespec t = {0, (long)(ms * 1e6)};
    nanosleep(&t, nullptr);
}

/* Rests the GPU before a request's precise measurements: under a sustained load a GPU holds its
 * clock lower than at rest (README, "What a recorded time means"), and a compute-bound kernel's
 * time follows the clock, so that a time recorded after heavy keys and one re-measured after
 * light ones would differ by as much as the clocks do. Resting first makes every precise time
 * one taken from the peak clock, where a GPU at rest starts. Two conditions, both needed: idle
 * for as long as the GPU worked since the last rest, up to min_idle_ms (the power limit's
 * budget recovers over tens of milliseconds, while a one-thread probe reads the peak clock again
 * within a few, so that a rest ending at the probe's first reading left heavy kernels slower);
 * then until the probe reads the peak (within 5%), for at most max_rest_ms in all. */
cudaError_t ktune_worker_state::rest_at_boost()
{
    constexpr double min_idle_ms = 100, max_rest_ms = 250, step_ms = 2, near_peak = 0.95;
    if (peak_mhz <= 0)
        return cudaSuccess;
    const double t0 = now_s();
    cudaError_t e = cudaDeviceSynchronize(); /* idle from here */
    const double idle_ms = std::min(min_idle_ms, (now_s() - rested_at) * 1e3);
    if (e == cudaSuccess && idle_ms > 0)
        sleep_ms(idle_ms);
    for (double rested = idle_ms; e == cudaSuccess; rested += step_ms) {
        clock_probe_kernel<<<1, 1, 0, stream>>>(clock_probe);
        e = cudaMemcpyAsync(clock_probe_host, clock_probe, sizeof *clock_probe,
                            cudaMemcpyDeviceToHost, stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(stream);
        if (e != cudaSuccess || *clock_probe_host >= near_peak * peak_mhz ||
            rested >= max_rest_ms)
            break;
        sleep_ms(step_ms);
    }
    rested_at = now_s();
    spent.rest += rested_at - t0;
    return e;
}
