/* The wqmatmul space: its variants, the generated C validity check (wqmatmul_space.h) agreeing
 * with the interpreter on every config, shape and device, and the wgmma variant's rules: sm_90a
 * code only, m > 16 only, 3-bit weights only in slabs of 128 k (its second plane's TMA box),
 * clusters only where a neighbouring tile of w exists, and every ring it takes within the
 * device's shared memory as the kernel lays it out (wgmma_shape in wqmatmul_wgmma.cuh); the ring
 * variant's: m <= 8 * mtiles only, and its shared memory within the H100's for every config and
 * bit width (wqmatmul_ring.cuh). */
#include <string.h>

#include "check.h"
#include "space.h"
#include "space_validity.h"
#include "wqmatmul_space.h"

/* The bytes of shared memory the wgmma kernel asks for: STAGES stages of a's slab (bm rows of slab
 * k, 16-bit), the packed units of 64 * consumers rows of w (bits a value: both planes of 3 bits)
 * and a uint2 of scale and zero point a unit and row, then two barriers a stage and 1024 bytes to
 * align the ring. */
static int64_t wgmma_smem(int64_t bm, int64_t consumers, int64_t stages, int64_t slab, int64_t bits)
{
    const int64_t bn = 64 * consumers, units = slab / 32;
    const int64_t stage = bm * slab * 2 + bn * units * 4 * bits + bn * units * 8;
    return stages * stage + stages * 16 + 1024;
}

/* The bytes of shared memory a ring block takes: each warp's ring of min(stages, what fits in 160
 * KB a block, at least one) slabs of 16 * rtiles rows of 4 units (b words a unit), and the warps'
 * fp32 sums (512 bytes a warp and 16 x 8 tile). */
static int64_t ring_smem(int64_t warps, int64_t stages, int64_t mtiles, int64_t rtiles,
                         int64_t bits)
{
    const int64_t slab = 16 * rtiles * 16 * bits, fit = 160 * 1024 / (warps * slab);
    const int64_t depth = fit < 1 ? 1 : fit < stages ? fit : stages;
    return warps * depth * slab + warps * rtiles * mtiles * 512;
}

