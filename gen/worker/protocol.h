/* The sweep's parent-worker protocol, defined once for the parent (gen/sweep/worker_client.c),
 * the workers (gen/worker/worker_main.cu) and the simulated backend (tests/sim/worker_sim.c).
 *
 * A worker owns one GPU. It says first what it runs on (a hello), then reads one request a line
 * on its stdin and writes one answer a line on its stdout:
 *
 *   H <limits...> <driver> <runtime> <uuid> <name>
 *                                             hello: the limits in KTUNE_DEVICE_LIMIT_MAP's
 *                                             order (sm90a: 1 when the device runs this build's
 *                                             sm_90a code), the CUDA driver API and runtime
 *                                             versions, the GPU's UUID as NVML writes it
 *                                             (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, or MIG-
 *                                             the same way; - where unknown), the device's name
 *                                             (the rest of the line)
 *   E <message>                               instead of the hello, where no device is usable;
 *                                             the worker then exits with code 2
 *
 *   <letter> <id> [<key...> [@<us>] [+]<config>...]   a request (KTUNE_REQUEST_MAP)
 *   R <id> <status> <body...>                         its answer
 *
 * An answer whose status is not ok reads "R <id> <status> 0 0 0 <detail>", whatever the request;
 * an ok one carries the body of its request's kind (ktune_answer). After an error that leaves the
 * CUDA context unusable the worker answers with a detail ending in KTUNE_CONTEXT_LOST, then exits
 * with code 3; the parent starts another. Numbers are decimal; names and keys hold no spaces. */
#ifndef KTUNE_WORKER_PROTOCOL_H
#define KTUNE_WORKER_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "ktune_table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The longest line either side writes, newline included. */
#define KTUNE_PROTOCOL_LINE 16384
/* The most configs one request names. */
#define KTUNE_PROTOCOL_MAX_CONFIGS 128

/* The requests: enum name, letter, whether a key follows the id, the fewest and the most configs
 * after it, what it asks. */
#define KTUNE_REQUEST_MAP(X)                                                                       \
    X(TRIAL, 'T', 1, 1, 1,                                                                         \
      "verify, then time one config with the screen's samples (a staged search keeps them short)") \
    X(SCREEN, 'X', 1, 1, KTUNE_PROTOCOL_MAX_CONFIGS,                                               \
      "T for several configs at once, with fewer waits; a status, time, spread and samples a "     \
      "config (the details of those not ok come from T). With --screen-cut, a config far behind "  \
      "the fastest (the request's, or @us, the shape's so far) stops after one sample; a config "  \
      "written +<config> is one the interleaved round to come will time")                          \
    X(INTERLEAVE, 'M', 1, 1, KTUNE_PROTOCOL_MAX_CONFIGS,                                           \
      "time several configs interleaved (A B C A B C ...): a time and spread a config")            \
    X(BENCH, 'B', 1, 2, 2,                                                                         \
      "bench the tuned and the default config against a copy of the same bytes, the copy "         \
      "ceiling and the vendor library (KTUNE_BENCH_FIELDS)")                                       \
    X(STATS, 'S', 0, 0, 0, "where the worker's time went since it started (KTUNE_STATS_FIELDS)")   \
    X(QUIT, 'Q', 0, 0, 0, "quit; no answer")

typedef enum {
    KTUNE_REQUEST_NONE,
#define KTUNE_REQUEST_ENUM(name, letter, keyed, least, most, what) KTUNE_REQUEST_##name,
    KTUNE_REQUEST_MAP(KTUNE_REQUEST_ENUM)
#undef KTUNE_REQUEST_ENUM
        KTUNE_REQUEST_COUNT
} ktune_request_kind;

/* What became of a config on a shape: the answers' statuses (a worker answers ok, invalid, wrong
 * or failed; timeout is the parent's, for a worker that did not answer in time). */
