/* The ktune command line: gen, emit, sweep, apply, show, bench, expand. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apply.h"
#include "bench.h"
#include "verify.h"
#include "emit.h"
#include "sweep.h"

#ifndef KTUNE_SOURCE_DIR
#define KTUNE_SOURCE_DIR "."
#endif
#ifndef KTUNE_M4
#define KTUNE_M4 "m4"
#endif
#ifndef KTUNE_CUDA_FLAGS
#define KTUNE_CUDA_FLAGS ""
#endif

/* The exit codes of every command, in one place: --help prints them, the README lists them. */
#define KTUNE_EXIT_MAP(X)                                                                         \
    X(KTUNE_EXIT_OK, 0, "success")                                                                \
    X(KTUNE_EXIT_FAILED, 1,                                                                       \
      "bad input (a space, model, registry or run folder that does not load, named\n"             \
      "               file:line:col) or a command that failed; nothing committed changed")        \
    X(KTUNE_EXIT_USAGE, 2, "a bad command line (unknown command or option, bad value)")           \
    X(KTUNE_EXIT_BUDGET, 3, "sweep --budget ran out; the same command resumes")                   \
    X(KTUNE_EXIT_NO_GPU, 4,                                                                       \
      "no usable GPU (no driver, no device): sweep, bench, verify, explain\n"                     \
      "               without --device")                                                          \
    X(KTUNE_EXIT_CHECK, 5,                                                                        \
      "a check failed: verify found an entry slower or wrong, emit --check a header\n"            \
      "               out of date")                                                               \
    X(KTUNE_EXIT_INTERRUPTED, 130, "interrupted (Ctrl-C); a sweep resumes with the same command")

enum {
#define KTUNE_EXIT_ENUM(name, code, text) name = code,
    KTUNE_EXIT_MAP(KTUNE_EXIT_ENUM)
#undef KTUNE_EXIT_ENUM
};

static void exit_codes_print(FILE *out)
{
    fprintf(out, "\nexit codes:\n");
#define KTUNE_EXIT_LINE(name, code, text) fprintf(out, "  %-3d          %s\n", code, text);
    KTUNE_EXIT_MAP(KTUNE_EXIT_LINE)
#undef KTUNE_EXIT_LINE
}

typedef struct {
    const char *command, *family;
    const char *positionals[64];
    int npositionals;
    const char *space, *spaces_dir, *registry_dir, *templates, *m4, *worker;
    const char *run, *out, *source_rev, *gpus, *model, *crossover, *plot, *where, *search;
    const char *device, *shard_text, *against;
    const char *batch_sizes, *out_in_features, *tp_split_dim, *x_q_dtype, *w_q_dtype, *seq_lengths;
    const char *keys, *untuned, *shapes, *random_models;
    int sms, cc;
    int tp_size, ep_size;
    int page_size, head_dim, num_q_heads, num_kv_heads, max_model_len;
    int batch_size, num_heads;
    char seq_len[1024]; /* --seq-len's values, separated by commas */
    int argc;
    char **argv;
    int samples, screen_samples, top, gpu, shards, seed, patience, shard, shard_count, repeats;
    double min_sample_us, screen_min_sample_us, screen_cut, final_margin, warmup_us, config_timeout,
        threshold, shape_budget, run_budget;
    int apply, verbose, force, retime, check, list, library_all, force_retune, untuned_form, fresh;
    int holdout;
    char command_line[2048];
} options;

/* The commands, in the order --help lists them. */
static const struct {
    const char *name, *args, *summary;
} commands[] = {
    {"sweep", "<family>", "measure every config of the space on every shape (GPU)"},
    {"merge", "OUT RUN...", "join run folders (the shards of a sweep) into the run folder OUT"},
    {"apply", "RUN", "merge a run into generated/<device>/<family>.yaml and emit its header"},
    {"emit", "<family>", "registries -> headers (generated/<device>/<family>.h)"},
    {"show", "<family>", "what each device's table holds and its gain over the default"},
    {"bench", "<family>",
     "tuned vs default vs a copy of the same bytes vs the vendor library (if\n"
     "the family has one) on this GPU, and each variant at its fastest (GPU);\n"
     "with shapes named (--shapes, --key, --random-models, --model, ...): the\n"
     "library's choice for each, tuned or not, beside the nearest tuned row's"},
    {"verify", "<family>",
     "re-measure this GPU's committed table; fail when an entry is slower than\n"
     "recorded by more than --threshold percent (5), or no longer correct"},
    {"explain", "<family> KEY",
     "which config the library picks for KEY ('dtype=f16 rows=4 cols=1000')\n"
     "and why, on this GPU or, with --device, on a device described (no GPU\n"
     "needed; --sms and --cc default to those of the device's committed\n"
     "table)"},
    {"expand", "<family>", "the space: config and shape counts; --list prints them"},
    {"gen", "<family>", "the build's generated sources (used by CMake)"},
};

/* Every option, declared once: the parser and --help are made from this table. FLAG sets an int
 * to 1, TEXT keeps the argument, INT and DOUBLE parse it within [min, max], WORDS joins the
 * arguments up to the next option into a char array of the options, separated by commas. An
 * option is listed under its command, or with the common options (command NULL). */
typedef enum { OPT_FLAG, OPT_TEXT, OPT_INT, OPT_DOUBLE, OPT_WORDS } option_kind;

typedef struct {
    const char *name;
    option_kind kind;
    size_t offset;
    double min, max;
    const char *command, *metavar, *help;
} option_spec;

#define OPT(name, kind, field, min, max, command, metavar, help)                                   \
    {name, kind, offsetof(options, field), min, max, command, metavar, help}
