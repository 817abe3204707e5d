/* Element type names. */
#include <string.h>

#include "ktune_table.h"

static const char *const dtype_names[] = {"f32", "f16", "bf16"};

const char *ktune_dtype_name(int64_t dtype)
{
    return dtype >= 0 && dtype < 3 ? dtype_names[dtype] : "?";
}

int ktune_dtype_parse(const char *name, int64_t *dtype)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(name, dtype_names[i]) == 0) {
            *dtype = i;
            return 1;
        }
    return 0;
}
