/* A sweep worker: reads requests on stdin, measures on the GPU, answers on stdout.
 *
 *   T <id> <config> <key...>            verify, then time one configuration (the screen's
 *                                       samples, which a staged search keeps short)
 *   M <id> <key...> <config>...         time several configurations interleaved (A B C A B C ...)
 *   B <id> <key...> <tuned> <default>   bench: tuned, default, a copy of the same bytes, the copy
 *                                       ceiling (GB/s), the bytes one launch moves, and (0 where
 *                                       the family has none) the vendor library, the FLOPs of
 *                                       one launch, the vendor's FLOP/s on the ceiling key and
 *                                       the vendor's name (-)
 *   S <id>                              where this worker's time went since it started: in
 *                                       timed samples, preparing inputs, checks, warm-up and
 *                                       calibration, building graphs, flushes and
 *                                       synchronization around the samples (seconds each)
 *   Q                                   quit
 *
 * Answers: "H <sms> <cc> <max_threads> <smem_per_block> <l2_bytes> <driver> <runtime> <name>"
 * first, then "R <id> <status> <numbers...> [detail]" a request, status ok / wrong / failed /
 * invalid. "E <message>" and exit code 2 when no device is usable. After an error that leaves the
 * CUDA context unusable the worker answers, then exits with code 3; the parent starts another. */
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
    double warmup_us = 200;
    int device = 0;
} opt;

/* Where the worker's time went (seconds of host time, except timed: the samples' event time). */
struct accounts {
    double timed, prepare, check, warmup, graph, around_samples;
} spent;

struct measurement {
    double median_us = 0, spread = 0;
    int samples = 0;
};

const ktune_worker_family &fam = ktune_worker_family_def;
cudaStream_t stream;
void *flush_buffer;
size_t flush_bytes;
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

/* Reports a failed request; exits when the context is lost. */
void fail(long id, const char *what, cudaError_t e)
{
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

/* Device time of what body enqueues on the stream, by events around it. */
template <typename Body> cudaError_t time_events(Body body, double *us)
{
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaError_t e = cudaEventRecord(a, stream);
    if (e == cudaSuccess)
        e = body();
    if (e == cudaSuccess)
        e = cudaEventRecord(b, stream);
    if (e == cudaSuccess)
        e = cudaEventSynchronize(b);
    float ms = 0;
    if (e == cudaSuccess)
        e = cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    *us = ms * 1000.0;
    return e;
}

template <typename Run> cudaError_t time_batch(Run run, int count, int first, double *us)
{
    return time_events(
        [&] {
            cudaError_t e = cudaSuccess;
            for (int i = 0; i < count && e == cudaSuccess; i++)
                e = run((first + i) % nsets);
            return e;
        },
        us);
}

/* Launches a sample must hold to last min_sample_us: one launch (the check ran the code once
 * already), then, unless that one lasted warmup_us, a batch lasting about warmup_us, which warms
 * the clocks and gives the time of a launch among others. When a sample holds more launches than
 * there are input sets it holds whole rounds of them, so that every set is as long out of use as
 * the others. */
template <typename Run> cudaError_t calibrate(Run run, double min_sample_us, int *per_sample)
{
    double each = 0;
    cudaError_t e = time_batch(run, 1, 0, &each);
    if (e == cudaSuccess && each < opt.warmup_us) {
        int batch = (int)std::min(4096.0, ceil(opt.warmup_us / std::max(each, 0.01)));
        double batch_us = 0;
        e = time_batch(run, batch, 1, &batch_us);
        each = batch_us / batch;
    }
    if (e != cudaSuccess)
        return e;
    int per = (int)std::min(4096.0, std::max(1.0, ceil(min_sample_us / std::max(each, 0.01))));
    if (per > nsets)
        per = (per + nsets - 1) / nsets * nsets;
    *per_sample = per;
    return cudaSuccess;
}

/* Whether a sample's launches push the data of its first launch out of L2 before that set comes
 * round again, so that the sample needs no flush before it: true when one launch moves twice the
 * L2, or the launches between two uses of a set do. */
bool sample_evicts_itself(int per_sample, double bytes_per_launch)
{
    const double twice_l2 = 2.0 * (double)l2_bytes;
    const int between = std::min(per_sample, nsets) - 1;
    return bytes_per_launch >= twice_l2 || between * bytes_per_launch >= twice_l2;
}

cudaError_t flush_l2(int round)
{
    return cudaMemsetAsync(flush_buffer, round & 0xff, flush_bytes, stream);
}

measurement summarize(std::vector<double> &t)
{
    measurement m;
    std::sort(t.begin(), t.end());
    size_t n = t.size();
    m.samples = (int)n;
    m.median_us = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    std::vector<double> dev(n);
    for (size_t i = 0; i < n; i++)
        dev[i] = fabs(t[i] - m.median_us);
    std::sort(dev.begin(), dev.end());
    double mad = n % 2 ? dev[n / 2] : (dev[n / 2 - 1] + dev[n / 2]) / 2;
    m.spread = m.median_us > 0 ? mad / m.median_us : 0;
    return m;
}

/* The launches of one sample, captured once into a graph: replaying it times the kernels without
 * the host's launch overhead between them (which would dominate kernels of a few microseconds). */
template <typename Run> cudaError_t capture(Run run, int count, cudaGraphExec_t *exec)
{
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess)
        return e;
    for (int i = 0; i < count && e == cudaSuccess; i++)
        e = run(i % nsets);
    cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (e == cudaSuccess)
        e = end;
    if (e == cudaSuccess)
        e = cudaGraphInstantiate(exec, graph, 0);
    if (graph)
        cudaGraphDestroy(graph);
    return e;
}

