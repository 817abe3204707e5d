/* Keys named on the command line, in place of a space's shapes: --key 'name=value,...' (several
 * keys separated by ';'), --untuned FILE, the lines the library appends to KTUNE_UNTUNED_FILE
 * ("<family> name=value name=value ..."; lines of other families, blank lines and lines that start
 * with '#' are skipped), and --shapes FILE, any list of keys, a line each ("name=value ...",
 * spaces or commas between, the family's name first or not; blank and '#' lines skipped). Every
 * dimension of the space's key is given once, by name, in any order; dtypes by name, sizes from
 * 1 to 2^40. Errors name the flag and the key, or file:line:col. */
#ifndef KTUNE_GEN_KEYS_H
#define KTUNE_GEN_KEYS_H

#include <stdint.h>

#include "space.h"
#include "util.h"

/* What receives each key, in order (duplicates included). */
typedef int (*ktune_key_sink)(void *ctx, const int64_t *key, ktune_err *err);

int ktune_keys_parse(const ktune_space *s, const char *text, ktune_key_sink sink, void *ctx,
                     ktune_err *err);
int ktune_keys_read_untuned(const ktune_space *s, const char *path, ktune_key_sink sink, void *ctx,
                            ktune_err *err);
int ktune_keys_read_shapes(const ktune_space *s, const char *path, ktune_key_sink sink, void *ctx,
                           ktune_err *err);

#endif