#define KTUNE_TRIAL_STATUS_MAP(X)                                                                  \
    X(KTUNE_TRIAL_NONE, "")                                                                        \
    X(KTUNE_TRIAL_OK, "ok")                                                                        \
    X(KTUNE_TRIAL_INVALID, "invalid")                                                              \
    X(KTUNE_TRIAL_WRONG, "wrong")                                                                  \
    X(KTUNE_TRIAL_FAILED, "failed")                                                                \
    X(KTUNE_TRIAL_TIMEOUT, "timeout")

typedef enum {
#define KTUNE_TRIAL_ENUM(name, text) name,
    KTUNE_TRIAL_STATUS_MAP(KTUNE_TRIAL_ENUM)
#undef KTUNE_TRIAL_ENUM
        KTUNE_TRIAL_COUNT
} ktune_trial_status;

extern const char *const ktune_trial_status_names[KTUNE_TRIAL_COUNT];

/* The status named text, or KTUNE_TRIAL_NONE. */
ktune_trial_status ktune_trial_status_parse(const char *text);

/* The end of the detail of an answer after which the worker exits. */
#define KTUNE_CONTEXT_LOST "(context lost)"

/* The body of an ok answer to BENCH: name, printf format, what it is. */
#define KTUNE_BENCH_FIELDS(X)                                                                      \
    X(tuned_us, "%.4f", "the tuned config's median, us")                                           \
    X(tuned_spread, "%.5f", "its spread (median absolute deviation over the median)")              \
    X(default_us, "%.4f", "the default config's median, us")                                       \
    X(default_spread, "%.5f", "its spread")                                                        \
    X(copy_us, "%.4f", "a device-to-device copy of the bytes one launch moves, us")                \
    X(copy_spread, "%.5f", "its spread")                                                           \
    X(ceiling_gbps, "%.2f", "the copy ceiling: a 1 GiB copy's GB/s")                               \
    X(bytes, "%.0f", "the bytes one launch moves")                                                 \
    X(flops, "%.0f", "the floating-point operations of one launch; 0: none counted")               \
    X(vendor_flops_per_s, "%.0f", "the fastest vendor path's FLOP/s on the family's ceiling key; "  \
                                  "0: none")

/* The most vendor paths a bench answer carries. After the fields above the answer holds their
 * count, then each path's name, median (us) and spread; the first is the bench's anchor. */
#define KTUNE_BENCH_MAX_VENDORS 4

/* The body of an ok answer to STATS: where the worker's time went since it started, in seconds. */
#define KTUNE_STATS_FIELDS(X)                                                                      \
    X(timed, "%.6f", "device time in timed samples")                                               \
    X(warmup, "%.6f", "device time in warm-ups")                                                   \
    X(prepare, "%.6f", "host time preparing inputs")                                               \
    X(check, "%.6f", "device time in checks, less the probes that count as samples")               \
    X(graph, "%.6f", "host time building graphs (mostly while the GPU runs earlier work)")         \
    X(busy, "%.6f", "host time inside requests in all")                                            \
    X(flush, "%.6f", "device time in L2 flushes before samples")                                   \
    X(probe, "%.6f", "device time in the checks' probes that are not samples")                     \
    X(wait, "%.6f", "host time waiting for the GPU to finish what it was given")                   \
    X(rest, "%.6f", "time resting: the host before precise rounds, the GPU between their samples")

#define KTUNE_PROTOCOL_FIELD(name, format, what) double name;

/* A vendor library's path timed on the same problem (e.g. cuBLASLt int8, cuBLAS bf16). */
typedef struct {
    char name[32]; /* a token: letters, digits, '_' */
    double us, spread;
} ktune_bench_vendor;

typedef struct {
    KTUNE_BENCH_FIELDS(KTUNE_PROTOCOL_FIELD)
    int nvendors; /* 0: the family has no vendor path for this problem */
    ktune_bench_vendor vendors[KTUNE_BENCH_MAX_VENDORS];
} ktune_bench_answer;

