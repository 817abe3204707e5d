/* ktune-explain: which configuration the library would launch for a key, on the current device or
 * on a described one (no GPU needed). `ktune explain` runs it. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ktune/ktune.h"

static int usage(void)
{
    fprintf(stderr, "usage: ktune-explain FAMILY KEY [--device NAME --sms N --cc C "
                    "[--max-threads N] [--smem-per-block B] [--l2-bytes B]]\n"
                    "  KEY: every dimension of the family's key as name=value, e.g. "
                    "'dtype=f16 rows=4 cols=1000'\n");
    return 2;
}

static int number(const char *text, long long max, long long *out)
{
    char *end;
    if (!text || text[0] < '0' || text[0] > '9' || strlen(text) > 18)
        return 0;
    *out = strtoll(text, &end, 10);
    return !*end && *out <= max;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    ktune_device_spec spec = {0};
    int described = 0;
    for (int i = 3; i < argc; i += 2) {
        long long v = 0;
        const char *name = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!value)
            return usage();
        described = 1;
        if (strcmp(name, "--device") == 0)
            spec.name = value;
        else if (strcmp(name, "--sms") == 0 && number(value, 100000, &v))
            spec.sms = (int)v;
        else if (strcmp(name, "--cc") == 0 && number(value, 1000, &v))
            spec.cc = (int)v;
        else if (strcmp(name, "--max-threads") == 0 && number(value, 1 << 20, &v))
            spec.max_threads = (int)v;
        else if (strcmp(name, "--smem-per-block") == 0 && number(value, 1LL << 40, &v))
            spec.smem_per_block = v;
        else if (strcmp(name, "--l2-bytes") == 0 && number(value, 1LL << 40, &v))
            spec.l2_bytes = v;
        else {
            fprintf(stderr, "ktune-explain: %s: '%s' is not a value it takes\n", name, value);
            return usage();
        }
    }
    ktune_choice c;
    ktune_status st = ktune_explain(argv[1], argv[2], described ? &spec : NULL, &c);
    if (st != KTUNE_OK) {
        fprintf(stderr, "ktune-explain: %s '%s'%s: %s%s\n", argv[1], argv[2],
                described ? " on the described device" : "", ktune_status_string(st),
                st == KTUNE_ERROR_CUDA ? " (no usable GPU here: describe one with --device, --sms "
                                         "and --cc)"
                                       : "");
        return st == KTUNE_ERROR_CUDA ? 4 : 1;
    }
    printf("%s %s: %s (%s", argv[1], argv[2], c.config, ktune_reason_string(c.reason));
    if (c.table[0])
        printf("; table of %s, tuned %.3f us", c.table, c.tuned_us);
    printf(")\n  %s\n", c.why);
    return 0;
}
