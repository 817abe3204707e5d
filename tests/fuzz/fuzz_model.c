/* libFuzzer target: arbitrary bytes as a model preset (spaces/models/<name>.yaml). */
#include "models.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write("fz.yaml", NULL, data, size);
    ktune_model m;
    ktune_err err;
    if (ktune_model_load(fuzz_dir(), "fz", &m, &err) == 0) {
        for (int l = 0; l < m.nlayers; l++)
            for (int64_t tp = 1; tp <= 8; tp *= 2) {
                int64_t out, in;
                if (ktune_model_local(&m, l, tp, &out, &in, &err) == 0 &&
                    (out < 1 || in < 1 || out > m.layers[l].out || in > m.layers[l].in))
                    abort();
            }
    } else {
        fuzz_check_error(&err, fuzz_dir());
    }
    return 0;
}