static const option_spec option_table[] = {
    OPT("--run", OPT_TEXT, run, 0, 0, "sweep", "DIR",
        "run folder (default ktune-runs/<family>-<UTC time>); re-run the\n"
        "same command to resume an interrupted sweep"),
    OPT("--search", OPT_TEXT, search, 0, 0, "sweep", "staged|exhaustive",
        "staged (the default): screen every config with short samples, then\n"
        "re-measure the best few precisely, interleaved; exhaustive: measure\n"
        "every config precisely, then re-measure the best few"),
    OPT("--samples", OPT_INT, samples, 1, 1000, "sweep", "N",
        "timed samples a precise measurement (7)"),
    OPT("--min-sample-us", OPT_DOUBLE, min_sample_us, 1, INFINITY, "sweep", "U",
        "shortest sample; launches are repeated to reach it (200)"),
    OPT("--screen-samples", OPT_INT, screen_samples, 1, 1000, "sweep", "N",
        "timed samples a config in a staged search's screen (2)"),
    OPT("--screen-min-sample-us", OPT_DOUBLE, screen_min_sample_us, 1, INFINITY, "sweep", "U",
        "shortest sample of the screen (30)"),
    OPT("--screen-cut", OPT_DOUBLE, screen_cut, 0, INFINITY, "sweep", "F",
        "a screened config whose first sample takes more than F times\n"
        "the shape's fastest first sample stops there (1.25; 0: never)"),
    OPT("--warmup-us", OPT_DOUBLE, warmup_us, 0, INFINITY, "sweep", "U",
        "warm-up before an interleaved measurement (50)"),
    OPT("--config-timeout", OPT_DOUBLE, config_timeout, 0.1, INFINITY, "sweep", "S",
        "a config answering later is killed and recorded timeout (10)"),
    OPT("--top", OPT_INT, top, 1, 32, "sweep", "N",
        "at most N configs a shape re-measured interleaved at the end\n"
        "(staged 6, exhaustive 3): the fastest, and those within\n"
        "--final-margin of it; with them the default and the committed\n"
        "config"),
    OPT("--final-margin", OPT_DOUBLE, final_margin, 0, INFINITY, "sweep", "F",
        "how far behind the fastest (a fraction of its time) a config may\n"
        "be and still be re-measured at the end (0.05; at least 0.15 us)"),
    OPT("--seed", OPT_INT, seed, 0, 2147483647, "sweep", "N",
        "sweep: try each shape's configs in an order shuffled by N (0:\n"
        "declared order); the same N gives the same order, also on resume.\n"
        "verify: measure the entries in an order shuffled by N (0: a fresh\n"
        "order each run)"),
    OPT("--max-configs-without-improvement", OPT_INT, patience, 0, 1000000, "sweep", "N",
        "a shape stops after N measured configs without a new best\n"
        "(0: exhaustive, the default)"),
    OPT("--gpu", OPT_INT, gpu, 0, 1023, "sweep", "N", "CUDA device (0)"),
    OPT("--gpus", OPT_TEXT, gpus, 0, 0, "sweep", "0,1,...",
        "one worker a GPU, each measuring every N-th shape into\n"
        "RUN/gpu<g>, merged into RUN at the end (the same GPU model);\n"
        "a GPU named twice runs two workers, in RUN/gpu<g>-2 the second\n"
        "(they disturb each other's times: to try the orchestration)"),
    OPT("--shape-budget", OPT_DOUBLE, shape_budget, 0, INFINITY, "sweep", "S",
        "a shape takes no new config after S seconds (0: no limit)"),
    OPT("--budget", OPT_DOUBLE, run_budget, 0, INFINITY, "sweep", "S",
        "the run stops after S seconds, exit 3; re-run to resume"),
    OPT("--shard", OPT_TEXT, shard_text, 0, 0, "sweep", "i/N",
        "measure only shapes i, i + N, i + 2N, ... (several machines;\n"
        "ktune merge joins the runs)"),
    OPT("--apply", OPT_FLAG, apply, 0, 0, "sweep", "",
        "apply the run and emit the header when done"),
    OPT("--update-registry", OPT_FLAG, apply, 0, 0, "sweep", "", "the same as --apply"),
    OPT("--verbose", OPT_FLAG, verbose, 0, 0, "sweep", "", "print every failure as it happens"),
    OPT("--force", OPT_FLAG, force, 0, 0, "apply", "",
        "take every winner of the run, faster or not"),
    OPT("--force-retune", OPT_FLAG, force_retune, 0, 0, "sweep", "",
        "apply the run when done as apply --force does: its winners replace\n"
        "the registry's entries of the same keys, faster or not"),
    OPT("--retime", OPT_FLAG, retime, 0, 0, "apply", "",
        "kept entries take the run's times of their configs, slower ones\n"
        "too (after a change in how times are taken, or on another unit of\n"
        "the same GPU); without it only faster ones"),
    OPT("--check", OPT_FLAG, check, 0, 0, "emit", "",
        "change nothing; fail when a header is out of date"),
    OPT("--crossover", OPT_TEXT, crossover, 0, 0, "show", "DIM",
        "and which variant wins along DIM (e.g. m) for each value of the\n"
        "other dimensions"),
    OPT("--plot", OPT_TEXT, plot, 0, 0, "bench", "PNG",
        "also draw time against the first size of the key that varies\n"
        "between the rows, a line a variant (gnuplot)"),
    OPT("--threshold", OPT_DOUBLE, threshold, 0, INFINITY, "verify", "P",
        "the slowdown, in percent, that fails an entry beyond the noise (5)"),
    OPT("--repeats", OPT_INT, repeats, 1, 100, "verify", "N",
        "times an entry that looks slower is measured again; it fails only\n"
        "when the slowdown holds every time (3)"),
    OPT("--fresh", OPT_FLAG, fresh, 0, 0, "verify", "",
        "measure every entry alone (with its reference, in a worker started\n"
        "for it), not only those below 10 us, which the sweep recorded so:\n"
        "its time then does not follow the entries measured before it"),
    OPT("--against", OPT_TEXT, against, 0, 0, "verify", "X",
        "compare with X instead of the recorded times, interleaved on this\n"
        "GPU: a registry (a file, or a folder like generated/), another\n"
        "build's worker, or a git revision of this checkout (its worker is\n"
        "built under <build>/ktune-against/)"),
    OPT("--device", OPT_TEXT, device, 0, 0, "explain", "NAME", "the device described"),
    OPT("--sms", OPT_INT, sms, 1, 100000, "explain", "N", "its SM count"),
    OPT("--cc", OPT_INT, cc, 10, 1000, "explain", "C", "its compute capability (90 for 9.0)"),
    OPT("--holdout", OPT_FLAG, holdout, 0, 0, "explain", "",
        "instead of a KEY: each key of the device's table left out and voted\n"
        "for by the others (step 3 of ktune.h), the pick against what that\n"
        "key's row measured (its answer and runner-ups)"),
    OPT("--list", OPT_FLAG, list, 0, 0, "expand", "", "print every config and shape"),
    OPT("--untuned-form", OPT_FLAG, untuned_form, 0, 0, "expand", "",
        "print only the shapes, as --untuned reads them"),
    OPT("--out", OPT_TEXT, out, 0, 0, "gen", "PATH",
        "gen: the folder of the sources; bench: where the CSV goes\n"
        "(default <family>.bench.csv)"),
    OPT("--shards", OPT_INT, shards, 1, 64, "gen", "N",
        "source files the configurations are spread over (4)"),
    OPT("--library-all", OPT_FLAG, library_all, 0, 0, "gen", "",
        "compile every config into the library, not only the tables'"),
    OPT("--space", OPT_TEXT, space, 0, 0, NULL, "FILE",
        "the space (default <spaces-dir>/<family>.yaml)"),
    OPT("--model", OPT_TEXT, model, 0, 0, NULL, "NAME",
        "only the shapes the space derives from the model preset\n"
        "<spaces-dir>/models/NAME.yaml (sweep, expand)"),
    OPT("--tp-size", OPT_INT, tp_size, 1, 1024, NULL, "N",
        "with --model: tensor-parallel degree N instead of the space's own;\n"
        "with --out-in-features: the degree the layers are split by (1)"),
    OPT("--ep-size", OPT_INT, ep_size, 1, 1024, NULL, "N",
        "expert-parallel degree N instead of the space's own: each GPU holds\n"
        "experts / N of a model's experts (shapes derived from models)"),
    OPT("--batch-sizes", OPT_TEXT, batch_sizes, 0, 0, NULL, "B,...",
        "with --out-in-features: linear layers' shapes instead of the\n"
        "space's, m = each batch size (families keyed by m, n, k);\n"
        "without it: these batch sizes for the shapes derived from models"),
    OPT("--seq-lengths", OPT_TEXT, seq_lengths, 0, 0, NULL, "L,...",
        "these sequence lengths (prefill: tokens = batch x L), and decode\n"
        "(one token a sequence), for the shapes derived from models whose\n"
        "grid has a seq (moe)"),
    OPT("--out-in-features", OPT_TEXT, out_in_features, 0, 0, NULL, "OUT/IN,...",
        "with --batch-sizes: the layers' global sizes, n = OUT and k = IN\n"
        "on one GPU of --tp-size"),
    OPT("--tp-split-dim", OPT_TEXT, tp_split_dim, 0, 0, NULL, "out|in",
        "the size --tp-size splits: out (column parallel, the default) or\n"
        "in (row parallel)"),
    OPT("--x-q-dtype", OPT_TEXT, x_q_dtype, 0, 0, NULL, "DTYPE",
        "the activations' quantized type (int8; a family without int8\n"
        "shapes, e.g. matmul: each dtype its own shapes use)"),
    OPT("--w-q-dtype", OPT_TEXT, w_q_dtype, 0, 0, NULL, "DTYPE",
        "the weight's quantized type (int8); the same as --x-q-dtype"),
    OPT("--page-size", OPT_INT, page_size, 1, 1024, NULL, "N",
        "an attention layer's shapes instead of the space's (families keyed\n"
        "by q_len, page_size, head_dim, q_heads, kv_heads, max_len): tokens\n"
        "a KV page (128); with --head-dim (128), --num-q-heads (128, global),\n"
        "--num-kv-heads (1, global), --max-model-len (1024), --tp-size (1),\n"
        "any of them naming the layer; each q_len and dtype of the space's\n"
        "own shapes"),
    OPT("--head-dim", OPT_INT, head_dim, 1, 1024, NULL, "N", "an attention layer: see --page-size"),
    OPT("--num-q-heads", OPT_INT, num_q_heads, 1, 65535, NULL, "N",
        "an attention layer: see --page-size"),
    OPT("--num-kv-heads", OPT_INT, num_kv_heads, 1, 65535, NULL, "N",
        "an attention layer: see --page-size"),
    OPT("--max-model-len", OPT_INT, max_model_len, 1, 1048576, NULL, "N",
        "an attention layer: see --page-size"),
    OPT("--seq-len", OPT_WORDS, seq_len, 0, 0, NULL, "L [L ...]",
        "dense attention's shapes instead of the space's (families keyed by\n"
        "batch, heads, seq_len, head_dim): these sequence lengths (spaces or\n"
        "commas between), with --batch-size (1), --num-heads (5, of one GPU)\n"
        "and --head-dim (128); each other dimension (dtype, mask) as the\n"
        "space's own shapes take it"),
    OPT("--batch-size", OPT_INT, batch_size, 1, 65535, NULL, "N", "dense attention: see --seq-len"),
    OPT("--num-heads", OPT_INT, num_heads, 1, 65535, NULL, "N", "dense attention: see --seq-len"),
    OPT("--key", OPT_TEXT, keys, 0, 0, NULL, "K",
        "these keys instead of the space's shapes: every dimension as\n"
        "name=value, e.g. 'dtype=bf16,m=3,n=4096,k=4096'; several keys\n"
        "separated by ';'"),
    OPT("--untuned", OPT_TEXT, untuned, 0, 0, NULL, "FILE",
        "the family's keys in FILE instead of the space's shapes: the\n"
        "lines KTUNE_UNTUNED_FILE records (the keys a program ran untuned)"),
    OPT("--shapes", OPT_TEXT, shapes, 0, 0, NULL, "FILE",
        "the keys in FILE instead of the space's shapes, a line each:\n"
        "name=value (spaces or commas between), the family's name first or\n"
        "not ('ktune expand --untuned-form' and KTUNE_UNTUNED_FILE write them)"),
    OPT("--random-models", OPT_TEXT, random_models, 0, 0, NULL, "N:SEED",
        "instead of the space's shapes, the layers (or softmax logits) of N\n"
        "random models drawn from SEED (linear and softmax families; the\n"
        "same keys on every machine)"),
    OPT("--where", OPT_TEXT, where, 0, 0, NULL, "EXPR",
        "only the shapes for which EXPR over the key holds, e.g.\n"
        "'m <= 16 && k >= 4096' (sweep, expand)"),
    OPT("--spaces-dir", OPT_TEXT, spaces_dir, 0, 0, NULL, "DIR",
        "(default " KTUNE_SOURCE_DIR "/spaces)"),
    OPT("--registry-dir", OPT_TEXT, registry_dir, 0, 0, NULL, "DIR",
        "(default " KTUNE_SOURCE_DIR "/generated)"),
    OPT("--templates", OPT_TEXT, templates, 0, 0, NULL, "DIR",
        "(default " KTUNE_SOURCE_DIR "/gen/templates)"),
    OPT("--m4", OPT_TEXT, m4, 0, 0, NULL, "PROGRAM", "(default " KTUNE_M4 ")"),
    OPT("--worker", OPT_TEXT, worker, 0, 0, NULL, "PROGRAM",
        "(default ktune-worker-<family> beside this program)"),
    OPT("--source-rev", OPT_TEXT, source_rev, 0, 0, NULL, "REV",
        "the source revision runs record (default $KTUNE_SOURCE_REV, else\n"
        "git describe of the source tree, else unknown)"),
};
#undef OPT

