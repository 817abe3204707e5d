/* ktune: CUDA kernels whose launch configurations were tuned at build time.
 *
 * Every entry point takes device pointers, the problem shape and a stream, and returns a
 * ktune_status. The configuration it launches comes from a static table compiled into the
 * library (generated/<device>/<family>.h), chosen as follows:
 *
 *   1. Table: the table whose device name and SM count match the current device; else the first
 *      table of the same compute capability; else no table.
 *   2. Exact key: binary search for the key (the family's key, in its header's order).
 *   3. Nearest keys' vote: the 8 rows of the table nearest the requested key (distance: the sum
 *      over integer dimensions of |log2(requested) - log2(tuned)|, plus 1 for each dtype that
 *      differs) among those whose configuration is compiled in and valid for it (its variant's
 *      constraints hold: a configuration never crosses its variant's limits). Each configuration
 *      they measured (their answers and runner-ups: the next fastest configurations, then the
 *      fastest of each other variant) that is valid for the key scores the mean over the 8 rows,
 *      weighted 1 / (1 + distance), of log(its time there / the row's answer's time); where a row
 *      did not measure it but measured its variant, of log(that variant's fastest time there /
 *      the answer's) + 0.05, the fastest's time carried to it by the cost model where the model
 *      says it is slower there (it was not the fastest); or log(1.35) where a row measured
 *      nothing of its variant; plus log(its cost at the requested
 *      key / its cost at the row's key) where its variant has a cost model (the space's `cost`:
 *      waves of tiles on the device's SMs, padding, bytes, a fixed part, a grid of fewer blocks
 *      than SMs; so that a tile that fits the row but leaves a wave half empty at the requested
 *      key loses its vote there, and a row's time on a small key shrinks with its bytes only
 *      past the launch and barriers it always pays). Where its
 *      variant has a twin (the space's `twin`), a row that measured not it but its twin (the
 *      twin variant's configuration of the same parameter values) votes with the twin's time,
 *      plus log(its cost at the requested key / the twin's cost at the row's key); and a
 *      compiled configuration valid for the key whose twin a row measured is a candidate too.
 *      The lowest score wins, ties to the configuration measured nearer.
 *   4. Default: the first configuration of the family's default list that is valid for the key.
 *
 * A key answered by step 3 or 4 prints a one-time warning on stderr naming it and the command that
 * tunes it (`ktune sweep <family> --key '<dim>=<value>,...' --apply`; set KTUNE_LOG=quiet to
 * silence). Environment:
 *   KTUNE_LOG=debug                  print every selection and why (a voted key: also the five
 *                                    configurations of the lowest scores, each with the time
 *                                    its score predicts against the pick's)
 *   KTUNE_FORCE=<family>=<config>    pin a configuration (comma-separate several families);
 *                                    it must be compiled in (the tables' configs and the
 *                                    defaults; every config with -DKTUNE_LIBRARY_ALL_CONFIGS=ON),
 *                                    and one unknown or invalid for a key is an error
 *   KTUNE_UNTUNED_FILE=<path>        append each untuned key to <path> as a line
 *                                    "<family> <dim>=<value> ...", which
 *                                    `ktune sweep <family> --untuned <path>` tunes
 *   KTUNE_OVERLAP=0                  launch every kernel after the previous one has finished
 *
 * Overlapped launches: on devices of compute capability 9.0 and later, some kernels bound by
 * memory (matmul's gemv, qmatmul's and moe's decode variants, rpa's mma attention and the merge
 * of its splits, softmax's kernels on grids of at most four blocks a multiprocessor) are
 * launched as programmatic dependent launches of the stream's previous kernel, so that their
 * blocks take their places while that kernel's last blocks run.
 * Each waits for the previous kernel's memory before its first access to global memory, so
 * results are those of launches one after the other, whatever that kernel is; only the gap
 * between the two kernels goes. A stream captured into a CUDA graph keeps the overlap as
 * programmatic edges.
 */
#ifndef KTUNE_KTUNE_H
#define KTUNE_KTUNE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes and their strings, in one place. */
#define KTUNE_STATUS_MAP(X)                                                      \
    X(KTUNE_OK, "ok")                                                            \
    X(KTUNE_ERROR_INVALID_ARGUMENT, "invalid argument")                          \
    X(KTUNE_ERROR_NO_CONFIG, "no configuration is valid for this shape")        \
    X(KTUNE_ERROR_FORCED_CONFIG, "the configuration KTUNE_FORCE names is unknown or invalid here") \
    X(KTUNE_ERROR_CUDA, "CUDA error")                                             \
    X(KTUNE_ERROR_OUT_OF_MEMORY, "out of host memory")

typedef enum {
#define KTUNE_STATUS_ENUM(name, text) name,
    KTUNE_STATUS_MAP(KTUNE_STATUS_ENUM)
#undef KTUNE_STATUS_ENUM
        KTUNE_STATUS_COUNT
} ktune_status;

const char *ktune_status_string(ktune_status status);

/* Element types, in one table: X(NAME, name, bits, kind). KTUNE_<NAME> is the enumerator, name
 * the spelling of spaces, registries and keys, bits an element's width, kind FLOAT, INT or PACKED
 * (integers of fewer than 8 bits, several to a byte). New types go at the end: a type's number
 * is its position. */
