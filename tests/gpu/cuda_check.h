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