/* Prints text's lines from column `column`: the first after what is already on the line (`at`
 * characters, on a line of its own when that leaves no space), the others below it. */
static void lines_print(FILE *out, const char *text, int at, int column)
{
    if (at >= column) {
        fputc('\n', out);
        at = 0;
    }
    fprintf(out, "%*s", column - at, "");
    for (const char *p = text; *p; p++) {
        fputc(*p, out);
        if (*p == '\n')
            fprintf(out, "%*s", column, "");
    }
    fputc('\n', out);
}

static void option_print(FILE *out, const option_spec *o, int indent)
{
    int n = fprintf(out, "%*s%s%s%s", indent, "", o->name, o->metavar[0] ? " " : "", o->metavar);
    lines_print(out, o->help, n, 28);
}

static void usage_print(FILE *out)
{
    fprintf(out, "usage: ktune <command> [<family>] [options]\n\ncommands:\n");
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
        int n = fprintf(out, "  %s %s", commands[c].name, commands[c].args);
        lines_print(out, commands[c].summary, n, 20);
        for (size_t i = 0; i < sizeof option_table / sizeof option_table[0]; i++)
            if (option_table[i].command && strcmp(option_table[i].command, commands[c].name) == 0)
                option_print(out, &option_table[i], 6);
    }
    fprintf(out, "\ncommon options:\n");
    for (size_t i = 0; i < sizeof option_table / sizeof option_table[0]; i++)
        if (!option_table[i].command)
            option_print(out, &option_table[i], 2);
    exit_codes_print(out);
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "ktune: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(ktune --help shows the usage)\n");
    return KTUNE_EXIT_USAGE;
}

static int parse_int_arg(const char *name, const char *v, int min, int max, int *out)
{
    int64_t x;
    if (!ktune_parse_int(v, &x) || x < min || x > max) {
        fprintf(stderr, "ktune: %s: '%s' is not an integer between %d and %d\n", name, v, min,
                max);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int parse_double_arg(const char *name, const char *v, double min, double *out)
{
    if (!ktune_parse_double(v, out) || !(*out >= min) || !isfinite(*out)) {
        fprintf(stderr, "ktune: %s: '%s' is not a number of at least %g\n", name, v, min);
        return -1;
    }
    return 0;
}

static int parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->argc = argc;
    o->argv = argv;
    o->spaces_dir = KTUNE_SOURCE_DIR "/spaces";
    o->registry_dir = KTUNE_SOURCE_DIR "/generated";
    o->templates = KTUNE_SOURCE_DIR "/gen/templates";
    o->m4 = KTUNE_M4;
    o->search = "staged";
    o->samples = 7;
    o->screen_samples = 2;
    o->shards = 4;
    o->min_sample_us = 200;
    o->screen_min_sample_us = 30;
    o->screen_cut = 1.25;
    o->final_margin = 0.05;
    o->warmup_us = 50;
    o->config_timeout = 10;
    o->repeats = 3;
    o->threshold = 5;
    o->shard_count = 1;
    size_t n = 0;
    for (int i = 0; i < argc && n < sizeof o->command_line; i++)
        n += (size_t)snprintf(o->command_line + n, sizeof o->command_line - n, "%s%s", i ? " " : "",
                              argv[i]);
    if (argc < 2)
        return usage_error("no command given%s", "");
    o->command = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (a[0] != '-') {
            if (o->npositionals == 64)
                return usage_error("too many arguments at '%s'", a);
            o->positionals[o->npositionals++] = a;
            if (!o->family)
                o->family = a;
            continue;
        }
        const option_spec *spec = NULL;
        for (size_t k = 0; k < sizeof option_table / sizeof option_table[0] && !spec; k++)
            if (strcmp(option_table[k].name, a) == 0)
                spec = &option_table[k];
        if (!spec)
            return usage_error("unknown option '%s'", a);
        char *field = (char *)o + spec->offset;
        if (spec->kind == OPT_FLAG) {
            *(int *)field = 1;
            continue;
        }
        if (!v)
            return usage_error("%s needs a value", a);
        if (spec->kind == OPT_WORDS) { /* the words up to the next option */
            char *text = field;
            const size_t cap = sizeof o->seq_len; /* the one WORDS option's array */
            size_t n = strlen(text);
            for (; i + 1 < argc && argv[i + 1][0] != '-'; i++) {
                const size_t w = strlen(argv[i + 1]);
                if (n + w + 2 > cap)
                    return usage_error("%s: the values are longer than the option holds", a);
                if (n > 0)
                    text[n++] = ',';
                memcpy(text + n, argv[i + 1], w + 1);
                n += w;
            }
            if (n == 0)
                return usage_error("%s needs a value", a);
            continue;
        }
        if (spec->kind == OPT_TEXT)
            *(const char **)field = v;
        else if (spec->kind == OPT_INT)
            rc = parse_int_arg(a, v, (int)spec->min, (int)spec->max, (int *)field);
        else
            rc = parse_double_arg(a, v, spec->min, (double *)field);
        if (rc)
            return KTUNE_EXIT_USAGE;
        i++;
    }
    if (o->force_retune) /* the seed's flag: take the new winners even where tuned ones exist */
        o->apply = o->force = 1;
    /* values the table's kinds do not check */
    if (strcmp(o->search, "staged") != 0 && strcmp(o->search, "exhaustive") != 0)
        return usage_error("--search: '%s' is neither staged nor exhaustive", o->search);
    if (o->screen_cut > 0 && o->screen_cut < 1) {
        char text[32];
        snprintf(text, sizeof text, "%g", o->screen_cut);
        return usage_error("--screen-cut: %s would cut the fastest config (use 0, or 1 and more)",
                           text);
    }
    if (o->shard_text) {
        const char *slash = strchr(o->shard_text, '/');
        char first[32];
        int64_t i = -1, count = 0;
        if (slash && (size_t)(slash - o->shard_text) < sizeof first) {
            memcpy(first, o->shard_text, (size_t)(slash - o->shard_text));
            first[slash - o->shard_text] = '\0';
            if (!ktune_parse_int(first, &i) || !ktune_parse_int(slash + 1, &count))
                i = -1;
        }
        if (i < 0 || count < 1 || i >= count || count > 1000000)
            return usage_error("--shard: '%s' is not i/N with 0 <= i < N", o->shard_text);
        o->shard = (int)i;
        o->shard_count = (int)count;
    }
    return 0;
}