int main(int argc, char **argv)
{
    ktune_space s;
    const int loaded = space_test_load(argc, argv, "test_space_wqmatmul spaces/wqmatmul.yaml", &s);
    if (loaded != 0)
        return loaded;
    ktune_err err;
    CHECK(s.nvariants == 6 && strcmp(s.variants[KTUNE_WQMATMUL_VARIANT_WGMMA].name, "wgmma") == 0 &&
          strcmp(s.variants[KTUNE_WQMATMUL_VARIANT_LARGE].name, "large") == 0 &&
          strcmp(s.variants[KTUNE_WQMATMUL_VARIANT_RING].name, "ring") == 0);
    const ktune_space_variant *wv = &s.variants[KTUNE_WQMATMUL_VARIANT_WGMMA];
    const int p_bm = param_index(wv, "bm"), p_consumers = param_index(wv, "consumers"),
              p_stages = param_index(wv, "stages"), p_slab = param_index(wv, "slab"),
              p_mc = param_index(wv, "mc");
    CHECK(p_bm >= 0 && p_consumers >= 0 && p_stages >= 0 && p_slab >= 0 && p_mc >= 0);
    int wgmma = 0;
    for (int i = 0; i < s.nconfigs; i++)
        wgmma += s.configs[i].variant == KTUNE_WQMATMUL_VARIANT_WGMMA;
    /* 3 bm x 2 consumers x 2 mc x (slab 128 at 3, 4, 6, 8 stages + slab 64 at 4, 6, 8) */
    CHECK(wgmma == 84);

    /* an H100 built with sm_90a code; the same device in a build without it; an A100 */
    const ktune_device devices[3] = {{"H", 132, 90, 1024, 232448, 52428800, 1},
                                     {"H", 132, 90, 1024, 232448, 52428800, 0},
                                     {"A", 108, 80, 1024, 166912, 41943040, 0}};
    long agree, valid[3 * KTUNE_WQMATMUL_VARIANT_COUNT] = {0};
    CHECK(space_validity_disagreements(&s, ktune__wqmatmul_valid, devices, 3, &agree, valid) == 0);
    const long wgmma_h100 = valid[KTUNE_WQMATMUL_VARIANT_WGMMA],
               large_h100 = valid[KTUNE_WQMATMUL_VARIANT_LARGE];
    CHECK(wgmma_h100 > 0 && large_h100 > 0);
    CHECK(valid[KTUNE_WQMATMUL_VARIANT_COUNT + KTUNE_WQMATMUL_VARIANT_WGMMA] == 0);
    CHECK(valid[2 * KTUNE_WQMATMUL_VARIANT_COUNT + KTUNE_WQMATMUL_VARIANT_WGMMA] == 0);
    CHECK(valid[2 * KTUNE_WQMATMUL_VARIANT_COUNT + KTUNE_WQMATMUL_VARIANT_LARGE] > 0);

    /* the wgmma rules on every shape of the space, on the H100 */
    long checked = 0, smem_bad = 0, rule_bad = 0;
    for (int c = 0; c < s.nconfigs; c++) {
        const ktune_space_config *cfg = &s.configs[c];
        if (cfg->variant != KTUNE_WQMATMUL_VARIANT_WGMMA)
            continue;
        const int64_t bm = cfg->params[p_bm], consumers = cfg->params[p_consumers],
                      stages = cfg->params[p_stages], slab = cfg->params[p_slab],
                      mc = cfg->params[p_mc];
        for (int k = 0; k < s.nshapes; k++) {
            const int64_t *key = s.shapes[k].key; /* dtype, bits, group, m, n, k */
            if (!ktune__wqmatmul_valid(cfg->variant, cfg->params, key, &devices[0]))
                continue;
            checked++;
            const int64_t bits = key[1], m = key[3], n = key[4];
            smem_bad += wgmma_smem(bm, consumers, stages, slab, bits) > devices[0].smem_per_block;
            rule_bad += m <= 16 || (bits == 3 && slab != 128) || (mc > 1 && n <= 64 * consumers);
        }
    }
    CHECK(checked > 0 && smem_bad == 0 && rule_bad == 0);

    /* a 3-bit key of many rows: wgmma configs valid, none of them with slabs of 64 k; 16 rows:
     * none */
    int64_t key[KTUNE_MAX_KEY];
    CHECK(ktune_space_key_parse(&s, "dtype=bf16 bits=3 group=128 m=1024 n=8192 k=8192", key,
                                &err) == 0);
    int slab128 = 0, slab64 = 0;
    for (int c = 0; c < s.nconfigs; c++) {
        const ktune_space_config *cfg = &s.configs[c];
        if (cfg->variant != KTUNE_WQMATMUL_VARIANT_WGMMA ||
            !ktune__wqmatmul_valid(cfg->variant, cfg->params, key, &devices[0]))
            continue;
        slab128 += cfg->params[p_slab] == 128;
        slab64 += cfg->params[p_slab] == 64;
    }
    CHECK(slab128 > 0 && slab64 == 0);
    CHECK(ktune_space_key_parse(&s, "dtype=bf16 bits=4 group=128 m=16 n=8192 k=8192", key, &err) ==
          0);
    int small = 0;
    for (int c = 0; c < s.nconfigs; c++)
        small += s.configs[c].variant == KTUNE_WQMATMUL_VARIANT_WGMMA &&
                 ktune__wqmatmul_valid(s.configs[c].variant, s.configs[c].params, key, &devices[0]);
    CHECK(small == 0);
    /* ring: 2 mtiles x 3 rtiles x 3 warps x 2 stages, less 16 warps of 4 x 2 tiles (their sums
     * pass 48 KB); valid only where m fits its tiles of a; its shared memory within the H100's */
    const ktune_space_variant *rv = &s.variants[KTUNE_WQMATMUL_VARIANT_RING];
    const int r_mtiles = param_index(rv, "mtiles"), r_rtiles = param_index(rv, "rtiles"),
              r_warps = param_index(rv, "warps"), r_stages = param_index(rv, "stages");
    CHECK(r_mtiles >= 0 && r_rtiles >= 0 && r_warps >= 0 && r_stages >= 0);
    long rings = 0, ring_valid = 0, ring_bad = 0;
    for (int c = 0; c < s.nconfigs; c++) {
        const ktune_space_config *cfg = &s.configs[c];
        if (cfg->variant != KTUNE_WQMATMUL_VARIANT_RING)
            continue;
        rings++;
        for (int b = 0; b < 4; b++)
            ring_bad += ring_smem(cfg->params[r_warps], cfg->params[r_stages],
                                  cfg->params[r_mtiles], cfg->params[r_rtiles],
                                  (int64_t[]){2, 3, 4, 8}[b]) > devices[0].smem_per_block;
        for (int k = 0; k < s.nshapes; k++) {
            const int64_t *key = s.shapes[k].key;
            if (!ktune__wqmatmul_valid(cfg->variant, cfg->params, key, &devices[0]))
                continue;
            ring_valid++;
            ring_bad += key[3] > 8 * cfg->params[r_mtiles];
        }
    }
    CHECK(rings == 34 && ring_valid > 0 && ring_bad == 0);
    /* instantiate: dtype x bits, the generated combo agreeing with the loader's on every shape,
     * the values' numbers (KTUNE_WQMATMUL_COMBO_*) adding up to it, a bit width not instantiated
     * none */
    CHECK(ktune_space_ncombos(&s) == 8);
    int combos_agree = 0;
    for (int i = 0; i < s.nshapes; i++) {
        const int64_t *k = s.shapes[i].key;
        const int c = ktune__wqmatmul_combo(k);
        const int by_value =
            (k[0] == KTUNE_F16 ? KTUNE_WQMATMUL_COMBO_DTYPE_F16 : KTUNE_WQMATMUL_COMBO_DTYPE_BF16) +
            (k[1] == 2   ? KTUNE_WQMATMUL_COMBO_BITS_2
             : k[1] == 3 ? KTUNE_WQMATMUL_COMBO_BITS_3
             : k[1] == 4 ? KTUNE_WQMATMUL_COMBO_BITS_4
                         : KTUNE_WQMATMUL_COMBO_BITS_8);
        combos_agree += c >= 0 && c < 8 && c == ktune_space_combo(&s, k) && c == by_value;
    }
    CHECK(s.nshapes > 0 && combos_agree == s.nshapes);
    CHECK(ktune_space_key_parse(&s, "dtype=bf16 bits=5 group=128 m=16 n=8192 k=8192", key, &err) ==
          0);
    CHECK(ktune__wqmatmul_combo(key) == -1 && ktune_space_combo(&s, key) == -1);
    printf("%ld (config, shape, device) validity checks agree; wgmma valid %ld times on the H100 "
           "with sm_90a code (%ld checked against its rules and its shared memory), large %ld, "
           "ring %ld\n",
           agree, wgmma_h100, checked, large_h100, ring_valid);
    ktune_space_free(&s);
    return check_report("test_space_wqmatmul");
}
