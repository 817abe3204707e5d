/* The GPU tests' check of a CUDA call: on an error, print where and what, and exit 1. */
#pragma once

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Exits 77, which CTest reports as not run, where there is no CUDA device. */
static inline void exit_without_gpu(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("no CUDA device: skipped\n");
        exit(77);
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
