/* The measuring side of a sweep: a worker process owns the GPU, runs the configurations the
 * parent asks for and answers one line each. A family supplies the hooks below; the protocol,
 * timing and error handling are worker_main.cu's. */
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "ktune_table.h"

/* Inputs beyond dense tensors (sequence lengths, page tables, expert offsets and routing,
 * quantization scales) are prepare()'s too: it draws them with workload.h's generators from the
 * key and a fixed seed (the same workload on every run and machine), copies them into the arena
 * beside the tensors, one copy an input set where a kernel reads them like its tensors, and
 * computes the reference from the same copies. The check and the timing need nothing more: they
 * poison and compare what poison() and compare() name, and launch(instance, set) takes the set's
 * tensors and its non-tensor inputs together. */
struct ktune_worker_family {
    const char *name;
    int nkey;
    const ktune_instance *instances;
    int ninstances;
    /* Allocates and fills the inputs of key (several sets when that keeps the working set beyond
     * l2_bytes) and computes the reference. Returns the number of sets, or a negative number with
     * *error set. */
    int (*prepare)(const int64_t *key, int64_t l2_bytes, cudaError_t *error);
    /* Runs instance on input set `set`. */
    cudaError_t (*launch)(int instance, int set, cudaStream_t stream);
    /* The check of a candidate, which the worker runs on set 0 between these two: poison fills
     * the output with NaN (or a sentinel), so that what a candidate leaves unwritten shows;
     * compare enqueues the comparison of the output with the reference
     * (ktune_worker_check::compare): bad[0] counts the elements out of tolerance, bad[1] is the
     * first of them (the caller sets them to 0 and ~0 before). *rows, *cols: the output's shape,
     * for the report. Neither waits. */
    cudaError_t (*poison)(cudaStream_t stream);
    cudaError_t (*compare)(cudaStream_t stream, unsigned long long *bad, int64_t *rows,
                           int64_t *cols);
    /* The anchor: a device-to-device copy of the bytes one launch reads, on set `set`. */
    cudaError_t (*copy)(int set, cudaStream_t stream);
    /* Bytes one launch must move (read + written) for key. */
    double (*bytes)(const int64_t *key);
    void (*release)(void);
    /* Optional (NULL for none): the vendor library's paths for the problem prepare() took last
     * (the bench's anchors), the floating-point operations one launch performs, and the key on
     * whose vendor throughput the device's compute ceiling for key's types is measured.
     * vendors() readies the paths (inputs of their own, an algorithm chosen by timing), writes
     * their names (at most KTUNE_BENCH_MAX_VENDORS; the first is the anchor; a path that cannot
     * take the problem is left out) and returns how many, or -1 with *error set; vendor() runs
     * path `which` on input set `set`. release() frees what vendors() took. */
    int (*vendors)(const char **names, cudaError_t *error);
    cudaError_t (*vendor)(int which, int set, cudaStream_t stream);
    double (*flops)(const int64_t *key);
    void (*ceiling_key)(const int64_t *key, int64_t *out);
    /* Optional: for a family whose compare() judges the output as a whole (an accuracy measure
     * rather than a tolerance an element), what a wrong check's counters mean, written to
     * detail; compare() then fills bad[0] and bad[1] as the family documents. NULL: they count
     * elements out of tolerance and name the first. */
    void (*wrong_detail)(const unsigned long long *bad, int64_t rows, int64_t cols, char *detail,
                         size_t size);
};

extern const ktune_worker_family ktune_worker_family_def;

/* Device memory for the inputs of the current key (prepare's), kept from key to key: at least
 * `bytes`, 256-byte aligned; allocated again only when a key needs more than the block holds, so
 * that changing keys costs no allocation or free (milliseconds a key with a set's buffers
 * allocated one by one, the GPU idle meanwhile). What the previous key left in it is not kept.
 * NULL with *error set when the memory cannot be had. */
void *ktune_worker_arena(size_t bytes, cudaError_t *error);
