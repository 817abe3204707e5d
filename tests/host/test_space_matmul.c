/* The matmul space: its variants, and the generated C validity check (matmul_space.h) agreeing
 * with the interpreter on every config, shape and device, the device limit sm90a included: the
 * wgmma variant is valid only on a device that runs the build's sm_90a code. */
#include <string.h>

#include "check.h"
#include "matmul_space.h"
#include "space.h"
#include "space_validity.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_space_matmul spaces/matmul.yaml\n");
        return 2;
    }
    ktune_space s;
    ktune_err err;
    if (ktune_space_load(argv[1], &s, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    CHECK(s.nvariants == 3 && strcmp(s.variants[KTUNE_MATMUL_VARIANT_WGMMA].name, "wgmma") == 0);
    int wgmma = 0;
    for (int i = 0; i < s.nconfigs; i++)
        wgmma += s.configs[i].variant == KTUNE_MATMUL_VARIANT_WGMMA;
    /* (bm, bn, consumers): 5 with one consumer and 5 with two, x 4 stage counts */
    CHECK(wgmma == 40);

    /* an H100 built with sm_90a code; the same device in a build without it; an A100 */
    const ktune_device devices[3] = {{"H", 132, 90, 1024, 232448, 52428800, 1},
                                     {"H", 132, 90, 1024, 232448, 52428800, 0},
                                     {"A", 108, 80, 1024, 166912, 41943040, 0}};
    long agree, valid[3 * 3] = {0}, valid_wgmma[3], valid_mma[3];
    CHECK(space_validity_disagreements(&s, ktune_matmul_valid, devices, 3, &agree, valid) == 0);
    for (int dv = 0; dv < 3; dv++) {
        valid_wgmma[dv] = valid[dv * 3 + KTUNE_MATMUL_VARIANT_WGMMA];
        valid_mma[dv] = valid[dv * 3 + KTUNE_MATMUL_VARIANT_MMA];
    }
    CHECK(valid_wgmma[0] > 0 && valid_wgmma[1] == 0 && valid_wgmma[2] == 0);
    CHECK(valid_mma[0] > 0 && valid_mma[1] == valid_mma[0] && valid_mma[2] > 0);
    printf("%ld (config, shape, device) validity checks agree; wgmma valid %ld times with sm_90a "
           "code, %ld without, %ld on cc 80\n",
           agree, valid_wgmma[0], valid_wgmma[1], valid_wgmma[2]);

    /* k not a multiple of 8: rows TMA cannot address */
    int64_t key[KTUNE_MAX_KEY];
    CHECK(ktune_space_key_parse(&s, "dtype=bf16 m=1024 n=4096 k=4100", key, &err) == 0);
    for (int c = 0; c < s.nconfigs; c++)
        if (s.configs[c].variant == KTUNE_MATMUL_VARIANT_WGMMA)
            CHECK(!ktune_matmul_valid(s.configs[c].variant, s.configs[c].params, key, &devices[0]));
    ktune_space_free(&s);
    return check_report("test_space_matmul");
}
