/* A worker family whose configs misbehave on purpose, on a real GPU: mode 0 is correct, 1 writes
 * through an illegal address, 2 never finishes, 3 computes a wrong result, 4 writes half of the
 * output (the rest must still hold the poison, not what the config checked before it wrote). The
 * sweep must record ok, failed, timeout and wrong, and go on. */
#include <stdio.h>

#include "worker.h"

namespace {

float *out;
int64_t n;

__global__ void fault_kernel(float *y, int64_t n, int mode, volatile int *spin)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (mode == 1 && i == 0)
        *(volatile float *)(y - (1ll << 40)) = 1.f;
    if (mode == 2)
        while (*spin == 0) {
        }
    if (i < (mode == 4 ? n / 2 : n))
        y[i] = mode == 3 && i == n / 2 ? 2.f : 1.f;
}

int *spin;

const ktune_instance instances[] = {
    {"kernel_mode0", 0, {0}, nullptr},
    {"kernel_mode1", 0, {1}, nullptr},
    {"kernel_mode2", 0, {2}, nullptr},
    {"kernel_mode3", 0, {3}, nullptr},
    {"kernel_mode4", 0, {4}, nullptr},
};

int prepare(const int64_t *key, int64_t, cudaError_t *error)
{
    n = key[0];
    cudaError_t e = cudaMalloc(&out, n * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc(&spin, sizeof(int));
    if (e == cudaSuccess)
        e = cudaMemset(spin, 0, sizeof(int));
    if (e != cudaSuccess) {
        *error = e;
        return -1;
    }
    return 1;
}

cudaError_t launch(int instance, int, cudaStream_t stream)
{
    fault_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(out, n,
                                                                   (int)instances[instance].params[0], spin);
    return cudaGetLastError();
}

/* bad[0] += the elements that are not 1; bad[1] = the first of them. */
__global__ void count_not_one(const float *out, int64_t n, unsigned long long *bad)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        if (out[i] != 1.f) {
            atomicAdd(&bad[0], 1ULL);
            atomicMin(&bad[1], (unsigned long long)i);
        }
}

cudaError_t check_poison(cudaStream_t stream)
{
    return cudaMemsetAsync(out, 0xff, n * sizeof(float), stream);
}

cudaError_t check_compare(cudaStream_t stream, unsigned long long *bad, int64_t *rows,
                          int64_t *cols)
{
    *rows = 1;
    *cols = n;
    count_not_one<<<64, 256, 0, stream>>>(out, n, bad);
    return cudaGetLastError();
}

cudaError_t copy(int, cudaStream_t stream)
{
    return cudaMemsetAsync(out, 0, n * sizeof(float), stream);
}

double bytes(const int64_t *key) { return 4.0 * key[0]; }

void release()
{
    cudaFree(out);
    cudaFree(spin);
}

} // namespace

const ktune_worker_family ktune_worker_family_def = {
    "faults", 1, instances, 5, prepare, launch, check_poison, check_compare, copy, bytes, release,
    nullptr, nullptr, nullptr, nullptr};
