/* Element types: KTUNE_DTYPE_MAP as tables. */
#include <string.h>

#include "ktune_table.h"

static const struct {
    const char *name;
    int bits;
    ktune_dtype_kind kind;
} dtypes[KTUNE_DTYPE_COUNT] = {
#define KTUNE_DTYPE_ROW(NAME, name, bits, kind) {#name, bits, KTUNE_DTYPE_##kind},
    KTUNE_DTYPE_MAP(KTUNE_DTYPE_ROW)
#undef KTUNE_DTYPE_ROW
};

static int known(int64_t dtype) { return dtype >= 0 && dtype < KTUNE_DTYPE_COUNT; }

const char *ktune_dtype_name(int64_t dtype) { return known(dtype) ? dtypes[dtype].name : "?"; }

int ktune_dtype_bits(int64_t dtype) { return known(dtype) ? dtypes[dtype].bits : 0; }

ktune_dtype_kind ktune_dtype_kind_of(int64_t dtype)
{
    return known(dtype) ? dtypes[dtype].kind : KTUNE_DTYPE_FLOAT;
}

int ktune_dtype_parse(const char *name, int64_t *dtype)
{
    for (int i = 0; i < KTUNE_DTYPE_COUNT; i++)
        if (strcmp(name, dtypes[i].name) == 0) {
            *dtype = i;
            return 1;
        }
    return 0;
}

const char *ktune__dtype_names(void)
{
    static const char names[] = /* ", " before each name; the first one's skipped */
#define KTUNE_DTYPE_TEXT(NAME, name, bits, kind) ", " #name
        KTUNE_DTYPE_MAP(KTUNE_DTYPE_TEXT)
#undef KTUNE_DTYPE_TEXT
        ;
    return names + 2;
}
