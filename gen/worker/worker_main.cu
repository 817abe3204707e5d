/* A sweep worker: reads the requests of protocol.h on stdin, measures on the GPU, answers on
 * stdout. This file holds the requests and the start; the measuring is measure.cu's, the checks
 * check.cu's, the screen screen.cu's, the bench bench.cu's, all on one ktune_worker_state. A
 * family supplies ktune_worker_family_def (worker.h). */
#include <algorithm>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker_state.cuh"

bool recoverable(cudaError_t e)
{
    return e == cudaErrorInvalidConfiguration || e == cudaErrorLaunchOutOfResources ||
           e == cudaErrorMemoryAllocation || e == cudaErrorInvalidValue ||
           e == cudaErrorNotSupported || e == cudaErrorInvalidDeviceFunction ||
           e == cudaErrorInvalidClusterSize;
}

void ktune_worker_state::answer(ktune_request_kind kind, const ktune_answer &a)
{
    char line[KTUNE_PROTOCOL_LINE];
    const int n = ktune_answer_format(kind, &a, line, sizeof line);
    if (n < 0) {
        ktune_answer failed = {};
        ktune_answer_fail(&failed, a.id, KTUNE_TRIAL_FAILED, "the answer does not fit a line");
        ktune_answer_format(kind, &failed, line, sizeof line);
    }
    fputs(line, stdout);
    fflush(stdout);
}

/* Reports a failed request; exits when the context is lost. */
void ktune_worker_state::fail(long id, const char *what, cudaError_t e)
{
    gate_open(gate_generation);
    cudaGetLastError();
    cudaError_t sync = cudaStreamSynchronize(stream);
    bool lost = !recoverable(e) || sync != cudaSuccess;
    ktune_answer a = {};
    ktune_answer_fail(&a, id, KTUNE_TRIAL_FAILED, "%s: %s%s", what, cudaGetErrorString(e),
                      lost ? " " KTUNE_CONTEXT_LOST : "");
    answer(KTUNE_REQUEST_NONE, a);
    if (lost)
        exit(3);
}

/* The instance named name, or -1; looked up among the instances in the order of their names (a
 * window of 128 configs looked up one by one among a few hundred took about 0.1 ms, while the GPU
 * waited for the request). */
int ktune_worker_state::find_instance(const char *name)
{
    if (by_name.empty()) {
        for (int i = 0; i < fam.ninstances; i++)
            by_name.push_back(i);
        std::sort(by_name.begin(), by_name.end(), [this](int a, int b) {
            return strcmp(fam.instances[a].name, fam.instances[b].name) < 0;
        });
    }
    auto at = std::lower_bound(by_name.begin(), by_name.end(), name,
                               [this](int i, const char *n) {
                                   return strcmp(fam.instances[i].name, n) < 0;
                               });
    return at != by_name.end() && strcmp(fam.instances[*at].name, name) == 0 ? *at : -1;
}

/* Prepares the inputs of key unless they are the current ones. False when the answer was sent
 * (a failure). */
bool ktune_worker_state::use_key(long id, const int64_t *key)
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