static int load_space(const options *o, ktune_space *s)
{
    char path[4096];
    if (o->space) {
        snprintf(path, sizeof path, "%s", o->space);
    } else if (o->family) {
        if (!ktune_is_identifier(o->family, KTUNE_NAME_MAX))
            return usage_error("'%s' is not a family name", o->family);
        snprintf(path, sizeof path, "%s/%s.yaml", o->spaces_dir, o->family);
    } else {
        return usage_error("%s needs a family or --space", o->command);
    }
    const int linear = o->out_in_features != NULL;
    const int dense = o->seq_len[0] != '\0'; /* --head-dim is dense attention's with --seq-len */
    const int attention = o->page_size || (o->head_dim && !dense) || o->num_q_heads ||
                          o->num_kv_heads || o->max_model_len;
    /* the flags that name keys outright: at most one, and no flag that derives shapes */
    const char *named[4];
    int nnamed = 0;
    if (o->keys)
        named[nnamed++] = "--key";
    if (o->untuned)
        named[nnamed++] = "--untuned";
    if (o->shapes)
        named[nnamed++] = "--shapes";
    if (o->random_models)
        named[nnamed++] = "--random-models";
    if (nnamed > 0) {
        const char *other = nnamed > 1        ? named[1]
                            : o->model        ? "--model"
                            : linear          ? "--out-in-features"
                            : attention       ? "--page-size"
                            : dense           ? "--seq-len"
                            : o->batch_sizes  ? "--batch-sizes"
                            : o->seq_lengths  ? "--seq-lengths"
                            : o->tp_size      ? "--tp-size"
                            : o->ep_size      ? "--ep-size"
                                              : NULL;
        if (other) {
            char text[64];
            snprintf(text, sizeof text, "%s and %s", named[0], other);
            return usage_error("%s both name shapes: give one", text);
        }
    }
    if (o->tp_size && !o->model && !linear && !attention)
        return usage_error("--tp-size needs --model, --out-in-features or --page-size%s", "");
    if (!dense && (o->batch_size || o->num_heads))
        return usage_error("%s needs --seq-len", o->batch_size ? "--batch-size" : "--num-heads");
    if (dense && (attention || o->model || linear || o->batch_sizes || o->seq_lengths ||
                  o->ep_size || o->tp_size))
        return usage_error("--seq-len and %s both name shapes: give one",
                           attention         ? "--page-size (or --num-q-heads, ...)"
                           : o->model        ? "--model"
                           : linear          ? "--out-in-features"
                           : o->batch_sizes  ? "--batch-sizes"
                           : o->seq_lengths  ? "--seq-lengths"
                           : o->ep_size      ? "--ep-size"
                                             : "--tp-size (--num-heads are one GPU's)");
    if (attention && (o->model || linear || o->batch_sizes || o->seq_lengths || o->ep_size))
        return usage_error("--page-size and %s both name shapes: give one",
                           o->model          ? "--model"
                           : linear          ? "--out-in-features"
                           : o->batch_sizes  ? "--batch-sizes"
                           : o->seq_lengths  ? "--seq-lengths"
                                             : "--ep-size");
    if (linear && (o->seq_lengths || o->ep_size))
        return usage_error("%s applies to shapes derived from models, not to --out-in-features",
                           o->seq_lengths ? "--seq-lengths" : "--ep-size");
    if (!linear && (o->tp_split_dim || o->x_q_dtype || o->w_q_dtype))
        return usage_error("%s needs --batch-sizes and --out-in-features",
                           o->tp_split_dim ? "--tp-split-dim"
                           : o->x_q_dtype  ? "--x-q-dtype"
                                           : "--w-q-dtype");
    if (linear && o->model)
        return usage_error("--model and --out-in-features both name shapes: give one%s", "");
    ktune_err err;
    ktune_attention_shapes att;
    if (attention && ktune_attention_parse(o->page_size, o->head_dim, o->num_q_heads,
                                           o->num_kv_heads, o->max_model_len, o->tp_size, &att,
                                           &err))
        return usage_error("%s", err.msg);
    ktune_dense_attention dense_att;
    if (dense && ktune_dense_attention_parse(o->seq_len, o->batch_size, o->num_heads, o->head_dim,
                                             &dense_att, &err))
        return usage_error("%s", err.msg);
    ktune_linear_shapes lin;
    if (linear && ktune_linear_parse(o->batch_sizes, o->out_in_features, o->tp_size,
                                     o->tp_split_dim, o->x_q_dtype, o->w_q_dtype, &lin, &err))
        return usage_error("%s", err.msg);
    int64_t batches[KTUNE_LINEAR_MAX], seqs[KTUNE_LINEAR_MAX];
    int nbatches = 0, nseqs = 0;
    if ((!linear && o->batch_sizes && ktune_sizes_parse("--batch-sizes", o->batch_sizes, batches,
                                                        KTUNE_LINEAR_MAX, &nbatches, &err)) ||
        (o->seq_lengths && ktune_sizes_parse("--seq-lengths", o->seq_lengths, seqs,
                                             KTUNE_LINEAR_MAX, &nseqs, &err)))
        return usage_error("%s", err.msg);
    ktune_space_opts so = {.model = o->model,
                           .tp = linear || attention ? 0 : o->tp_size,
                           .ep = o->ep_size,
                           .batches = batches,
                           .nbatches = nbatches,
                           .seqs = seqs,
                           .nseqs = nseqs,
                           .where = o->where,
                           .linear = linear ? &lin : NULL,
                           .attention = attention ? &att : NULL,
                           .dense_attention = dense ? &dense_att : NULL,
                           .keys = o->keys,
                           .untuned = o->untuned,
                           .shapes = o->shapes,
                           .random_models = o->random_models};
    if (ktune_space_load_with(path, &so, s, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return KTUNE_EXIT_FAILED;
    }
    return 0;
}

/* The path of a program installed beside this one (the workers, ktune-explain). */
static void program_beside(const char *name, char *out, size_t size)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    snprintf(out, size, "%.3900s/%s", n > 0 ? self : ".", name);
}

/* ktune-explain, beside this program: 0, or -1 (err set) naming the target that builds it, which
 * `--target ktune` alone does not. */
static int explain_program(char *out, size_t size, ktune_err *err)
{
    program_beside("ktune-explain", out, size);
    if (access(out, X_OK) == 0)
        return 0;
    return ktune_fail(err, "%s: %s; build the target ktune-explain (the library's selection, "
                           "which explain and bench with named keys report)",
                      out, strerror(errno));
}

static void default_worker(const options *o, const ktune_space *s, char *out, size_t size)
{
    char name[KTUNE_NAME_MAX + 16];
    snprintf(name, sizeof name, "ktune-worker-%s", s->family);
    if (o->worker)
        snprintf(out, size, "%s", o->worker);
    else
        program_beside(name, out, size);
}

static ktune_worker_opts worker_opts(const options *o, const char *program)
{
    ktune_worker_opts w = {.program = program,
                           .samples = o->samples,
                           .min_sample_us = o->min_sample_us,
                           .warmup_us = o->warmup_us,
                           .device = o->gpu};
    return w;
}

static void source_revision(const options *o, char *out, size_t size)
{
    snprintf(out, size, "unknown");
    const char *given = o->source_rev ? o->source_rev : getenv("KTUNE_SOURCE_REV");
    if (given) {
        snprintf(out, size, "%s", ktune_is_safe_text(given, 60) ? given : "unknown");
        return;
    }
    FILE *p = popen(
        "git -C '" KTUNE_SOURCE_DIR "' describe --always --dirty --abbrev=12 2>/dev/null", "r");
    if (!p)
        return;
    char line[128];
    if (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        if (ktune_is_safe_text(line, 60) && line[0])
            snprintf(out, size, "%s", line);
    }
    pclose(p);
}

/* The family's registries under the registry dir, loaded, sorted by device folder. */
typedef struct {
    char **paths;
    ktune_registry *regs;
    int count;
} registries;

static void registries_free(registries *r)
{
    for (int i = 0; i < r->count; i++) {
        free(r->paths[i]);
        if (r->regs)
            ktune_registry_free(&r->regs[i]);
    }
    free(r->paths);
    free(r->regs);
    memset(r, 0, sizeof *r);
}

/* Fails (printing why, *r empty) when the dir cannot be read, a registry does not load, or two
 * are tables of the same device: their headers would define the same table, and the library
 * would keep one of them. */