cudaError_t time_graph(cudaGraphExec_t exec, double *us)
{
    return time_events([&] { return cudaGraphLaunch(exec, stream); }, us);
}

/* Interleaved measurement of several runs: each round times one sample of every run, flushing L2
 * before a sample unless its own launches evict it (bytes_per_launch: what one launch moves; 0
 * flushes always). A sample is one replay of the run's graph of launches, or (graph false:
 * copies, which a graph would hand to the copy engines rather than the path a stream's
 * cudaMemcpyAsync takes) the launches themselves. */
template <typename Run>
cudaError_t measure(std::vector<Run> &runs, std::vector<measurement> &out, precision p,
                    double bytes_per_launch, bool graph = true)
{
    std::vector<int> per(runs.size());
    std::vector<bool> flush(runs.size());
    std::vector<cudaGraphExec_t> graphs(runs.size(), nullptr);
    cudaError_t e = cudaSuccess;
    for (size_t r = 0; r < runs.size() && e == cudaSuccess; r++) {
        double t0 = now_s();
        e = calibrate(runs[r], p.min_sample_us, &per[r]);
        flush[r] = !sample_evicts_itself(per[r], bytes_per_launch);
        double t1 = now_s();
        spent.warmup += t1 - t0;
        if (e == cudaSuccess && graph)
            e = capture(runs[r], per[r], &graphs[r]);
        spent.graph += now_s() - t1;
    }
    std::vector<std::vector<double>> t(runs.size());
    double t0 = now_s(), timed = 0;
    for (int s = 0; s < p.samples && e == cudaSuccess; s++)
        for (size_t r = 0; r < runs.size() && e == cudaSuccess; r++) {
            double us = 0;
            if (flush[r])
                e = flush_l2(s);
            if (e == cudaSuccess)
                e = graph ? time_graph(graphs[r], &us) : time_batch(runs[r], per[r], 0, &us);
            timed += us * 1e-6;
            t[r].push_back(us / per[r]);
        }
    spent.timed += timed;
    spent.around_samples += now_s() - t0 - timed;
    double t1 = now_s();
    for (cudaGraphExec_t g : graphs)
        if (g)
            cudaGraphExecDestroy(g);
    spent.graph += now_s() - t1;
    if (e != cudaSuccess)
        return e;
    out.clear();
    for (auto &v : t)
        out.push_back(summarize(v));
    return cudaSuccess;
}

struct launch_run {
    int instance;
    cudaError_t operator()(int set) const { return fam.launch(instance, set, stream); }
};

struct copy_run {
    cudaError_t operator()(int set) const { return fam.copy(set, stream); }
};

