/* libFuzzer target: arbitrary bytes as a run folder's meta.yaml. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("meta.yaml", NULL, data, size);
    ktune_run_info run;
    ktune_err err;
    if (ktune_run_info_load(path, &run, &err) == 0) {
        /* what loads is safe to write into a registry and a header */
        if (!ktune_is_safe_text(run.device, 255) || !ktune_is_safe_text(run.name, 255) ||
            !ktune_is_safe_text(run.driver, 63) || !ktune_is_safe_text(run.source, 63))
            abort();
    } else {
        fuzz_check_error(&err, fuzz_dir());
    }
    return 0;
}