namespace {

/* TRIAL and SCREEN: verified, then timed with the screen's samples. */
void screen_request(ktune_worker_state &w, const ktune_request &r)
{
    ktune_answer a = {};
    std::vector<trial> ts((size_t)r.nconfigs);
    for (int i = 0; i < r.nconfigs; i++) {
        ts[i].instance = w.find_instance(r.configs[i]);
        ts[i].pinned = r.pinned[i];
        if (ts[i].instance < 0) {
            ts[i].status = KTUNE_TRIAL_INVALID;
            snprintf(ts[i].detail, sizeof ts[i].detail, "%s is not compiled into this worker",
                     r.configs[i]);
        }
    }
    if (r.kind == KTUNE_REQUEST_TRIAL && ts[0].instance < 0) {
        ktune_answer_fail(&a, r.id, ts[0].status, "%s", ts[0].detail);
        return w.answer(r.kind, a);
    }
    if (!w.use_key(r.id, r.key))
        return;
    cudaError_t e = w.screen(ts, r.best_us > 0 ? r.best_us : INFINITY);
    if (e != cudaSuccess)
        return w.fail(r.id, r.kind == KTUNE_REQUEST_TRIAL ? "check and timing" : "screening", e);
    if (r.kind == KTUNE_REQUEST_TRIAL && !ts[0].ok()) {
        ktune_answer_fail(&a, r.id, ts[0].status, "%s", ts[0].detail);
        return w.answer(r.kind, a);
    }
    a.id = r.id;
    a.status = KTUNE_TRIAL_OK;
    a.n = r.nconfigs;
    for (int i = 0; i < r.nconfigs; i++)
        a.entries[i] = {ts[i].status, ts[i].m.median_us, ts[i].m.spread, ts[i].m.samples};
    w.answer(r.kind, a);
}

/* INTERLEAVE: several configs timed in rounds. */
void interleave_request(ktune_worker_state &w, const ktune_request &r)
{
    ktune_answer a = {};
    std::vector<run> runs((size_t)r.nconfigs);
    for (int i = 0; i < r.nconfigs; i++) {
        runs[i].instance = w.find_instance(r.configs[i]);
        if (runs[i].instance < 0) {
            ktune_answer_fail(&a, r.id, KTUNE_TRIAL_INVALID, "%s is not compiled into this worker",
                              r.configs[i]);
            return w.answer(r.kind, a);
        }
    }
    if (!w.use_key(r.id, r.key))
        return;
    std::vector<measurement> m;
    cudaError_t e = w.rest_at_boost();
    if (e == cudaSuccess)
        e = w.measure(runs, m, w.opt.precise, w.fam.bytes(w.current_key));
    if (e != cudaSuccess)
        return w.fail(r.id, "timing", e);
    a.id = r.id;
    a.status = KTUNE_TRIAL_OK;
    a.n = r.nconfigs;
    for (int i = 0; i < r.nconfigs; i++)
        a.entries[i] = {KTUNE_TRIAL_OK, m[i].median_us, m[i].spread, m[i].samples};
    w.answer(r.kind, a);
}

int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--samples N] [--min-sample-us U] [--screen-samples N]\n"
            "          [--screen-min-sample-us U] [--screen-cut F] [--warmup-us U] [--device D]\n"
            "          [--module-loading eager|lazy] [--copy-ceiling GBPS] [--flops-ceiling FLOPS]\n"
            "Started by ktune sweep, bench and verify; requests on stdin, answers on stdout.\n",
            argv0);
    return 1;
}

/* Why there is no device to measure on, in words a user can act on. */
const char *device_error_text(cudaError_t e)
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

/* The no-device line, then exit code 2. */
int no_device(const char *message)
{
    char line[1024];
    if (ktune_no_device_format(message, line, sizeof line) > 0)
        fputs(line, stdout);
    fflush(stdout);
    return 2;
}