static int registries_find(const options *o, const ktune_space *s, registries *r)
{
    char ***paths = &r->paths;
    int *count = &r->count;
    memset(r, 0, sizeof *r);
    DIR *d = opendir(o->registry_dir);
    if (!d) {
        fprintf(stderr, "ktune: --registry-dir %s: cannot open: %s\n", o->registry_dir,
                strerror(errno));
        return -1;
    }
    struct dirent *e;
    int cap = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s/%s.yaml", o->registry_dir, e->d_name, s->family);
        if (access(path, F_OK) != 0)
            continue;
        if (*count == cap)
            *paths = realloc(*paths, sizeof **paths * (size_t)(cap = cap ? cap * 2 : 8));
        (*paths)[(*count)++] = strdup(path);
    }
    closedir(d);
    for (int i = 1; i < *count; i++)
        for (int j = i; j > 0 && strcmp((*paths)[j - 1], (*paths)[j]) > 0; j--) {
            char *t = (*paths)[j];
            (*paths)[j] = (*paths)[j - 1];
            (*paths)[j - 1] = t;
        }
    ktune_registry *regs = calloc((size_t)*count + 1, sizeof *regs);
    int loaded = 0, rc = 0;
    for (; rc == 0 && loaded < *count; loaded++) {
        ktune_err err;
        if (ktune_registry_load((*paths)[loaded], s, &regs[loaded], &err)) {
            fprintf(stderr, "%s\n", err.msg);
            rc = -1;
            break;
        }
        for (int j = 0; rc == 0 && j < loaded; j++)
            if (strcmp(regs[j].device, regs[loaded].device) == 0 &&
                regs[j].sms == regs[loaded].sms) {
                fprintf(stderr, "ktune: %s and %s are both tables of %s (%d SMs); keep one\n",
                        (*paths)[j], (*paths)[loaded], regs[j].device, regs[j].sms);
                rc = -1;
            }
    }
    if (rc) {
        for (int i = 0; i < loaded; i++)
            ktune_registry_free(&regs[i]);
        free(regs);
        registries_free(r);
        return -1;
    }
    r->regs = regs;
    return 0;
}

/* "generated/<device>/<family>.yaml": the registry path as the header names it. */
static void registry_label(const char *path, char *out, size_t size)
{
    const char *p = path + strlen(path);
    int slashes = 0;
    while (p > path && slashes < 3)
        if (*--p == '/')
            slashes++;
    snprintf(out, size, "%s", slashes == 3 ? p + 1 : path);
}

/* Emits (or with check, compares) the header of the registry at reg_path, loaded as reg. 0 in
 * sync / written, 1 out of date (check), -1 error. */
static int emit_registry(const options *o, const ktune_space *s, const char *reg_path,
                         const ktune_registry *reg, int check)
{
    ktune_err err;
    char label[4096], header[4096];
    registry_label(reg_path, label, sizeof label);
    snprintf(header, sizeof header, "%.*s.h", (int)(strlen(reg_path) - 5), reg_path);
    ktune_emit_tools tools = {o->m4, o->templates};
    ktune_buf text = {0};
    int rc = ktune_emit_table(s, reg, label, &tools, &text, &err);
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        ktune_buf_free(&text);
        return -1;
    }
    if (check) {
        size_t len;
        char *old = ktune_file_read(header, &len, &err);
        rc = !old || len != text.len || memcmp(old, text.data, len) != 0;
        if (rc)
            fprintf(stderr, "ktune: %s is not what %s emits; run ktune emit %s\n", header,
                    reg_path, s->family);
        free(old);
    } else {
        int w = ktune_file_write_if_changed(header, text.data, text.len, &err);
        if (w < 0)
            fprintf(stderr, "%s\n", err.msg);
        else if (w > 0)
            fprintf(stderr, "ktune: wrote %s\n", header);
        rc = w < 0 ? -1 : 0;
    }
    ktune_buf_free(&text);
    return rc;
}

static int cmd_emit(const options *o, const ktune_space *s)
{
    registries r;
    int bad = 0;
    if (registries_find(o, s, &r))
        return KTUNE_EXIT_FAILED;
    if (r.count == 0) {
        fprintf(stderr, "ktune: no %s registry under %s (<device>/%s.yaml)\n", s->family,
                o->registry_dir, s->family);
        return KTUNE_EXIT_FAILED;
    }
    for (int i = 0; i < r.count; i++) {
        int rc = emit_registry(o, s, r.paths[i], &r.regs[i], o->check);
        if (rc < 0) {
            registries_free(&r);
            return KTUNE_EXIT_FAILED;
        }
        bad += rc;
    }
    if (o->check && !bad)
        fprintf(stderr, "ktune: %d %s header%s in sync with %s\n", r.count, s->family,
                r.count == 1 ? "" : "s", o->registry_dir);
    registries_free(&r);
    return bad ? KTUNE_EXIT_CHECK : KTUNE_EXIT_OK;
}

static int cmd_gen(const options *o, const ktune_space *s)
{
    if (!o->out)
        return usage_error("gen needs --out DIR%s", "");
    ktune_err err;
    ktune_emit_tools tools = {o->m4, o->templates};
    registries r;
    int rc = 1;
    if (registries_find(o, s, &r))
        return KTUNE_EXIT_FAILED;
    const int count = r.count;
    const ktune_registry *regs = r.regs;
    char **headers = calloc((size_t)count + 1, sizeof *headers);
    int *all = malloc(sizeof *all * (size_t)s->nconfigs);
    /* the combinations of instantiated values each config is compiled for in the library: those
     * of the rows that name it, every one for a default (or with --library-all); none: a config
     * the library leaves out */
    uint64_t *combos = calloc((size_t)s->nconfigs + 1, sizeof *combos);
    int nlib = 0;
    if (ktune_mkdirs(o->out, &err))
        goto fail;
    for (int i = 0; i < s->nconfigs; i++)
        all[i] = i;
    for (int i = 0; i < s->nconfigs; i++)
        combos[i] = o->library_all ? ~0ULL : 0;
    for (int i = 0; i < s->ndefaults; i++)
        combos[s->defaults[i]] = ~0ULL;
    for (int i = 0; i < count; i++) {
        for (int e = 0; e < regs[i].nentries; e++) {
            const ktune_entry *en = &regs[i].entries[e];
            const int combo = ktune_space_combo(s, en->key);
            if (combo < 0) {
                char key[256];
                ktune_space_key_format(s, en->key, key, sizeof key);
                ktune_fail(&err, "%s: %s: a value the space does not instantiate", r.paths[i],
                           key);
                goto fail;
            }
            combos[ktune_space_find_config(s, en->config)] |= 1ULL << combo;
            for (int j = 0; j < en->nrunner_ups && j < KTUNE_TABLE_RUNNER_UPS; j++)
                combos[ktune_space_find_config(s, en->runner_ups[j].config)] |= 1ULL << combo;
        }
        char label[4096];
        registry_label(r.paths[i], label, sizeof label);
        /* relative to the registry dir: <device>/<family>.h */
        const char *rel = strchr(label, '/');
        headers[i] = strdup(rel ? rel + 1 : label);
        headers[i][strlen(headers[i]) - 4] = 'h';
        headers[i][strlen(headers[i]) - 3] = '\0';
    }
    int *lib = malloc(sizeof *lib * (size_t)(s->nconfigs ? s->nconfigs : 1));
    uint64_t *lib_combos = malloc(sizeof *lib_combos * (size_t)(s->nconfigs ? s->nconfigs : 1));
    int *position = malloc(sizeof *position * (size_t)(s->nconfigs ? s->nconfigs : 1));
    for (int i = 0; i < s->nconfigs; i++) {
        position[i] = combos[i] ? nlib : -1; /* the library's instance index of config i */
        if (combos[i]) {
            lib_combos[nlib] = combos[i];
            lib[nlib++] = i;
        }
    }
    int **instances = calloc((size_t)count + 1, sizeof *instances);
    int **runners = calloc((size_t)count + 1, sizeof *runners);
    for (int i = 0; i < count; i++) {
        instances[i] = malloc(sizeof **instances * (size_t)(regs[i].nentries + 1));
        runners[i] =
            malloc(sizeof **runners * (size_t)(regs[i].nentries * KTUNE_TABLE_RUNNER_UPS + 1));
        for (int e = 0; e < regs[i].nentries; e++) {
            const ktune_entry *en = &regs[i].entries[e];
            instances[i][e] = position[ktune_space_find_config(s, en->config)];
            for (int j = 0; j < KTUNE_TABLE_RUNNER_UPS; j++)
                runners[i][e * KTUNE_TABLE_RUNNER_UPS + j] =
                    j < en->nrunner_ups
                        ? position[ktune_space_find_config(s, en->runner_ups[j].config)]
                        : -1;
        }
    }
    int bad = ktune_emit_space(s, &tools, o->out, &err) ||
              ktune_emit_instances(s, "candidates", all, NULL, s->nconfigs, o->shards, &tools,
                                   o->out, &err) ||
              ktune_emit_instances(s, "library", lib, lib_combos, nlib, o->shards, &tools, o->out,
                                   &err) ||
              ktune_emit_table_index(s, regs, (const char *const *)headers,
                                     (const int *const *)instances, (const int *const *)runners,
                                     count, &tools, o->out, &err);
    for (int i = 0; i < count; i++) {
        free(instances[i]);
        free(runners[i]);
    }
    free(instances);
    free(runners);
    free(position);
    free(lib);
    free(lib_combos);
    if (bad)
        goto fail;
    rc = 0;
fail:
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    for (int i = 0; i < count; i++)
        free(headers[i]);
    free(headers);
    free(all);
    free(combos);
    registries_free(&r);
    return rc;
}

static void on_signal(int sig)
{
    (void)sig;
    ktune_interrupted = 1;
}

