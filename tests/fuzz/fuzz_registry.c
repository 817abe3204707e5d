/* libFuzzer target: arbitrary bytes as a registry of each space. What loads must format back to
 * text that loads again to the same entries (apply's write-then-read-back relies on it). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ktune_space *spaces = fuzz_spaces();
    const char *path = fuzz_write("registry.yaml", NULL, data, size);
    char copy[256];
    snprintf(copy, sizeof copy, "%s", path);
    for (int i = 0; i < FUZZ_NSPACES; i++) {
        ktune_registry reg;
        ktune_err err;
        if (ktune_registry_load(copy, &spaces[i], &reg, &err) != 0) {
            fuzz_check_error(&err, fuzz_dir());
            continue;
        }
        char again[256];
        snprintf(again, sizeof again, "%s/again.yaml", fuzz_dir());
        if (ktune_registry_write(again, &reg, &spaces[i], &err) < 0) {
            fprintf(stderr, "a loaded registry does not write back: %s\n", err.msg);
            abort();
        }
        unlink(again);
        ktune_registry_free(&reg);
    }
    return 0;
}
