/* ktune bench: tuned vs the family default vs a copy of the same bytes vs the vendor library, in
 * one run. */
#ifndef KTUNE_GEN_BENCH_H
#define KTUNE_GEN_BENCH_H

#include <stdio.h>

#include "registry.h"
#include "worker_client.h"

/* Benchmarks every entry of the registry of the worker's device: tuned, default, a copy of the
 * bytes, the vendor library where the family has one, and the fastest config of each variant the
 * entry names. Writes csv_path, prints a short table on out, and with plot_png (or NULL) draws
 * time against the first integer key dimension (ktune_plot_write). */
/* 0, -1 (err set), or KTUNE_WORKER_NO_DEVICE. */
int ktune_bench_run(const ktune_space *space, const char *registry_dir,
                    const ktune_worker_opts *worker, double timeout_s, const char *csv_path,
                    const char *plot_png, FILE *out, ktune_err *err);

/* Starts the worker and loads the registry of its device (path: its file). 0, -1 (err set), or
 * KTUNE_WORKER_NO_DEVICE. */
int ktune_open_device_registry(const ktune_space *s, const char *registry_dir,
                               const ktune_worker_opts *wopts, ktune_worker *w,
                               ktune_registry *reg, char *path, size_t size, ktune_err *err);

#endif