static int do_apply(const options *o, const ktune_space *s, const char *run)
{
    ktune_err err;
    char reg_path[4096];
    ktune_apply_counts counts;
    int changed;
    if (ktune_registry_path_for_run(s, run, o->registry_dir, reg_path, sizeof reg_path, &err) ||
        ktune_apply_run(s, run, reg_path, o->force, o->retime, stderr, &counts, &changed, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return KTUNE_EXIT_FAILED;
    }
    fprintf(stderr,
            "ktune: %s: %d added, %d replaced, %d kept (%d of them with this run's time, %d with "
            "runner-ups of variants they did not name)%s\n",
            reg_path, counts.added, counts.replaced, counts.kept, counts.refreshed, counts.widened,
            changed ? "" : "; registry unchanged");
    if (access(reg_path, F_OK) != 0)
        return 0;
    ktune_registry reg;
    if (ktune_registry_load(reg_path, s, &reg, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return KTUNE_EXIT_FAILED;
    }
    int rc = emit_registry(o, s, reg_path, &reg, 0);
    ktune_registry_free(&reg);
    return rc < 0 ? KTUNE_EXIT_FAILED : KTUNE_EXIT_OK;
}

/* --gpus: this program again, once a GPU (--shard i/N --gpu g --run RUN/gpu<g>), then a merge of
 * their runs into RUN. */
static int sweep_gpus(const options *o, const ktune_space *s, const char *run)
{
    int gpus[64], n = 0;
    for (const char *p = o->gpus; *p;) {
        if (n == 64)
            return usage_error("--gpus: '%s' names more than 64 devices", o->gpus);
        char *end;
        long g = strtol(p, &end, 10);
        if (end == p || g < 0 || g > 1023 || (*end && *end != ','))
            return usage_error("--gpus: '%s' is not a list of device numbers", o->gpus);
        gpus[n++] = (int)g;
        p = *end ? end + 1 : end;
    }
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return usage_error("--gpus: cannot find this program%s", "");
    self[len] = '\0';
    pid_t pids[64];
    char runs[64][4096];
    const char *run_list[64];
    setenv("KTUNE_PLAIN_PROGRESS", "1", 1);
    for (int i = 0; i < n; i++) {
        int seen = 1; /* a GPU named twice: its second worker's run is gpu<g>-2 */
        for (int j = 0; j < i; j++)
            seen += gpus[j] == gpus[i];
        if (seen == 1)
            snprintf(runs[i], sizeof runs[i], "%.4000s/gpu%d", run, gpus[i]);
        else
            snprintf(runs[i], sizeof runs[i], "%.4000s/gpu%d-%d", run, gpus[i], seen);
        run_list[i] = runs[i];
        char shard[32], gpu[16];
        snprintf(shard, sizeof shard, "%d/%d", i, n);
        snprintf(gpu, sizeof gpu, "%d", gpus[i]);
        /* the same command without --gpus, --run, --gpu, --apply, plus this GPU's share */
        char *args[256];
        int k = 0;
        args[k++] = self;
        for (int a = 1; a < o->argc && k < 240; a++) {
            if (strcmp(o->argv[a], "--gpus") == 0 || strcmp(o->argv[a], "--run") == 0 ||
                strcmp(o->argv[a], "--gpu") == 0) {
                a++;
                continue;
            }
            if (strcmp(o->argv[a], "--apply") != 0)
                args[k++] = o->argv[a];
        }
        char *extra[] = {"--shard", shard, "--gpu", gpu, "--run", runs[i]};
        for (int e = 0; e < 6; e++)
            args[k++] = extra[e];
        args[k] = NULL;
        pids[i] = fork();
        if (pids[i] == 0) {
            execv(self, args);
            _exit(127);
        }
    }
    int failed = 0, interrupted = 0, no_gpu = 0;
    for (int i = 0; i < n; i++) {
        int status = 0;
        while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR)
            ;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (code == KTUNE_EXIT_INTERRUPTED)
            interrupted = 1;
        else if (code == KTUNE_EXIT_NO_GPU)
            no_gpu++; /* it said why, and wrote nothing */
        else if (code != 0) {
            fprintf(stderr, "ktune: the sweep on GPU %d exited %d; see %s\n", gpus[i], code,
                    runs[i]);
            failed = 1;
        }
    }
    if (interrupted)
        return KTUNE_EXIT_INTERRUPTED;
    if (no_gpu)
        return KTUNE_EXIT_NO_GPU;
    if (failed) {
        fprintf(
            stderr,
            "ktune: the runs of the GPUs that finished are kept and nothing was merged: re-run the "
            "same command and each GPU's run resumes where it stopped\n");
        return KTUNE_EXIT_FAILED;
    }
    ktune_err err;
    if (ktune_merge_runs(s, run, run_list, n, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return KTUNE_EXIT_FAILED;
    }
    fprintf(stderr, "ktune: merged the runs of %d GPUs into %s\n", n, run);
    return 0;
}

static int cmd_sweep(const options *o, const ktune_space *s)
{
    char run[4096], worker[4096], rev[128];
    if (o->run) {
        snprintf(run, sizeof run, "%s", o->run);
    } else {
        time_t t = time(NULL);
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", gmtime(&t));
        snprintf(run, sizeof run, "ktune-runs/%s-%s", s->family, stamp);
    }
    const char *base = strrchr(run, '/');
    if (!ktune_is_safe_text(base ? base + 1 : run, 200))
        return usage_error("--run: the folder name '%s' may hold only printable characters "
                           "without \\ \" ' ` [ ] ( ) , $ # /* */ ??",
                           run);
    if (o->gpus) {
        int rc = sweep_gpus(o, s, run);
        return rc == 0 && o->apply ? do_apply(o, s, run) : rc;
    }
    default_worker(o, s, worker, sizeof worker);
    source_revision(o, rev, sizeof rev);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int staged = strcmp(o->search, "staged") == 0;
    ktune_worker_opts w = worker_opts(o, worker);
    if (staged) {
        w.screen_samples = o->screen_samples;
        w.screen_min_sample_us = o->screen_min_sample_us;
        w.screen_cut = o->screen_cut;
    }
    ktune_sweep_opts so = {s,
                           run,
                           w,
                           staged,
                           o->config_timeout,
                           o->top ? o->top : staged ? 6 : 3,
                           o->registry_dir,
                           o->command_line,
                           rev,
                           KTUNE_CUDA_FLAGS,
                           o->verbose,
                           (unsigned)o->seed,
                           o->patience,
                           o->shard,
                           o->shard_count,
                           o->shape_budget,
                           o->run_budget,
                           o->final_margin};
    fprintf(stderr, "ktune: sweeping %s: %d configs x %d shapes into %s\n", s->family,
            s->nconfigs, s->nshapes, run);
    ktune_err err;
    int rc = ktune_sweep_run(&so, &err);
    if (rc == KTUNE_SWEEP_NO_DEVICE) {
        fprintf(stderr, "ktune: no GPU to sweep on: %s\nktune: nothing was changed\n", err.msg);
        return KTUNE_EXIT_NO_GPU;
    }
    if (rc < 0) {
        fprintf(stderr, "%s\n", err.msg);
        return KTUNE_EXIT_FAILED;
    }
    if (rc == KTUNE_SWEEP_INTERRUPTED)
        return KTUNE_EXIT_INTERRUPTED;
    if (rc == KTUNE_SWEEP_BUDGET_SPENT)
        return KTUNE_EXIT_BUDGET;
    return o->apply ? do_apply(o, s, run) : 0;
}

/* The winning variant along dimension x for every value of the other dimensions: the runs of
 * one variant, e.g. "gemv m=1..16, mma m=32..4096". */
static void show_crossover(const ktune_space *s, const ktune_registry *reg, int x)
{
    char *done = calloc((size_t)reg->nentries + 1, 1);
    printf("  winning variant along %s (a run of one variant: first..last %s it won at):\n",
           s->key[x].name, s->key[x].name);
    for (int i = 0; i < reg->nentries; i++) {
        if (done[i])
            continue;
        char group[256] = "";
        size_t gl = 0;
        for (int d = 0; d < s->nkey; d++)
            if (d != x) {
                char v[64];
                if (s->key[d].kind == KTUNE_DIM_DTYPE)
                    snprintf(v, sizeof v, "%s", ktune_dtype_name(reg->entries[i].key[d]));
                else
                    snprintf(v, sizeof v, "%lld", (long long)reg->entries[i].key[d]);
                gl += (size_t)snprintf(group + gl, sizeof group - gl, "%s%s=%s", gl ? " " : "",
                                       s->key[d].name, v);
            }
        printf("    %-34s", group);
        int run_variant = -1;
        int64_t run_first = 0, run_last = 0;
        /* entries are sorted by key; within a group, x ascends when x is the only difference */
        for (int j = i; j < reg->nentries; j++) {
            int same = 1;
            for (int d = 0; d < s->nkey; d++)
                same &= d == x || reg->entries[j].key[d] == reg->entries[i].key[d];
            if (!same)
                continue;
            done[j] = 1;
            int c = ktune_space_find_config(s, reg->entries[j].config);
            int v = c >= 0 ? s->configs[c].variant : -1;
            if (v != run_variant && run_variant >= 0)
                printf(" %s %lld..%lld,", s->variants[run_variant].name, (long long)run_first,
                       (long long)run_last);
            if (v != run_variant)
                run_first = reg->entries[j].key[x];
            run_variant = v;
            run_last = reg->entries[j].key[x];
        }
        if (run_variant >= 0)
            printf(" %s %lld..%lld", s->variants[run_variant].name, (long long)run_first,
                   (long long)run_last);
        printf("\n");
    }
    free(done);
}

static int cmd_show(const options *o, const ktune_space *s)
{
    int x = -1;
    for (int d = 0; o->crossover && d < s->nkey; d++)
        if (s->key[d].kind == KTUNE_DIM_INT && strcmp(s->key[d].name, o->crossover) == 0)
            x = d;
    if (o->crossover && x < 0)
        return usage_error("--crossover: '%s' is not an integer dimension of the key",
                           o->crossover);
    registries found;
    if (registries_find(o, s, &found))
        return KTUNE_EXIT_FAILED;
    if (found.count == 0)
        printf("no %s registry under %s\n", s->family, o->registry_dir);
    for (int i = 0; i < found.count; i++) {
        const ktune_registry *reg = &found.regs[i];
        double log_gain = 0;
        printf("%s: %s (%d SMs, cc %d), %d keys\n", found.paths[i], reg->device, reg->sms, reg->cc,
               reg->nentries);
        for (int r = 0; r < reg->nruns; r++)
            printf("  run %d: %s, driver %s, CUDA %s, source %s, %s\n", reg->runs[r].id,
                   reg->runs[r].name, reg->runs[r].driver, reg->runs[r].cuda, reg->runs[r].source,
                   reg->runs[r].date);
        /* columns as wide as their widest cell */
        int key_width = 3, config_width = 6;
        for (int e = 0; e < reg->nentries; e++) {
            char key[256];
            ktune_space_key_format(s, reg->entries[e].key, key, sizeof key);
            key_width = (int)strlen(key) > key_width ? (int)strlen(key) : key_width;
            int len = (int)strlen(reg->entries[e].config);
            config_width = len > config_width ? len : config_width;
        }
        for (int e = 0; e < reg->nentries; e++) {
            char key[256];
            const ktune_entry *x = &reg->entries[e];
            ktune_space_key_format(s, x->key, key, sizeof key);
            printf("  %-*s  %-*s %10.3f us  default %10.3f us  %6.3fx\n", key_width, key,
                   config_width, x->config, x->us, x->default_us, x->default_us / x->us);
            log_gain += log(x->default_us / x->us);
        }
        printf("  gain over the default: %.3fx (geomean of %d keys)\n",
               reg->nentries ? exp(log_gain / reg->nentries) : 1.0, reg->nentries);
        if (x >= 0)
            show_crossover(s, reg, x);
    }
    registries_free(&found);
    return 0;
}

/* Runs ktune-explain (beside this program, linked with the library): the library's own selection,
 * on a described device where --device names one; its SM count and compute capability come from
 * the device's committed table unless given. */
static int cmd_explain(const options *o, const ktune_space *s)
{
    if (o->npositionals != (o->holdout ? 1 : 2))
        return usage_error(o->holdout ? "explain --holdout needs a family and no key%s"
                                      : "explain needs a family and a key, e.g. ktune explain "
                                        "softmax 'dtype=f16 rows=4 cols=1000'%s",
                           "");
    int sms = o->sms, cc = o->cc;
    if (o->device && (!sms || !cc)) {
        registries r;
        int found = 0;
        if (registries_find(o, s, &r))
            return KTUNE_EXIT_FAILED;
        for (int i = 0; i < r.count && !found; i++)
            if (strcmp(r.regs[i].device, o->device) == 0 && (!sms || sms == r.regs[i].sms)) {
                sms = sms ? sms : r.regs[i].sms;
                cc = cc ? cc : r.regs[i].cc;
                found = 1;
            }
        registries_free(&r);
        if (!found)
            return usage_error("--device %s: no committed table of that device; give --sms and "
                               "--cc",
                               o->device);
    }
    char program[4096], sms_text[16], cc_text[16];
    ktune_err err;
    if (explain_program(program, sizeof program, &err)) {
        fprintf(stderr, "ktune: %s\n", err.msg);
        return KTUNE_EXIT_FAILED;
    }
    snprintf(sms_text, sizeof sms_text, "%d", sms);
    snprintf(cc_text, sizeof cc_text, "%d", cc);
    char *args[] = {program, (char *)s->family,
                    o->holdout ? "--holdout" : (char *)o->positionals[1], "--device",
                    (char *)o->device, "--sms", sms_text, "--cc", cc_text, NULL};
    if (!o->device)
        args[3] = NULL;
    fflush(NULL);
    execv(program, args);
    fprintf(stderr, "ktune: cannot run %s: %s\n", program, strerror(errno));
    return KTUNE_EXIT_FAILED;
}

/* What ktune bench's choices for keys take: the space, and the registry folder whose table for the
 * device the library must hold (ktune apply rewrites the header; the library holds the new table
 * only once rebuilt, and until then it answers for the old one). */
typedef struct {
    const ktune_space *space;
    const char *registry_dir;
} library_choices_ctx;

/* ktune bench's choices for keys (ktune_bench_choose_fn): ktune-explain --keys, beside this
 * program and linked with the library, on the worker's device as its hello describes it. Where
 * the registry folder has a table for the device, the library must answer each of its keys with
 * its config, exactly: else an error that says to rebuild, so that no bench measures choices of
 * another table than the one it names. */
static int library_choices(void *ctx, const ktune_hello *dev, int n, const ktune_space_shape *keys,
                           ktune_bench_choice *out, ktune_err *err)
{
    const library_choices_ctx *lc = ctx;
    const ktune_space *s = lc->space;
    char path[] = "/tmp/ktune-keys-XXXXXX", program[4096], table[4400], slug[256];
    char sms[24], cc[24], threads[24], smem[24], l2[24];
    char differs[1400] = "";
    ktune_buf text = {0};
    ktune_registry reg;
    memset(&reg, 0, sizeof reg);
    int rc = -1, got = 0, bad = 0, status, ndiffer = 0;
    ktune_device_slug(dev->name, slug, sizeof slug, '-');
    snprintf(table, sizeof table, "%.4000s/%s/%s.yaml", lc->registry_dir, slug, s->family);
    if (access(table, F_OK) == 0 && ktune_registry_load(table, s, &reg, err))
        return -1;
    const int total = n + reg.nentries; /* the bench's keys, then the table's */
    const int fd = mkstemp(path);
    if (fd < 0) {
        ktune_fail(err, "bench: cannot create a temporary file: %s", strerror(errno));
        goto done;
    }
    FILE *f = fdopen(fd, "w");
    for (int i = 0; f && i < total; i++) {
        char key[512];
        ktune_space_key_format(s, i < n ? keys[i].key : reg.entries[i - n].key, key, sizeof key);
        fprintf(f, "%s\n", key);
    }
    if (!f || fclose(f) != 0) {
        ktune_fail(err, "bench: %s: write failed", path);
        goto done;
    }
    if (explain_program(program, sizeof program, err))
        goto done;
    snprintf(sms, sizeof sms, "%d", dev->sms);
    snprintf(cc, sizeof cc, "%d", dev->cc);
    snprintf(threads, sizeof threads, "%d", dev->max_threads);
    snprintf(smem, sizeof smem, "%lld", (long long)dev->smem_per_block);
    snprintf(l2, sizeof l2, "%lld", (long long)dev->l2_bytes);
    char *const args[] = {program, (char *)s->family, "--keys", path, "--device",
                          (char *)dev->name, "--sms", sms, "--cc", cc, "--max-threads", threads,
                          "--smem-per-block", smem, "--l2-bytes", l2, NULL};
    if (ktune_run_capture(args, &text, &status, err))
        goto done;
    /* a line a key: "<config> <reason> <nearest>" */
    for (char *line = text.data, *next; line && *line && !bad; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char config[512], reason[512], nearest[512];
        bad = got == total || strlen(line) >= sizeof config ||
              sscanf(line, "%511s %511s %511s", config, reason, nearest) != 3 ||
              !ktune_is_identifier(config, sizeof out[0].config - 1) ||
              !ktune_is_identifier(reason, sizeof out[0].reason - 1) ||
              (strcmp(nearest, "-") != 0 &&
               !ktune_is_identifier(nearest, sizeof out[0].nearest - 1));
        if (bad)
            break;
        if (got >= n) { /* a key of the table: its own config, exactly */
            const ktune_entry *e = &reg.entries[got - n];
            if ((strcmp(reason, "exact") != 0 || strcmp(config, e->config) != 0) &&
                ndiffer++ == 0) {
                char key[512];
                ktune_space_key_format(s, e->key, key, sizeof key);
                snprintf(differs, sizeof differs,
                         "%.400s: the library's %.300s (%s), the table's %.300s", key, config,
                         reason, e->config);
            }
            got++;
            continue;
        }
        /* each checked to fit above */
        snprintf(out[got].config, sizeof out[got].config, "%.*s",
                 (int)sizeof out[got].config - 1, config);
        snprintf(out[got].reason, sizeof out[got].reason, "%.*s",
                 (int)sizeof out[got].reason - 1, reason);
        snprintf(out[got].nearest, sizeof out[got].nearest, "%.*s",
                 (int)sizeof out[got].nearest - 1, strcmp(nearest, "-") == 0 ? "" : nearest);
        got++;
    }
    if (status != 0 || bad || got != total) {
        ktune_fail(err, "bench: %s %s --keys failed (status %d, %d of %d choices%s)", program,
                   s->family, status, got, total, bad ? ", a line that is not one" : "");
        goto done;
    }
    if (ndiffer) {
        ktune_fail(err, "bench: the library does not hold the table of %s: it answers %d of its "
                        "%d keys otherwise (%s); rebuild the library since the last ktune apply "
                        "(cmake --build), or name with --registry-dir the folder it was built from",
                   table, ndiffer, reg.nentries, differs);
        goto done;
    }
    rc = 0;
done:
    ktune_buf_free(&text);
    ktune_registry_free(&reg);
    if (fd >= 0)
        unlink(path);
    return rc;
}

/* The host cost of the library's selection on this GPU (ktune-explain --selection-cost, beside
 * this program, linked with the library), after the bench's table. */
static void selection_cost_print(const ktune_space *s)
{
    char program[4096];
    ktune_buf text = {0};
    ktune_err err;
    int status = -1;
    char *const args[] = {program, (char *)s->family, "--selection-cost", NULL};
    fflush(stdout);
    const int ran = explain_program(program, sizeof program, &err) == 0 &&
                    ktune_run_capture(args, &text, &status, &err) == 0;
    if (ran && status == 0) {
        for (char *line = text.data, *next; line && *line; line = next) {
            next = strchr(line, '\n');
            if (next)
                *next++ = '\0';
            printf("ktune: %s\n", line);
        }
    } else {
        printf("ktune: the host cost of a selection was not measured (%s)\n",
               ran ? "ktune-explain --selection-cost failed" : err.msg);
    }
    ktune_buf_free(&text);
}

static int cmd_expand(const options *o, const ktune_space *s)
{
    if (o->untuned_form) {
        for (int i = 0; i < s->nshapes; i++) {
            char key[256];
            ktune_space_key_format(s, s->shapes[i].key, key, sizeof key);
            printf("%s %s\n", s->family, key);
        }
        return 0;
    }
    printf("%s: %d variants, %d configs, %d defaults, %d shapes\n", s->family, s->nvariants,
           s->nconfigs, s->ndefaults, s->nshapes);
    if (!o->list)
        return 0;
    for (int i = 0; i < s->nconfigs; i++)
        printf("config %s\n", s->configs[i].name);
    for (int i = 0; i < s->nshapes; i++) {
        char key[256];
        ktune_space_key_format(s, s->shapes[i].key, key, sizeof key);
        printf("shape %s\n", key);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage_print(stdout);
        return KTUNE_EXIT_OK;
    }
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc;
    int known = 0;
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++)
        known |= strcmp(commands[c].name, o.command) == 0;
    if (!known)
        return usage_error("unknown command '%s'", o.command);
    if (o.npositionals > (strcmp(o.command, "explain") == 0 ? 2 : 1) &&
        strcmp(o.command, "merge") != 0)
        return usage_error("unexpected argument '%s'", o.positionals[1]);
    ktune_space s;
    if (strcmp(o.command, "apply") == 0 || strcmp(o.command, "merge") == 0) {
        /* ktune apply RUN, ktune merge OUT RUN...: the family comes from the run's metadata */
        int merge = strcmp(o.command, "merge") == 0;
        if (o.npositionals < (merge ? 2 : 1))
            return usage_error(merge ? "merge needs OUT and at least one run folder%s"
                                     : "apply needs a run folder%s",
                               "");
        const char *run = o.positionals[merge ? 1 : 0];
        options o2 = o;
        char meta[4096];
        ktune_run_info info;
        ktune_err err;
        snprintf(meta, sizeof meta, "%s/meta.yaml", run);
        if (!o.space) {
            if (ktune_run_info_load(meta, &info, &err)) {
                fprintf(stderr, "%s\n", err.msg);
                return KTUNE_EXIT_FAILED;
            }
            o2.family = info.family;
        }
        if ((rc = load_space(&o2, &s)))
            return rc;
        if (merge) {
            rc =
                ktune_merge_runs(&s, o.positionals[0], o.positionals + 1, o.npositionals - 1, &err);
            if (rc)
                fprintf(stderr, "%s\n", err.msg);
            else
                fprintf(stderr, "ktune: merged %d runs into %s\n", o.npositionals - 1,
                        o.positionals[0]);
            rc = rc ? KTUNE_EXIT_FAILED : KTUNE_EXIT_OK;
        } else {
            rc = do_apply(&o2, &s, run);
        }
        ktune_space_free(&s);
        return rc;
    }
    if ((rc = load_space(&o, &s)))
        return rc;
    if (strcmp(o.command, "sweep") == 0)
        rc = cmd_sweep(&o, &s);
    else if (strcmp(o.command, "emit") == 0)
        rc = cmd_emit(&o, &s);
    else if (strcmp(o.command, "show") == 0)
        rc = cmd_show(&o, &s);
    else if (strcmp(o.command, "expand") == 0)
        rc = cmd_expand(&o, &s);
    else if (strcmp(o.command, "explain") == 0)
        rc = cmd_explain(&o, &s);
    else if (strcmp(o.command, "gen") == 0)
        rc = cmd_gen(&o, &s);
    else if (strcmp(o.command, "verify") == 0) {
        char worker[4096];
        default_worker(&o, &s, worker, sizeof worker);
        ktune_worker_opts w = worker_opts(&o, worker);
        ktune_err err;
        char build_dir[4096];
        program_beside("ktune-against", build_dir, sizeof build_dir);
        const ktune_verify_opts vo = {.timeout_s = o.config_timeout,
                                      .threshold = o.threshold / 100,
                                      .repeats = o.repeats,
                                      .fresh = o.fresh,
                                      .seed = (unsigned)o.seed,
                                      .against = o.against,
                                      .source_dir = KTUNE_SOURCE_DIR,
                                      .build_dir = build_dir};
        rc = ktune_verify_run(&s, o.registry_dir, &w, &vo, stdout, &err);
        if (rc < 0)
            fprintf(stderr, "%s%s\n",
                    rc == KTUNE_WORKER_NO_DEVICE ? "ktune: no GPU to verify on: " : "", err.msg);
        rc = rc == KTUNE_WORKER_NO_DEVICE ? KTUNE_EXIT_NO_GPU
             : rc < 0                     ? KTUNE_EXIT_FAILED
             : rc > 0                     ? KTUNE_EXIT_CHECK
                                          : KTUNE_EXIT_OK;
    } else {
        char worker[4096], out[4096];
        default_worker(&o, &s, worker, sizeof worker);
        snprintf(out, sizeof out, "%s", o.out ? o.out : "");
        if (!o.out)
            snprintf(out, sizeof out, "%s.bench.csv", s.family);
        ktune_worker_opts w = worker_opts(&o, worker);
        ktune_err err;
        /* shapes named on the command line: the library's choice for each, tuned or not */
        const int named = o.keys || o.untuned || o.shapes || o.random_models || o.model ||
                          o.out_in_features || o.batch_sizes || o.seq_lengths || o.where;
        library_choices_ctx lc = {&s, o.registry_dir};
        const ktune_bench_keys keys = {library_choices, &lc};
        rc = ktune_bench_run(&s, o.registry_dir, &w, named ? &keys : NULL, o.config_timeout * 10,
                             out, o.plot, stdout, &err);
        if (rc == 0)
            selection_cost_print(&s);
        if (rc)
            fprintf(stderr, "%s%s\n",
                    rc == KTUNE_WORKER_NO_DEVICE ? "ktune: no GPU to bench on: " : "", err.msg);
        rc = rc == KTUNE_WORKER_NO_DEVICE ? KTUNE_EXIT_NO_GPU
             : rc                         ? KTUNE_EXIT_FAILED
                                          : KTUNE_EXIT_OK;
    }
    ktune_space_free(&s);
    return rc;
}
