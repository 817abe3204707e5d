/* What the libFuzzer targets share: the input as a file, and the spaces registries are read
 * against. Each target asserts that a loader refuses bad input with an error, and never crashes,
 * leaks, reads out of bounds or overflows (AddressSanitizer and UBSan watch). */
#ifndef KTUNE_FUZZ_COMMON_H
#define KTUNE_FUZZ_COMMON_H

#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry.h"

#ifndef KTUNE_FUZZ_DATA
#error "KTUNE_FUZZ_DATA names tests/data, KTUNE_FUZZ_SOURCE the source tree"
#endif

static char fuzz_dir_path[64];

/* Removes the folder and what the targets wrote in it (files and links, no folders), at exit. */
static void fuzz_dir_remove(void)
{
    DIR *d = opendir(fuzz_dir_path);
    if (d) {
        const struct dirent *e;
        char path[sizeof fuzz_dir_path + 256];
        while ((e = readdir(d)) != NULL)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
                snprintf(path, sizeof path, "%s/%s", fuzz_dir_path, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
    rmdir(fuzz_dir_path);
}

/* A folder of this process's own under /tmp, made once and removed at exit. */
static inline const char *fuzz_dir(void)
{
    if (!fuzz_dir_path[0]) {
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "/tmp/ktune-fuzz-%ld", (long)getpid());
        if (mkdir(fuzz_dir_path, 0700) == 0)
            atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

/* Writes head (may be NULL) then the input to dir/name; returns the path (static). */
static inline const char *fuzz_write(const char *name, const char *head, const uint8_t *data,
                                     size_t size)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (head)
        fputs(head, f);
    fwrite(data, 1, size, f);
    fclose(f);
    return path;
}

/* The spaces registries are loaded against: the simulated one and the shipped families'. */
#define FUZZ_NSPACES 3
static inline ktune_space *fuzz_spaces(void)
{
    static ktune_space spaces[FUZZ_NSPACES];
    static int loaded;
    if (!loaded) {
        static const char *const paths[FUZZ_NSPACES] = {KTUNE_FUZZ_DATA "/sim.yaml",
                                                        KTUNE_FUZZ_SOURCE "/spaces/softmax.yaml",
                                                        KTUNE_FUZZ_SOURCE "/spaces/matmul.yaml"};
        for (int i = 0; i < FUZZ_NSPACES; i++) {
            ktune_err err;
            if (ktune_space_load(paths[i], &spaces[i], &err)) {
                fprintf(stderr, "%s\n", err.msg);
                abort();
            }
        }
        loaded = 1;
    }
    return spaces;
}

/* An error message must name where: "file:line:col: ..." or "file: ...". */
static inline void fuzz_check_error(const ktune_err *err, const char *path)
{
    if (strncmp(err->msg, path, strlen(path)) != 0) {
        fprintf(stderr, "error without its file: %s\n", err->msg);
        abort();
    }
}

#endif