int find_instance(const char *name)
{
    for (int i = 0; i < fam.ninstances; i++)
        if (strcmp(fam.instances[i].name, name) == 0)
            return i;
    return -1;
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

void do_trial(long id, char **save)
{
    const char *config = strtok_r(NULL, " \n", save);
    int instance = config ? find_instance(config) : -1;
    if (instance < 0) {
        reply("R %ld invalid 0 0 0 %s is not compiled into this worker\n", id,
              config ? config : "(none)");
        return;
    }
    if (!take_key(id, save))
        return;
    int ok = 0;
    char detail[512] = "";
    double t0 = now_s();
    cudaError_t e = fam.check(instance, stream, &ok, detail, sizeof detail);
    spent.check += now_s() - t0;
    if (e != cudaSuccess)
        return fail(id, "check", e);
    if (!ok) {
        reply("R %ld wrong 0 0 0 %s\n", id, detail);
        return;
    }
    precision p = opt.precise; /* the screen's, where given */
    if (opt.screen.samples > 0)
        p.samples = opt.screen.samples;
    if (opt.screen.min_sample_us > 0)
        p.min_sample_us = opt.screen.min_sample_us;
    std::vector<launch_run> runs{{instance}};
    std::vector<measurement> m;
    e = measure(runs, m, p, fam.bytes(current_key));
    if (e != cudaSuccess)
        return fail(id, "timing", e);
    reply("R %ld ok %.4f %.5f %d\n", id, m[0].median_us, m[0].spread, m[0].samples);
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
    auto run = [&](int) { return cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream); };
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
    cudaError_t operator()(int set) const { return fam.vendor(set, stream); }
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
    for (int i = 0; i < 2; i++) {
        const char *tok = strtok_r(NULL, " \n", save);
        inst[i] = tok ? find_instance(tok) : -1;
        if (inst[i] < 0) {
            reply("R %ld invalid 0 0 0 %s is not compiled into this worker\n", id,
                  tok ? tok : "(none)");
            return;
        }
        int ok = 0;
        char detail[512] = "";
        e = fam.check(inst[i], stream, &ok, detail, sizeof detail);
        if (e != cudaSuccess)
            return fail(id, "check", e);
        if (!ok) {
            reply("R %ld wrong 0 0 0 %s: %s\n", id, tok, detail);
            return;
        }
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
    reply("R %ld ok %.6f %.6f %.6f %.6f %.6f %.6f\n", id, spent.timed, spent.prepare, spent.check,
          spent.warmup, spent.graph, spent.around_samples);
}

int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--samples N] [--min-sample-us U] [--screen-samples N]\n"
            "          [--screen-min-sample-us U] [--warmup-us U] [--device D]\n"
            "Started by ktune sweep, bench and verify; requests on stdin, answers on stdout.\n",
            argv0);
    return 1;
}

} // namespace

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
        else if (strcmp(argv[i], "--warmup-us") == 0)
            opt.warmup_us = atof(argv[++i]);
        else if (strcmp(argv[i], "--device") == 0)
            opt.device = atoi(argv[++i]);
        else
            return usage(argv[0]);
    }
    cudaDeviceProp p;
    int driver = 0, runtime = 0;
    cudaError_t e = cudaSetDevice(opt.device);
    if (e == cudaSuccess)
        e = cudaGetDeviceProperties(&p, opt.device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        reply("E no usable CUDA device %d: %s\n", opt.device, cudaGetErrorString(e));
        return 2;
    }
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    l2_bytes = p.l2CacheSize;
    flush_bytes = (size_t)std::max<int64_t>(2 * l2_bytes, 1 << 20);
    e = cudaMalloc(&flush_buffer, flush_bytes);
    if (e != cudaSuccess) {
        reply("E cannot allocate the L2 flush buffer: %s\n", cudaGetErrorString(e));
        return 2;
    }
    reply("H %d %d %d %zu %d %d.%d %d.%d %s\n", p.multiProcessorCount, p.major * 10 + p.minor,
          p.maxThreadsPerBlock, p.sharedMemPerBlockOptin, p.l2CacheSize, driver / 1000,
          (driver % 1000) / 10, runtime / 1000, (runtime % 1000) / 10, p.name);
    char line[8192];
    while (fgets(line, sizeof line, stdin)) {
        char *save = NULL;
        char *cmd = strtok_r(line, " \n", &save);
        if (!cmd)
            continue;
        if (strcmp(cmd, "Q") == 0)
            break;
        char *idtok = strtok_r(NULL, " \n", &save);
        long id = idtok ? strtol(idtok, NULL, 10) : -1;
        if (strcmp(cmd, "T") == 0)
            do_trial(id, &save);
        else if (strcmp(cmd, "M") == 0)
            do_interleaved(id, &save);
        else if (strcmp(cmd, "B") == 0)
            do_bench(id, &save);
        else if (strcmp(cmd, "S") == 0)
            do_stats(id);
        else
            reply("R %ld failed 0 0 0 unknown request '%s'\n", id, cmd);
    }
    if (have_key)
        fam.release();
    return 0;
}
