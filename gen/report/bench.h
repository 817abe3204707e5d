/* ktune bench: tuned vs the family default vs a copy of the same bytes vs the vendor library, in
 * one run. */
#ifndef KTUNE_GEN_BENCH_H
#define KTUNE_GEN_BENCH_H

#include <stdio.h>

#include "registry.h"
#include "worker_client.h"

/* The library's choice for a key on the bench's device, its reason, and the config the nearest
 * valid row answers ("" where none): the rule the nearest keys' vote replaced, its yardstick. */
typedef struct {
    char config[KTUNE_CONFIG_NAME_MAX], reason[16], nearest[KTUNE_CONFIG_NAME_MAX];
} ktune_bench_choice;

/* Fills choices[i] for each of the n keys, as the library chooses on device: 0, or -1 (err set). */
typedef int (*ktune_bench_choose_fn)(void *ctx, const ktune_hello *device, int n,
                                     const ktune_space_shape *keys, ktune_bench_choice *choices,
                                     ktune_err *err);

/* The keys to bench instead of the registry's entries: the space's shapes (those the command
 * line named), each timed with the library's choice (choose) beside the nearest row's answer. */
typedef struct {
    ktune_bench_choose_fn choose;
    void *ctx;
} ktune_bench_keys;

/* Benchmarks every entry of the registry of the worker's device (keys NULL), or each shape of
 * the space with the library's choice for it (keys): tuned, default, a copy of the bytes, the
 * vendor library where the family has one, and the fastest config of each variant the entry
 * names (keys: the nearest row's answer instead, interleaved with the choice). Writes csv_path,
 * prints a short table on out, and with plot_png (or NULL) draws time against the first integer
 * key dimension (ktune_plot_write). */
/* 0, -1 (err set), or KTUNE_WORKER_NO_DEVICE. */
int ktune_bench_run(const ktune_space *space, const char *registry_dir,
                    const ktune_worker_opts *worker, const ktune_bench_keys *keys,
                    double timeout_s, const char *csv_path, const char *plot_png, FILE *out,
                    ktune_err *err);

/* Starts the worker and loads the registry of its device (path: its file). 0, -1 (err set), or
 * KTUNE_WORKER_NO_DEVICE. */
int ktune_open_device_registry(const ktune_space *s, const char *registry_dir,
                               const ktune_worker_opts *wopts, ktune_worker *w,
                               ktune_registry *reg, char *path, size_t size, ktune_err *err);

#endif
