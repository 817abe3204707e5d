/* The matmul space: its variants, the generated C validity check (matmul_space.h) agreeing with
 * the interpreter on every config, shape and device, the device limit sm90a included, and so the
 * cost models on every config and shape, and the twins of tailsplit's configs. The
 * wgmma, wgemv, splitk, tailsplit and transposed variants are valid only on a device that runs
 * the build's sm_90a code; splitk only where its tiles are few, tailsplit where they are a wave
 * and a part, transposed for m of 33 to 1024; dot (CUDA cores) on any device, for m up to 4. */
#include <string.h>

#include "check.h"
#include "matmul_space.h"
#include "space.h"
#include "space_validity.h"

int main(int argc, char **argv)
{
    ktune_space s;
    const int loaded = space_test_load(argc, argv, "test_space_matmul spaces/matmul.yaml", &s);
    if (loaded != 0)
        return loaded;
    ktune_err err;
    CHECK(s.nvariants == 8 && strcmp(s.variants[KTUNE_MATMUL_VARIANT_WGMMA].name, "wgmma") == 0 &&
          strcmp(s.variants[KTUNE_MATMUL_VARIANT_WGEMV].name, "wgemv") == 0 &&
          strcmp(s.variants[KTUNE_MATMUL_VARIANT_SPLITK].name, "splitk") == 0 &&
          strcmp(s.variants[KTUNE_MATMUL_VARIANT_TAILSPLIT].name, "tailsplit") == 0 &&
          strcmp(s.variants[KTUNE_MATMUL_VARIANT_TRANSPOSED].name, "transposed") == 0 &&
          strcmp(s.variants[KTUNE_MATMUL_VARIANT_DOT].name, "dot") == 0);
    int wgmma = 0, wgemv = 0, splitk = 0, tailsplit = 0, transposed = 0, dot = 0;
    for (int i = 0; i < s.nconfigs; i++) {
        wgmma += s.configs[i].variant == KTUNE_MATMUL_VARIANT_WGMMA;
        wgemv += s.configs[i].variant == KTUNE_MATMUL_VARIANT_WGEMV;
        splitk += s.configs[i].variant == KTUNE_MATMUL_VARIANT_SPLITK;
        tailsplit += s.configs[i].variant == KTUNE_MATMUL_VARIANT_TAILSPLIT;
        transposed += s.configs[i].variant == KTUNE_MATMUL_VARIANT_TRANSPOSED;
        dot += s.configs[i].variant == KTUNE_MATMUL_VARIANT_DOT;
    }
    /* (bm, bn, consumers): 6 with one consumer and 6 with two, x 4 stage counts */
    CHECK(wgmma == 48);
    /* 2 bm x 8 bn x 2 stage counts x 4 splits, less bm 128 with bn 192 or 256 (more than 128
     * accumulators a thread) */
    CHECK(wgemv == 112);
    /* (bm, consumers) 64/1, 128/1, 128/2, 256/2 x bn 64, 128 x 2 stage counts x splits 2, 4 */
    CHECK(splitk == 32);
    /* (bm, consumers) 64/1, 128/2 x bn 128, 256 x stages 4, 6 x tails 2, 4, less 6 stages of bn
     * 256 (a ring beyond sm_90a's shared memory) */
    CHECK(tailsplit == 12);
    /* 2 consumer counts x 2 rings */
    CHECK(transposed == 4);
    /* 2 warps x 4 rows a warp x 2 unrolls x 3 mrows */
    CHECK(dot == 48);

    /* an H100 built with sm_90a code; the same device in a build without it; an A100 */
    const ktune_device devices[3] = {{"H", 132, 90, 1024, 232448, 52428800, 1},
                                     {"H", 132, 90, 1024, 232448, 52428800, 0},
                                     {"A", 108, 80, 1024, 166912, 41943040, 0}};
    long agree, valid[3 * KTUNE_MATMUL_VARIANT_COUNT] = {0};
    long valid_wgmma[3], valid_wgemv[3], valid_mma[3], valid_splitk[3], valid_tailsplit[3],
        valid_transposed[3], valid_dot[3];
    CHECK(space_validity_disagreements(&s, ktune__matmul_valid, devices, 3, &agree, valid) == 0);
    for (int dv = 0; dv < 3; dv++) {
        const long *v = &valid[dv * KTUNE_MATMUL_VARIANT_COUNT]; /* the device's counts */
        valid_wgmma[dv] = v[KTUNE_MATMUL_VARIANT_WGMMA];
        valid_wgemv[dv] = v[KTUNE_MATMUL_VARIANT_WGEMV];
        valid_mma[dv] = v[KTUNE_MATMUL_VARIANT_MMA];
        valid_splitk[dv] = v[KTUNE_MATMUL_VARIANT_SPLITK];
        valid_tailsplit[dv] = v[KTUNE_MATMUL_VARIANT_TAILSPLIT];
        valid_transposed[dv] = v[KTUNE_MATMUL_VARIANT_TRANSPOSED];
        valid_dot[dv] = v[KTUNE_MATMUL_VARIANT_DOT];
    }
    CHECK(valid_wgmma[0] > 0 && valid_wgmma[1] == 0 && valid_wgmma[2] == 0);
    CHECK(valid_wgemv[0] > 0 && valid_wgemv[1] == 0 && valid_wgemv[2] == 0);
    CHECK(valid_splitk[0] > 0 && valid_splitk[1] == 0 && valid_splitk[2] == 0);
    CHECK(valid_tailsplit[0] > 0 && valid_tailsplit[1] == 0 && valid_tailsplit[2] == 0);
    CHECK(valid_transposed[0] > 0 && valid_transposed[1] == 0 && valid_transposed[2] == 0);
    CHECK(valid_mma[0] > 0 && valid_mma[1] == valid_mma[0] && valid_mma[2] > 0);
    CHECK(valid_dot[0] > 0 && valid_dot[1] == valid_dot[0] && valid_dot[2] == valid_dot[0]);
    printf("%ld (config, shape, device) validity checks agree; wgmma valid %ld times with sm_90a "
           "code, %ld without, %ld on cc 80; wgemv %ld, %ld, %ld\n",
           agree, valid_wgmma[0], valid_wgmma[1], valid_wgmma[2], valid_wgemv[0], valid_wgemv[1],
           valid_wgemv[2]);

    /* k not a multiple of 8: rows TMA cannot address; m = 16 so that wgemv would hold it */
    int64_t key[KTUNE_MAX_KEY];
    CHECK(ktune_space_key_parse(&s, "dtype=bf16 m=16 n=4096 k=4100", key, &err) == 0);
    int tma_valid = 0, gemv_valid = 0;
    for (int c = 0; c < s.nconfigs; c++) {
        const int v = s.configs[c].variant,
                  ok = ktune__matmul_valid(v, s.configs[c].params, key, &devices[0]);
        if (v == KTUNE_MATMUL_VARIANT_WGMMA || v == KTUNE_MATMUL_VARIANT_WGEMV)
            tma_valid += ok;
        gemv_valid += v == KTUNE_MATMUL_VARIANT_GEMV && ok;
    }
    CHECK(tma_valid == 0 && gemv_valid > 0);

    /* dot: the fewest rows that hold m (m = 3: mrows 4, 16 configs), none beyond 4; any k */
    const int p_mrows = param_index(&s.variants[KTUNE_MATMUL_VARIANT_DOT], "mrows");
    CHECK(p_mrows >= 0);
    const char *const dot_keys[3] = {"dtype=f16 m=3 n=4096 k=4100", "dtype=f16 m=1 n=100 k=7",
                                     "dtype=f16 m=5 n=4096 k=4096"};
    int dot_valid[3] = {0}, dot_rows4 = 0;
    for (int q = 0; q < 3; q++) {
        CHECK(ktune_space_key_parse(&s, dot_keys[q], key, &err) == 0);
        for (int c = 0; c < s.nconfigs; c++)
            if (s.configs[c].variant == KTUNE_MATMUL_VARIANT_DOT &&
                ktune__matmul_valid(KTUNE_MATMUL_VARIANT_DOT, s.configs[c].params, key,
                                    &devices[2])) {
                dot_valid[q]++;
                dot_rows4 += q == 0 && s.configs[c].params[p_mrows] == 4;
            }
    }
    CHECK(dot_valid[0] == 16 && dot_rows4 == 16 && dot_valid[1] == 16 && dot_valid[2] == 0);

    /* an odd m beyond 32: wgemv only in row tiles of 64 rows or more, among them 96-row ones (3
     * tiles, 288 rows, where 128-row tiles pad to 384) */
    CHECK(ktune_space_key_parse(&s, "dtype=bf16 m=271 n=16384 k=16384", key, &err) == 0);
    const int p_bn = param_index(&s.variants[KTUNE_MATMUL_VARIANT_WGEMV], "bn");
    CHECK(p_bn >= 0);
    int narrow = 0, rows96 = 0;
    for (int c = 0; c < s.nconfigs; c++) {
        if (s.configs[c].variant != KTUNE_MATMUL_VARIANT_WGEMV ||
            !ktune__matmul_valid(KTUNE_MATMUL_VARIANT_WGEMV, s.configs[c].params, key, &devices[0]))
            continue;
        narrow += s.configs[c].params[p_bn] < 64;
        rows96 += s.configs[c].params[p_bn] == 96;
    }
    CHECK(narrow == 0 && rows96 > 0);

    /* split k: 1024 x 576 x 7168 has 40 tiles of 128 x 128, so splits of 2 and 4 hold it; 4096 x
     * 4096 x 4096 has 1024 such tiles, more than twice the SMs: no split */
    const int p_split = param_index(&s.variants[KTUNE_MATMUL_VARIANT_SPLITK], "split");
    CHECK(p_split >= 0);
    const char *const split_keys[2] = {"dtype=bf16 m=1024 n=576 k=7168",
                                       "dtype=bf16 m=4096 n=4096 k=4096"};
    int split_valid[2][5] = {{0}};
    for (int q = 0; q < 2; q++) {
        CHECK(ktune_space_key_parse(&s, split_keys[q], key, &err) == 0);
        for (int c = 0; c < s.nconfigs; c++)
            if (s.configs[c].variant == KTUNE_MATMUL_VARIANT_SPLITK &&
                ktune__matmul_valid(KTUNE_MATMUL_VARIANT_SPLITK, s.configs[c].params, key,
                                    &devices[0]))
                split_valid[q][s.configs[c].params[p_split]]++;
    }
    CHECK(split_valid[0][2] > 0 && split_valid[0][4] > 0);
    CHECK(split_valid[1][2] == 0 && split_valid[1][4] == 0);

    /* the tiles past whole waves of the H100's 132 SMs, split: 4096 x 576 has 160 tiles of 128 x
     * 128, 28 past a wave, whose clusters of 2 or 4 fit one; 271 x 16384 has 192 of 128 x 256, 60
     * past it (2 fit, 4 do not) and 384 of 128 x 128, 120 past two waves (none fit); 128 x 4096
     * has 64 of 64 x 128, not even a wave */
    const int p_tail = param_index(&s.variants[KTUNE_MATMUL_VARIANT_TAILSPLIT], "tail"),
              p_tbm = param_index(&s.variants[KTUNE_MATMUL_VARIANT_TAILSPLIT], "bm"),
              p_tbn = param_index(&s.variants[KTUNE_MATMUL_VARIANT_TAILSPLIT], "bn");
    CHECK(p_tail >= 0 && p_tbm >= 0 && p_tbn >= 0);
    const char *const tail_keys[3] = {"dtype=bf16 m=4096 n=576 k=7168",
                                      "dtype=bf16 m=271 n=16384 k=16384",
                                      "dtype=f16 m=128 n=4096 k=4096"};
    int tail_valid[3][2][2][5] = {{{{0}}}}; /* key, bm 64/128, bn 128/256, tail */
    for (int q = 0; q < 3; q++) {
        CHECK(ktune_space_key_parse(&s, tail_keys[q], key, &err) == 0);
        for (int c = 0; c < s.nconfigs; c++) {
            const int64_t *p = s.configs[c].params;
            if (s.configs[c].variant == KTUNE_MATMUL_VARIANT_TAILSPLIT &&
                ktune__matmul_valid(KTUNE_MATMUL_VARIANT_TAILSPLIT, p, key, &devices[0]))
                tail_valid[q][p[p_tbm] == 128][p[p_tbn] == 256][p[p_tail]]++;
        }
    }
    CHECK(tail_valid[0][1][0][2] > 0 && tail_valid[0][1][0][4] > 0);
    CHECK(tail_valid[1][1][1][2] > 0 && tail_valid[1][1][1][4] == 0);
    CHECK(tail_valid[1][1][0][2] == 0 && tail_valid[1][1][0][4] == 0);
    int none = 0;
    for (int bm = 0; bm < 2; bm++)
        for (int bn = 0; bn < 2; bn++)
            none += tail_valid[2][bm][bn][2] + tail_valid[2][bm][bn][4];
    CHECK(none == 0);
    /* the cost models: the generated ones (matmul_space.h) compute what the interpreter does,
     * on every config and shape */
    long cost_agree;
    CHECK(space_cost_disagreements(&s, ktune__matmul_cost, &devices[0], &cost_agree) == 0);
    printf("%ld (config, shape) cost models agree\n", cost_agree);
    /* 271 x 16384 x 16384: tiles of 128 x 256 make 3 x 64 = 192 tiles, two waves on 132 SMs; the
     * weight's 512 MiB are fewer units than those multiply-adds */
    CHECK(ktune_space_key_parse(&s, "dtype=bf16 m=271 n=16384 k=16384", key, &err) == 0);
    const int wg = ktune_space_find_config(&s, "wgmma_bm128_bn256_consumers2_stages4"),
              ts = ktune_space_find_config(&s, "tailsplit_bm128_bn256_consumers2_stages4_tail2");
    CHECK(wg >= 0 && ts >= 0);
    CHECK(ktune__matmul_cost(KTUNE_MATMUL_VARIANT_WGMMA, s.configs[wg].params, key,
                             &devices[0]) == INT64_C(2) * 128 * 256 * 16384);
    /* tailsplit: one whole wave, then the 60 tiles left split over k in two */
    CHECK(ktune__matmul_cost(KTUNE_MATMUL_VARIANT_TAILSPLIT, s.configs[ts].params, key,
                             &devices[0]) == INT64_C(128) * 256 * 16384 * 3 / 2);
    /* transposed: 128 rows of w by 144 of a make 128 x 2 = 256 tiles, two waves of a tile 0.56x
     * the size, which pads m to 288 rows, not 384 (96 rows tie: three waves of 384 tiles) */
    const int tr = ktune_space_find_config(&s, "transposed_consumers2_ring192");
    CHECK(tr >= 0 && ktune__matmul_cost(KTUNE_MATMUL_VARIANT_TRANSPOSED, s.configs[tr].params, key,
                                        &devices[0]) == INT64_C(2) * 128 * 144 * 16384);
    /* a GEMV is bound by the bytes: 1 x 4096 x 4096 in bf16 */
    CHECK(ktune_space_key_parse(&s, "dtype=bf16 m=1 n=4096 k=4096", key, &err) == 0);
    const int gv = ktune_space_find_config(&s, "gemv_rows16_warps8_unroll4_split1_mtiles1");
    CHECK(gv >= 0 && ktune__matmul_cost(KTUNE_MATMUL_VARIANT_GEMV, s.configs[gv].params, key,
                                        &devices[0]) == 2 * (4096 * 4096 + 4096 + 4096));
    /* twins: each tailsplit config's is the wgmma config of its tile, no other variant has one */
    int twins = 0;
    for (int c = 0; c < s.nconfigs; c++) {
        const ktune_space_config *cfg = &s.configs[c];
        if (cfg->variant != KTUNE_MATMUL_VARIANT_TAILSPLIT) {
            CHECK(cfg->twin == -1);
            continue;
        }
        char expect[KTUNE_CONFIG_NAME_MAX];
        snprintf(expect, sizeof expect, "wgmma%s", cfg->name + strlen("tailsplit"));
        *strstr(expect, "_tail") = '\0';
        CHECK(cfg->twin >= 0 && strcmp(s.configs[cfg->twin].name, expect) == 0);
        twins++;
    }
    CHECK(twins == tailsplit && s.configs[ts].twin == wg);
    ktune_space_free(&s);
    return check_report("test_space_matmul");
}
