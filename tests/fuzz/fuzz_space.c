/* libFuzzer target: arbitrary bytes as a space file (with model presets beside it). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char models[300];
    snprintf(models, sizeof models, "%s/models", fuzz_dir());
    if (access(models, F_OK) != 0 && symlink(KTUNE_FUZZ_DATA "/models", models) != 0)
        abort();
    const char *path = fuzz_write("space.yaml", NULL, data, size);
    ktune_space s;
    ktune_err err;
    if (ktune_space_load(path, &s, &err) == 0)
        ktune_space_free(&s);
    else
        fuzz_check_error(&err, fuzz_dir());
    return 0;
}
