/* ktune bench (tuned vs the family default vs a copy of the same bytes vs the vendor library, in
 * one run) and
 * ktune verify (the committed table re-measured: the performance gate). */
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

/* ktune verify: re-measures every committed entry of the worker's device (verified first) and
 * fails when one is slower than its recorded time by more than threshold (a fraction), or is no
 * longer correct. Returns 0 pass, 1 regression, -1 error, KTUNE_WORKER_NO_DEVICE. */
int ktune_verify_run(const ktune_space *space, const char *registry_dir,
                     const ktune_worker_opts *worker, double timeout_s, double threshold, FILE *out,
                     ktune_err *err);

#endif