/* Streams, check counters, the gate flag, the flush buffer; then the flush's time. */
cudaError_t start_device(ktune_worker_state &w)
{
    cudaError_t e = cudaStreamCreateWithFlags(&w.stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&w.capture_stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaMalloc(&w.check_counters, sizeof w.check_counters_init);
    if (e == cudaSuccess)
        e = cudaHostAlloc(&w.check_counters_host, sizeof w.check_counters_init,
                          cudaHostAllocDefault);
    if (e == cudaSuccess)
        e = cudaHostAlloc(&w.gate_flag, sizeof *w.gate_flag, cudaHostAllocMapped);
    if (e == cudaSuccess)
        e = cudaMalloc(&w.clock_probe, sizeof *w.clock_probe);
    if (e == cudaSuccess)
        e = cudaHostAlloc(&w.clock_probe_host, sizeof *w.clock_probe_host, cudaHostAllocDefault);
    if (e == cudaSuccess)
        *w.gate_flag = w.gate_generation;
    for (int i = 0; i < max_screen; i++)
        w.check_counters_init[2 * i + 1] = ~0ULL;
    return e;
}

cudaError_t start_flush(ktune_worker_state &w, const cudaDeviceProp &p)
{
    w.l2_bytes = p.l2CacheSize;
    w.flush_bytes =
        (size_t)std::max<int64_t>(w.l2_bytes, 1 << 20) / l2_line_bytes * l2_line_bytes;
    w.flush_blocks = 4 * p.multiProcessorCount;
    cudaError_t e = cudaMalloc(&w.flush_buffer, 2 * w.flush_bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(&w.flush_sink, sizeof *w.flush_sink);
    if (e == cudaSuccess)
        e = cudaMemset(w.flush_buffer, 0, 2 * w.flush_bytes);
    if (e == cudaSuccess)
        w.flush_us = w.time_flush();
    return e;
}

} // namespace

void *ktune_worker_arena(size_t bytes, cudaError_t *error)
{
    /* one block for the process: the family's prepare() has no state of its own to hold it */
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

int main(int argc, char **argv)
{
#if KTUNE_CANDIDATES_CHECK_ONLY
    (void)argc;
    (void)argv;
    return no_device("this worker's candidates were compiled to PTX only (KTUNE_CANDIDATES=CHECK, "
                     "the default where configure found no GPU): reconfigure with "
                     "-DKTUNE_CANDIDATES=ALL to sweep");
#endif
    ktune_worker_state w(ktune_worker_family_def);
    settings &opt = w.opt;
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
        else if (strcmp(argv[i], "--copy-ceiling") == 0) /* a bench's, measured already */
            w.ceiling_gbps = std::max(0.0, atof(argv[++i]));
        else if (strcmp(argv[i], "--flops-ceiling") == 0)
            w.given_flops_per_s = std::max(0.0, atof(argv[++i]));
        else if (strcmp(argv[i], "--module-loading") == 0 &&
                 (strcmp(argv[i + 1], "lazy") == 0 || strcmp(argv[i + 1], "eager") == 0))
            opt.lazy_modules = strcmp(argv[++i], "lazy") == 0;
        else
            return usage(argv[0]);
    }
    /* every candidate's code loaded at start: a kernel's first launch, the check's, which times
     * the probe, must not carry the loading of its module. A worker started for one alone
     * measurement loads what it launches (a start several times shorter): its first request is
     * the check, whose launches carry the loading, and the interleaved round probes again */
    setenv("CUDA_MODULE_LOADING", opt.lazy_modules ? "LAZY" : "EAGER", 1);
    cudaDeviceProp p;
    cudaError_t e = cudaSetDevice(opt.device);
    if (e == cudaSuccess)
        e = cudaGetDeviceProperties(&p, opt.device);
    if (e == cudaSuccess)
        e = start_device(w);
    int peak_khz = 0; /* 0 where the device does not say: no rests */
    if (e == cudaSuccess && cudaDeviceGetAttribute(&peak_khz, cudaDevAttrClockRate, opt.device) ==
                                cudaSuccess)
        w.peak_mhz = peak_khz / 1000.0;
    char message[512];
    if (e != cudaSuccess) {
        snprintf(message, sizeof message, "no usable CUDA device %d: %s", opt.device,
                 device_error_text(e));
        return no_device(message);
    }
    e = start_flush(w, p);
    if (e != cudaSuccess) {
        snprintf(message, sizeof message, "device %d: cannot allocate the L2 flush buffer: %s",
                 opt.device, cudaGetErrorString(e));
        return no_device(message);
    }
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    ktune_hello hello = {};
    snprintf(hello.name, sizeof hello.name, "%s", p.name);
    hello.sms = p.multiProcessorCount;
    hello.cc = p.major * 10 + p.minor;
    hello.max_threads = p.maxThreadsPerBlock;
    hello.smem_per_block = (int64_t)p.sharedMemPerBlockOptin;
    hello.l2_bytes = p.l2CacheSize;
    hello.sm90a = hello.cc == 90 && KTUNE_SM90A;
    snprintf(hello.driver_api, sizeof hello.driver_api, "%d.%d", driver / 1000,
             (driver % 1000) / 10);
    snprintf(hello.runtime, sizeof hello.runtime, "%d.%d", runtime / 1000, (runtime % 1000) / 10);
    const unsigned char *u = (const unsigned char *)p.uuid.bytes;
    snprintf(hello.uuid, sizeof hello.uuid,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15]);
#if KTUNE_WORKER_TEST_KNOBS
    if (const char *slow = getenv("KTUNE_TEST_SLOW")) {
        char config[256];
        double us = 0;
        if (sscanf(slow, "%255[^:]:%lf", config, &us) == 2 && us > 0) {
            w.slow_instance = w.find_instance(config);
            w.slow_ns = (unsigned long long)(us * 1000);
        }
        fprintf(stderr, "ktune worker: test knob: %s %s\n", slow,
                w.slow_instance >= 0 ? "(slowed)" : "(no such config: nothing slowed)");
    }
#endif
    char line[KTUNE_PROTOCOL_LINE];
    if (ktune_hello_format(&hello, line, sizeof line) > 0)
        fputs(line, stdout);
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
        ktune_request r;
        char why[256];
        const double t0 = now_s();
        if (ktune_request_parse(line, w.fam.nkey, &r, why, sizeof why)) {
            ktune_answer a = {};
            ktune_answer_fail(&a, r.id, KTUNE_TRIAL_FAILED, "%s", why);
            w.answer(r.kind, a);
        } else if (r.kind == KTUNE_REQUEST_QUIT) {
            break;
        } else if (r.kind == KTUNE_REQUEST_TRIAL || r.kind == KTUNE_REQUEST_SCREEN) {
            screen_request(w, r);
        } else if (r.kind == KTUNE_REQUEST_INTERLEAVE) {
            interleave_request(w, r);
        } else if (r.kind == KTUNE_REQUEST_BENCH) {
            w.bench(r);
        } else if (r.kind == KTUNE_REQUEST_STATS) {
            ktune_answer a = {};
            a.id = r.id;
            a.status = KTUNE_TRIAL_OK;
            a.stats = w.spent;
            w.answer(r.kind, a);
        }
        w.spent.busy += now_s() - t0;
    }
    if (w.have_key)
        w.fam.release();
    return 0;
}
