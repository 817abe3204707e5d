/* The softmax space: expansion counts, shape grid, defaults, and the generated C validity check
 * (softmax_space.h) agreeing with the interpreter on every config, shape and device. */
#include <string.h>

#include "check.h"
#include "softmax_space.h"
#include "space.h"
#include "space_validity.h"

int main(int argc, char **argv)
{
    ktune_space s;
    const int loaded = space_test_load(argc, argv, "test_space_softmax spaces/softmax.yaml", &s);
    if (loaded != 0)
        return loaded;
    ktune_err err;
    int per_variant[8] = {0};
    for (int i = 0; i < s.nconfigs; i++)
        per_variant[s.configs[i].variant]++;
    /* vec: 18 (vec, iters) pairs with vec*iters <= 32, x 3 warps; block: 15 + 15 + 15 + 13
     * (threads*vec*iters <= 16384); online: 3 x 4 x 2 x 3; cluster: 27 (threads, vec, iters) triples
     * with vec*iters <= 64 and 4096 <= threads*vec*iters <= 16384, x 4 cluster sizes; smem: 5 x 3;
     * pipe: 5 x 3 x 2; split: 6 (threads, per_sm) pairs with threads * per_sm <= 1024, x 2;
     * resident: 2 x 2 x 2 */
    CHECK(s.nvariants == 8);
    CHECK(per_variant[0] == 54 && per_variant[1] == 58 && per_variant[2] == 72 &&
          per_variant[3] == 108 && per_variant[4] == 15 && per_variant[5] == 30 &&
          per_variant[6] == 12 && per_variant[7] == 8);
    CHECK(s.nconfigs == 357);
    /* cols 32..131072 (13 values) x rows {1, 32, 1024, 8192, 65536} with rows*cols <= 2^27,
     * x 3 dtypes: (13 + 13 + 13 + 10 + 7) x 3; then 6 vocabulary widths x rows {1, 32, 128, 512,
     * 1024} under the same cap (1024 rows: the 3 widths up to 128256): (6 + 6 + 6 + 6 + 3) x 3;
     * then the long rows: 4 widths x rows {1, 8} x 3 */
    CHECK(s.nshapes == 168 + 81 + 24);
    CHECK(s.ndefaults == 2 && strcmp(s.configs[s.defaults[0]].name, "vec_vec1_iters32_warps4") == 0);
    CHECK(strcmp(s.configs[s.defaults[1]].name, "online_threads256_vec1_unroll1_per_sm0") == 0);
    for (int i = 1; i < s.nconfigs; i++)
        CHECK(strcmp(s.configs[i - 1].name, s.configs[i].name) < 0);
    for (int i = 1; i < s.nshapes; i++)
        CHECK(ktune_space_key_compare(&s, s.shapes[i - 1].key, s.shapes[i].key) < 0);

    const ktune_device devices[2] = {{"H", 132, 90, 1024, 232448, 52428800, 1},
                                     {"A", 108, 80, 512, 166912, 41943040, 0}};
    long agree, per_variant_valid[2 * 8] = {0}, valid = 0;
    CHECK(space_validity_disagreements(&s, ktune__softmax_valid, devices, 2, &agree,
                                       per_variant_valid) == 0);
    for (int i = 0; i < 2 * 8; i++)
        valid += per_variant_valid[i];
    CHECK(valid > 0 && valid < agree);
    printf("%ld (config, shape, device) validity checks agree, %ld valid\n", agree, valid);

    /* the cost models: the generated ones (softmax_space.h) compute what the interpreter does,
     * on every config and shape */
    long cost_agree;
    CHECK(space_cost_disagreements(&s, ktune__softmax_cost, &devices[0], &cost_agree) == 0);
    printf("%ld (config, shape) cost models agree\n", cost_agree);
    /* 2 x 91309 f32 (1.46 MB moved): a cluster of 16 blocks a row is 32 blocks, a quarter of the
     * SMs, so its bytes count 132 / 32 times beside its fixed 4 us; resident spreads the rows
     * over the whole device and pays 6 us fixed */
    int64_t ck[KTUNE_MAX_KEY];
    CHECK(ktune_space_key_parse(&s, "dtype=f32 rows=2 cols=91309", ck, &err) == 0);
    const int cl = ktune_space_find_config(&s, "cluster_ctas16_threads256_vec4_iters8"),
              rs = ktune_space_find_config(&s, "resident_threads256_per_sm1_stages1");
    CHECK(cl >= 0 && rs >= 0);
    const int64_t moved = INT64_C(2) * 2 * 91309 * 4;
    CHECK(ktune__softmax_cost(s.configs[cl].variant, s.configs[cl].params, ck, &devices[0]) ==
          12000000 + moved * 132 / 32);
    CHECK(ktune__softmax_cost(s.configs[rs].variant, s.configs[rs].params, ck, &devices[0]) ==
          18000000 + moved);
    /* 4096 x 1024 f16 (16 MiB moved) over 1024 blocks of 4 warps: the bytes alone */
    CHECK(ktune_space_key_parse(&s, "dtype=f16 rows=4096 cols=1024", ck, &err) == 0);
    const int vc = ktune_space_find_config(&s, "vec_vec8_iters4_warps4");
    CHECK(vc >= 0 && ktune__softmax_cost(s.configs[vc].variant, s.configs[vc].params, ck,
                                         &devices[0]) == 9000000 + INT64_C(2) * 4096 * 1024 * 2);

    /* every shape has a valid default on both devices; only online on cc 80 beyond 1024 */
    for (int k = 0; k < s.nshapes; k++) {
        const int64_t limits[KTUNE_NLIMITS] = {132, 90, 1024, 232448, 52428800, 1}; /* H100 */
        CHECK(ktune_space_default_for(&s, s.shapes[k].key, limits) >= 0);
    }
    int64_t key[KTUNE_MAX_KEY];
    CHECK(ktune_space_key_parse(&s, "cols=7 dtype=bf16 rows=3", key, &err) == 0 && key[0] == 2 &&
          key[1] == 3 && key[2] == 7);
    CHECK(ktune_space_key_parse(&s, "dtype=f64 rows=3 cols=7", key, &err) != 0);
    CHECK(ktune_space_key_parse(&s, "dtype=f16 rows=3", key, &err) != 0 &&
          strstr(err.msg, "cols is missing") != NULL);
    ktune_space_free(&s);
    return check_report("test_space");
}
