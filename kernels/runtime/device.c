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

ktune_status ktune_device_current(const ktune_device **device)
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
