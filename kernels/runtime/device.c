/* The current device's properties, read once a device and kept. */
#define _POSIX_C_SOURCE 200809L
#include "device.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define KTUNE_MAX_DEVICES 64

static pthread_mutex_t device_lock = PTHREAD_MUTEX_INITIALIZER;
static ktune_device devices[KTUNE_MAX_DEVICES];
static int device_read[KTUNE_MAX_DEVICES];

/* The usual limits of a compute capability: threads a block, opt-in shared memory a block. */
static const struct {
    int cc;
    int max_threads;
    int64_t smem_per_block;
} arch_limits[] = {
    {70, 1024, 98304},  {72, 1024, 98304},  {75, 1024, 65536},  {80, 1024, 166912},
    {86, 1024, 101376}, {87, 1024, 166912}, {89, 1024, 101376}, {90, 1024, 232448},
    {100, 1024, 232448}, {103, 1024, 232448}, {120, 1024, 101376}, {121, 1024, 101376},
};

ktune_status ktune__device_from_spec(const ktune_device_spec *spec, ktune_device *d)
{
    if (!spec || !spec->name || !spec->name[0] || strlen(spec->name) >= sizeof d->name ||
        spec->sms < 1 || spec->cc < 10 || spec->max_threads < 0 || spec->smem_per_block < 0 ||
        spec->l2_bytes < 0)
        return KTUNE_ERROR_INVALID_ARGUMENT;
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", spec->name);
    d->sms = spec->sms;
    d->cc = spec->cc;
    d->max_threads = spec->max_threads;
    d->smem_per_block = spec->smem_per_block;
    d->l2_bytes = spec->l2_bytes;
    for (size_t i = 0; i < sizeof arch_limits / sizeof arch_limits[0]; i++)
        if (arch_limits[i].cc == spec->cc) {
            if (!d->max_threads)
                d->max_threads = arch_limits[i].max_threads;
            if (!d->smem_per_block)
                d->smem_per_block = arch_limits[i].smem_per_block;
        }
    if (!d->max_threads)
        d->max_threads = 1024;
    d->sm90a = d->cc == 90 && KTUNE_SM90A;
    return KTUNE_OK;
}

ktune_status ktune__device_current(const ktune_device **device)
{
    int id;
    if (cudaGetDevice(&id) != cudaSuccess || id < 0 || id >= KTUNE_MAX_DEVICES)
        return KTUNE_ERROR_CUDA;
    ktune_status st = KTUNE_OK;
    pthread_mutex_lock(&device_lock);
    if (!device_read[id]) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, id) != cudaSuccess) {
            st = KTUNE_ERROR_CUDA;
        } else {
            ktune_device *d = &devices[id];
            snprintf(d->name, sizeof d->name, "%s", p.name);
            d->sms = p.multiProcessorCount;
            d->cc = p.major * 10 + p.minor;
            d->max_threads = p.maxThreadsPerBlock;
            d->smem_per_block = (int64_t)p.sharedMemPerBlockOptin;
            d->l2_bytes = p.l2CacheSize;
            d->sm90a = d->cc == 90 && KTUNE_SM90A;
            device_read[id] = 1;
        }
    }
    pthread_mutex_unlock(&device_lock);
    *device = &devices[id];
    return st;
}