#define KTUNE_DTYPE_MAP(X)                                                                         \
    X(F32, f32, 32, FLOAT)                                                                         \
    X(F16, f16, 16, FLOAT)                                                                         \
    X(BF16, bf16, 16, FLOAT)                                                                       \
    X(INT8, int8, 8, INT)                                                                          \
    X(FP8_E4M3, fp8_e4m3, 8, FLOAT)                                                                \
    X(FP8_E5M2, fp8_e5m2, 8, FLOAT)                                                                \
    X(INT32, int32, 32, INT)                                                                       \
    X(UINT4, uint4, 4, PACKED)                                                                     \
    X(UINT3, uint3, 3, PACKED)                                                                     \
    X(UINT2, uint2, 2, PACKED)

typedef enum {
#define KTUNE_DTYPE_ENUM(NAME, name, bits, kind) KTUNE_##NAME,
    KTUNE_DTYPE_MAP(KTUNE_DTYPE_ENUM)
#undef KTUNE_DTYPE_ENUM
        KTUNE_DTYPE_COUNT
} ktune_dtype;

typedef enum { KTUNE_DTYPE_FLOAT, KTUNE_DTYPE_INT, KTUNE_DTYPE_PACKED } ktune_dtype_kind;

/* A type's name ("bf16"; "?" beyond the table), its width in bits (0 beyond the table) and its
 * kind. */
const char *ktune_dtype_name(int64_t dtype);
int ktune_dtype_bits(int64_t dtype);
ktune_dtype_kind ktune_dtype_kind_of(int64_t dtype);

/* Why a configuration was chosen. */
#define KTUNE_REASON_MAP(X)                                                     \
    X(KTUNE_REASON_EXACT, "exact")                                              \
    X(KTUNE_REASON_NEAREST, "nearest")                                          \
    X(KTUNE_REASON_DEFAULT, "default")                                          \
    X(KTUNE_REASON_FORCED, "forced")

typedef enum {
#define KTUNE_REASON_ENUM(name, text) name,
    KTUNE_REASON_MAP(KTUNE_REASON_ENUM)
#undef KTUNE_REASON_ENUM
} ktune_reason;

const char *ktune_reason_string(ktune_reason reason);

typedef struct {
    const char *config;   /* configuration name, e.g. "vec_vec4_iters2_warps4" */
    const char *table;    /* device of the table used, or "" when none */
    ktune_reason reason;
    double tuned_us;      /* the table's time for the row used, 0 when none */
    char why[512];        /* one line: what was looked up and why this answer */
} ktune_choice;

/* A device described rather than detected, to ask offline (on a machine without it, or without
 * any GPU) which configuration a call would launch there. A field left 0 takes the usual value
 * of the compute capability (max_threads 1024; smem_per_block the opt-in maximum of cc 7.0 to
 * 12.0); l2_bytes 0 stays 0 (unknown). The table is chosen as on a device (name and SM count,
 * then compute capability). */
typedef struct {
    const char *name; /* as cudaGetDeviceProperties spells it, e.g. "NVIDIA H100 80GB HBM3" */
    int sms;
    int cc;           /* compute capability, major * 10 + minor, e.g. 90 */
    int max_threads;
    int64_t smem_per_block;
    int64_t l2_bytes;
} ktune_device_spec;

/* The configuration family would launch for key on device: key names every dimension of the
 * family's key as name=value, in any order (e.g. "dtype=f16 rows=4 cols=1000"). device NULL: the
 * current device.
 * KTUNE_ERROR_INVALID_ARGUMENT for an unknown family, a key that does not parse, or a device
 * without a name, SMs or compute capability. */
ktune_status ktune_explain(const char *family, const char *key, const ktune_device_spec *device,
                           ktune_choice *choice);

/* Online adaptation, off by default: KTUNE_ADAPT=1 in the environment, or ktune_adapt_enable(1),
 * turns it on for the process. A key launched 8 times or more is then timed on the caller's
 * stream with its candidates: the configuration the table answers it with and the answer and
 * runner-ups of the row it comes from (up to 4 in all, those valid for the key), each launched in
 * turn between two events that a later call reads (never a wait in the caller's path, nothing
 * while the stream is being captured into a graph); once each has 5 samples the key settles on
 * the fastest median.
 * Every candidate is a configuration the sweep checked, so results are as correct as the table's.
 * With adaptation off a launch costs the table lookup it always did. */
void ktune_adapt_enable(int on);

/* What adaptation settled, for the next sweep: for each key that chose between candidates, a
 * comment line ("# family key: config at X us, the table's config at Y us (of N)") and the key
 * in the form KTUNE_UNTUNED_FILE records ("family dim=value ..."), which `ktune sweep family
 * --untuned FILE` reads. Writes at most size bytes, NUL-terminated, whole lines; returns the
 * length of the whole report (larger than size - 1: it was cut). */
size_t ktune_adapt_report(char *buf, size_t size);

#ifdef __cplusplus
}
#endif

/* Each family's entry points: ktune/<family>.h, one a family of the build. */
#include "ktune/families.h"

#endif /* KTUNE_KTUNE_H */
