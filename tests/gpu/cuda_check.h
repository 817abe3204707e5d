/* The GPU tests' check of a CUDA call: on an error, print where and what, and exit 1; their
 * first call (gpu_test_begin); and the poison of an output that a kernel overlapped with it must
 * wait for. */
#pragma once

#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Writes text to stderr from a signal handler (write(2) only). */
static inline void gpu_test_say(const char *text)
{
    const ssize_t wrote = write(2, text, strlen(text));
    (void)wrote;
}

/* The fatal signals a GPU test reports, each with what it writes. */
static const struct {
    int sig;
    const char *say;
} gpu_test_fatal_signals[] = {
    {SIGSEGV, "fatal signal SIGSEGV; the stack:\n"}, {SIGBUS, "fatal signal SIGBUS; the stack:\n"},
    {SIGFPE, "fatal signal SIGFPE; the stack:\n"},   {SIGILL, "fatal signal SIGILL; the stack:\n"},
    {SIGABRT, "fatal signal SIGABRT; the stack:\n"},
};

/* On a fatal signal: its name and the stack on stderr (the functions the binary exports by name,
 * the others as offsets into it, which addr2line resolves), then the signal's default action,
 * so that the test still ends as the signal ends it. */
static inline void gpu_test_fatal(int sig)
{
    void *frames[64];
    const int n = backtrace(frames, 64);
    for (size_t i = 0; i < sizeof gpu_test_fatal_signals / sizeof gpu_test_fatal_signals[0]; i++)
        if (gpu_test_fatal_signals[i].sig == sig)
            gpu_test_say(gpu_test_fatal_signals[i].say);
    backtrace_symbols_fd(frames, n, 2);
    raise(sig); /* SA_RESETHAND: the default action now */
}

/* A GPU test's first call: exits 77, which CTest reports as not run, where there is no CUDA
 * device; exits 1 where its candidate configs were compiled only as a check (unoptimized PTX,
 * not the machine code a sweep measures and the library ships); else makes stdout
 * line-buffered, so that a test that dies (a fault, a timeout's kill) still leaves in its log
 * every line it printed before, and has a fatal signal print the stack (gpu_test_fatal). */
static inline void gpu_test_begin(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("no CUDA device: skipped\n");
        exit(77);
    }
#if KTUNE_CANDIDATES_CHECK_ONLY
    printf("this test's candidate configs were compiled to PTX only (KTUNE_CANDIDATES=CHECK, the "
           "default where configure found no GPU): reconfigure with -DKTUNE_CANDIDATES=ALL to "
           "run it on this GPU\n");
    exit(1);
#endif
    setvbuf(stdout, NULL, _IOLBF, 0);
    void *first[1]; /* backtrace's first call loads what it needs: not in the handler */
    backtrace(first, 1);
    for (size_t i = 0; i < sizeof gpu_test_fatal_signals / sizeof gpu_test_fatal_signals[0]; i++) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = gpu_test_fatal;
        action.sa_flags = SA_RESETHAND;
        sigemptyset(&action.sa_mask);
        sigaction(gpu_test_fatal_signals[i].sig, &action, NULL);
    }
}

#ifdef __cplusplus
/* Captures call(s), a library call on stream s, in a CUDA graph, launches the graph and waits for
 * it; returns what the call returned. */
template <typename Call> static auto replay_in_graph(cudaStream_t s, Call call)
{
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    const auto status = call(s);
    CHECK(cudaStreamEndCapture(s, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    return status;
}
#endif

#ifdef __CUDACC__
#include "launch.cuh"

/* Sets bytes at p to 0xff (NaN in every float format), but only after holding the GPU for
 * delay_ns, and lets the stream's next kernel start at once (release_next): a kernel overlapped
 * with it that writes p before waiting for it (wait_previous) has its results overwritten, which
 * the check that follows finds. */
__global__ void poison_late_kernel(unsigned char *p, size_t bytes, unsigned long long delay_ns)
{
    ktune_launch::release_next();
    if (threadIdx.x == 0) {
        unsigned long long start, now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
        do
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        while (now - start < delay_ns);
    }
    __syncthreads();
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < bytes;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = 0xff;
}

/* Poisons bytes at p on stream s, 20 us late (see poison_late_kernel). */
static inline cudaError_t poison_late(void *p, size_t bytes, cudaStream_t s = 0)
{
    const size_t blocks = bytes / 256 + 1;
    poison_late_kernel<<<(unsigned)(blocks < 1024 ? blocks : 1024), 256, 0, s>>>(
        static_cast<unsigned char *>(p), bytes, 20000ull);
    return cudaGetLastError();
}

template <bool WAIT> __global__ void zero_after_poison(unsigned char *p, size_t bytes)
{
    if (WAIT)
        ktune_launch::wait_previous();
    for (size_t i = threadIdx.x; i < bytes; i += blockDim.x)
        p[i] = 0;
}

/* That poison_late catches a kernel that does not wait, on the default stream (where the tests
 * launch) and on a stream of its own: where launches overlap, a kernel writing zeros after the
 * poison without wait_previous sees some overwritten, and one with it keeps them all. Where they
 * do not overlap (before compute capability 9.0, or KTUNE_OVERLAP=0), both keep their zeros.
 * Prints what it found; 1 where it is as expected. */
static inline int overlap_detected(void)
{
    const size_t bytes = 4096;
    unsigned char *p, got[4096];
    const bool overlaps = ktune_launch::overlap_allowed();
    cudaStream_t own;
    CHECK(cudaMalloc(&p, bytes));
    CHECK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
    /* the bytes left poisoned behind a kernel that writes zeros after the poison on s */
    auto poisoned_after = [&](cudaStream_t s, bool wait) {
        CHECK(poison_late(p, bytes, s));
        CHECK(ktune_launch::launch_overlapped(wait ? zero_after_poison<true>
                                                   : zero_after_poison<false>,
                                              dim3(1), dim3(256), dim3(1, 1, 1), 0, s, p, bytes));
        CHECK(cudaMemcpyAsync(got, p, bytes, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        int n = 0;
        for (size_t j = 0; j < bytes; j++)
            n += got[j] == 0xff;
        return n;
    };
    /* the first launch of a kernel loads it (lazy loading), and does not overlap */
    poisoned_after(own, true);
    poisoned_after(own, false);
    const cudaStream_t streams[2] = {0, own};
    const char *names[2] = {"the default", "its own"};
    int ok = 1;
    for (int i = 0; i < 2; i++) {
        const int without = poisoned_after(streams[i], false);
        const int with = poisoned_after(streams[i], true);
        printf("overlapped launches %s, %s stream: a kernel without wait_previous found %d of "
               "%d bytes poisoned after it, one with it %d\n",
               overlaps ? "on" : "off", names[i], without, (int)bytes, with);
        ok &= with == 0 && (overlaps ? without > 0 : without == 0);
    }
    CHECK(cudaStreamDestroy(own));
    CHECK(cudaFree(p));
    return ok;
}
#endif
