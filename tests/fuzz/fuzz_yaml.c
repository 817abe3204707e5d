/* libFuzzer target: arbitrary bytes as a space file, and as a registry of a fixed space. The
 * loaders must reject bad input with an error, never crash, leak or read out of bounds. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "registry.h"

#ifndef KTUNE_FUZZ_SPACE
#error "KTUNE_FUZZ_SPACE names the space registries are loaded against"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static ktune_space fixed;
    static int loaded;
    ktune_err err;
    if (!loaded) {
        if (ktune_space_load(KTUNE_FUZZ_SPACE, &fixed, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            abort();
        }
        loaded = 1;
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/ktune-fuzz-%ld.yaml", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    ktune_space s;
    if (ktune_space_load(path, &s, &err) == 0)
        ktune_space_free(&s);
    ktune_registry reg;
    if (ktune_registry_load(path, &fixed, &reg, &err) == 0) {
        ktune_buf out = {0};
        ktune_registry_format(&reg, &fixed, &out);
        ktune_buf_free(&out);
        ktune_registry_free(&reg);
    }
    unlink(path);
    return 0;
}