typedef struct {
    KTUNE_STATS_FIELDS(KTUNE_PROTOCOL_FIELD)
} ktune_stats_answer;

typedef struct {
    ktune_request_kind kind;
    long id;
    int nkey;
    int64_t key[KTUNE_MAX_KEY];
    double best_us; /* SCREEN: the shape's fastest so far (0: none) */
    int nconfigs;
    const char *configs[KTUNE_PROTOCOL_MAX_CONFIGS]; /* parsed: pointers into the line */
    unsigned char pinned[KTUNE_PROTOCOL_MAX_CONFIGS]; /* SCREEN: marked + */
} ktune_request;

/* A config's outcome in an answer to TRIAL (one), SCREEN (status, time, spread, samples) or
 * INTERLEAVE (time and spread). */
typedef struct {
    ktune_trial_status status;
    double median_us, spread;
    int samples;
} ktune_answer_entry;

typedef struct {
    long id;
    ktune_trial_status status; /* of the request; not ok: detail says why */
    char detail[1024];
    int context_lost;          /* the detail ends in KTUNE_CONTEXT_LOST */
    int n;                     /* entries: the request's configs (TRIAL: 1) */
    ktune_answer_entry entries[KTUNE_PROTOCOL_MAX_CONFIGS];
    ktune_bench_answer bench;
    ktune_stats_answer stats;
} ktune_answer;

/* The hello. */
typedef struct {
    char name[256];
    KTUNE_DEVICE_LIMIT_MAP(KTUNE_DEVICE_LIMIT_FIELD)
    char driver_api[32], runtime[32];
    char uuid[48]; /* "" where unknown (written "-") */
} ktune_hello;

/* 1 when text is a GPU UUID as NVML writes it: GPU- or MIG- and 8-4-4-4-12 hex digits. Such a
 * text names a GPU to nvidia-smi whatever CUDA_VISIBLE_DEVICES renumbered. */
int ktune_gpu_uuid_valid(const char *text);

/* The request's letter, its kind (KTUNE_REQUEST_NONE for none), and what it is in words. */
char ktune_request_letter(ktune_request_kind kind);
ktune_request_kind ktune_request_kind_of(char letter);
const char *ktune_request_name(ktune_request_kind kind);

/* Writes r as a line (newline included) of at most size bytes: its length, or -1 when r does not
 * fit, names too few or too many configs, or a name holds a space. */
int ktune_request_format(const ktune_request *r, char *line, size_t size);
/* Parses a request line (modified: r's names point into it); keys have nkey integers. 0, or -1
 * with why (size bytes) saying what is wrong; r->kind and r->id are set as far as they parsed. */
int ktune_request_parse(char *line, int nkey, ktune_request *r, char *why, size_t size);

/* Writes a's answer to a request of kind (a->n entries) as a line, newline included: its length,
 * or -1 when it does not fit. */
int ktune_answer_format(ktune_request_kind kind, const ktune_answer *a, char *line, size_t size);
/* Fills a with a failure: status and printf-style detail. */
void ktune_answer_fail(ktune_answer *a, long id, ktune_trial_status status, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Parses the answer line to a request of kind with n configs. 0; or -1 when it does not parse,
 * a then failed with the detail "unexpected answer: <line>". */
int ktune_answer_parse(const char *line, ktune_request_kind kind, int n, ktune_answer *a);

/* The hello line (newline included): its length, or -1 when it does not fit. */
int ktune_hello_format(const ktune_hello *h, char *line, size_t size);
/* The line of a worker with no usable device. */
int ktune_no_device_format(const char *message, char *line, size_t size);
/* Parses a worker's first line: 0 a hello, 1 a no-device line (why: its message), -1 neither
 * (why says so). */
int ktune_hello_parse(const char *line, ktune_hello *h, char *why, size_t size);

#ifdef __cplusplus
}
#endif

#endif
