/* The selection policy on synthetic tables: table choice, exact, nearest without crossing a
 * variant's limit, the nearest keys' vote with and without a cost model, default order,
 * KTUNE_FORCE, the untuned-keys file. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "select.h"

/* variant 0 ("v") is valid while n <= 1000 * tile; variant 1 ("w") always */
static int valid(int variant, const int64_t *p, const int64_t *k, const ktune_device *d)
{
    (void)d;
    return variant == 1 || k[1] <= 1000 * p[0];
}

static const ktune_instance instances[] = {
    {"v_tile1", 0, {1}, NULL, 0, NULL},
    {"v_tile2", 0, {2}, NULL, 0, NULL},
    {"w_any", 1, {0}, NULL, 0, NULL},
};
static const char *const key_names[] = {"dtype", "n"};
static const ktune_dim_kind key_kinds[] = {KTUNE_DIM_DTYPE, KTUNE_DIM_INT};
static const ktune_row rows_a[] = {
    {{KTUNE_F16, 64}, "v_tile2", 1.0f, 2.0f},
    {{KTUNE_F16, 1000}, "v_tile1", 3.0f, 4.0f},
    {{KTUNE_F16, 4096}, "not_compiled_in", 5.0f, 6.0f},
    {{KTUNE_BF16, 64}, "w_any", 7.0f, 8.0f},
};
static const ktune_row rows_b[] = {{{KTUNE_F16, 64}, "w_any", 9.0f, 9.5f}};
static const ktune_table table_a = {"Dev A", 100, 90, rows_a, 4};
static const ktune_table table_b = {"Dev B", 50, 80, rows_b, 1};
static const ktune_table *const tables[] = {&table_a, &table_b};
/* each row's instance, as the build resolves it (-1: not compiled in) */
static const int instances_a[] = {1, 0, -1, 2}, instances_b[] = {2};
static const int *const table_instances[] = {instances_a, instances_b};
static const char *const defaults[] = {"v_tile1", "w_any"};
static const ktune_family fam = {"fam", 2, key_names, key_kinds, tables, 2, table_instances,
                                 instances, 3, defaults, 2, valid, NULL, NULL, NULL, NULL};

/* A family whose rows carry runner-ups: the neighbours' vote. a (variant 0) wins at n = 100 by
 * 10%; b (variant 1) wins at n = 200 and 400 by 30%. */
static const ktune_instance voters[] = {{"a", 0, {1}, NULL, 0, NULL}, {"b", 1, {2}, NULL, 0, NULL}};
static const ktune_row voter_rows[] = {
    {{KTUNE_F16, 100}, "a", 10.0f, 10.0f},
    {{KTUNE_F16, 200}, "b", 10.0f, 13.0f},
    {{KTUNE_F16, 400}, "b", 20.0f, 26.0f},
};
static const ktune_table voter_table = {"Dev A", 100, 90, voter_rows, 3};
static const ktune_table *const voter_tables[] = {&voter_table};
static const int voter_instances[] = {0, 1, 1};
static const int *const voter_table_instances[] = {voter_instances};
/* KTUNE_TABLE_RUNNER_UPS a row */
static const int voter_runners[] = {1, -1, -1, -1, -1, -1, -1, -1, 0, -1, -1, -1,
                                    -1, -1, -1, -1, 0, -1, -1, -1, -1, -1, -1, -1};
static const float voter_runner_us[] = {11.0f, 0, 0, 0, 0, 0, 0, 0, 13.0f, 0, 0, 0,
                                        0,     0, 0, 0, 26.0f, 0, 0, 0, 0, 0, 0, 0};
static const int *const voter_runner_instances[] = {voter_runners};
static const float *const voter_runner_times[] = {voter_runner_us};
static const char *const voter_defaults[] = {"a"};
static int voter_valid(int variant, const int64_t *p, const int64_t *k, const ktune_device *d)
{
    (void)variant, (void)d;
    return p[0] == 1 || k[1] < 100000; /* b stops at 100000 */
}
static const ktune_family voting = {"voting", 2, key_names, key_kinds, voter_tables, 1,
                                    voter_table_instances, voters, 2, voter_defaults, 1,
                                    voter_valid, voter_runner_instances, voter_runner_times,
                                    NULL, NULL};
/* with c, of another variant, whose twin is b: no row measured c */
static const ktune_instance voters_and_twin[] = {
    {"a", 0, {1}, NULL, 0, NULL}, {"b", 1, {2}, NULL, 0, NULL}, {"c", 2, {2}, NULL, 0, "b"}};

/* Cost models for the vote: a (tile 1) in proportion to n, b (tile 2) in waves of 250, c
 * (variant 2) as b over whole waves and half a wave's cost for a part of one; none. */
static int64_t waves_cost(int variant, const int64_t *p, const int64_t *k, const ktune_device *d)
{
    (void)d;
    if (variant == 2)
        return 250 * (k[1] / 250) + (k[1] % 250 ? 125 : 0);
    return p[0] == 1 ? k[1] : 250 * ((k[1] + 249) / 250);
}
static int64_t no_cost(int variant, const int64_t *p, const int64_t *k, const ktune_device *d)
{
    (void)variant, (void)p, (void)k, (void)d;
    return 0;
}

/* Combinations of instantiated values: f16 0, bf16 1, any other dtype none. */
static int dtype_combo(const int64_t *k)
{
    return k[0] == KTUNE_F16 ? 0 : k[0] == KTUNE_BF16 ? 1 : -1;
}

static const char *pick_voted(const ktune_device *d, int64_t n, ktune_reason *reason)
{
    const int64_t key[KTUNE_MAX_KEY] = {KTUNE_F16, n};
    ktune_choice c;
    int i = -1;
    const ktune_status st = ktune__select(&voting, key, d, &i, &c);
    *reason = c.reason;
    printf("voting n=%-6lld -> %-3s %s\n", (long long)n, st == KTUNE_OK ? voters[i].name : "error",
           c.why);
    return st == KTUNE_OK ? voters[i].name : "";
}

static const char *pick(const ktune_device *d, int64_t dtype, int64_t n, ktune_reason *reason,
                        ktune_status *status)
{
    const int64_t key[KTUNE_MAX_KEY] = {dtype, n};
    ktune_choice c;
    int i = -1;
    *status = ktune__select(&fam, key, d, &i, &c);
    *reason = c.reason;
    printf("%-8s n=%-5lld -> %-8s %s\n", ktune_dtype_name(dtype), (long long)n,
           *status == KTUNE_OK ? instances[i].name : "error", c.why);
    return *status == KTUNE_OK ? instances[i].name : "";
}

static int lines_in(const char *path)
{
    FILE *f = fopen(path, "r");
    int n = 0, ch;
    if (!f)
        return 0;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

int main(void)
{
    ktune_device a = {"Dev A", 100, 90, 1024, 0, 0, 1}, a_cut = {"Dev A", 90, 90, 1024, 0, 0, 1},
                 c = {"Dev C", 60, 80, 1024, 0, 0, 0}, none = {"Dev D", 10, 70, 1024, 0, 0, 0};
    ktune_reason r;
    ktune_status st;
    char untuned[] = "/tmp/ktune-untuned-XXXXXX";
    int fd = mkstemp(untuned);
    close(fd);
    setenv("KTUNE_UNTUNED_FILE", untuned, 1);
    setenv("KTUNE_LOG", "quiet", 1);
    ktune__select_reset();

    CHECK(strcmp(pick(&a, KTUNE_F16, 64, &r, &st), "v_tile2") == 0 && r == KTUNE_REASON_EXACT);
    CHECK(strcmp(pick(&a, KTUNE_F16, 1000, &r, &st), "v_tile1") == 0 && r == KTUNE_REASON_EXACT);
    /* same name, other SM count: the table of the same architecture still serves */
    CHECK(strcmp(pick(&a_cut, KTUNE_F16, 64, &r, &st), "v_tile2") == 0 && r == KTUNE_REASON_EXACT);
    /* another device of cc 80 gets Dev B's table */
    CHECK(strcmp(pick(&c, KTUNE_F16, 64, &r, &st), "w_any") == 0 && r == KTUNE_REASON_EXACT);
    /* nearest by log distance: 100 is nearer 64 than 1000 */
    CHECK(strcmp(pick(&a, KTUNE_F16, 100, &r, &st), "v_tile2") == 0 && r == KTUNE_REASON_NEAREST);
    CHECK(strcmp(pick(&a, KTUNE_F16, 700, &r, &st), "v_tile1") == 0 && r == KTUNE_REASON_NEAREST);
    /* 1500 is nearest 1000, but v_tile1 stops at 1000: the next nearest valid row, 64's v_tile2 */
    CHECK(strcmp(pick(&a, KTUNE_F16, 1500, &r, &st), "v_tile2") == 0 && r == KTUNE_REASON_NEAREST);
    /* 5000: no f16 row's config holds it; bf16 64's w_any does, a dtype apart */
    CHECK(strcmp(pick(&a, KTUNE_F16, 5000, &r, &st), "w_any") == 0 && r == KTUNE_REASON_NEAREST);
    /* a row of 4096 whose config is not compiled in does not count: bf16 64's w_any again */
    CHECK(strcmp(pick(&a, KTUNE_F16, 4096, &r, &st), "w_any") == 0 && r == KTUNE_REASON_NEAREST);
    /* f32 has no rows: f16 64's v_tile2 and bf16 64's w_any, a dtype apart, tie; the first */
    CHECK(strcmp(pick(&a, KTUNE_F32, 64, &r, &st), "v_tile2") == 0 && r == KTUNE_REASON_NEAREST);
    /* no table for cc 70: defaults in order */
    CHECK(strcmp(pick(&none, KTUNE_F16, 50, &r, &st), "v_tile1") == 0 && r == KTUNE_REASON_DEFAULT);
    CHECK(strcmp(pick(&none, KTUNE_F16, 5000, &r, &st), "w_any") == 0 && r == KTUNE_REASON_DEFAULT);
    /* each untuned key is recorded once: 100, 700, 1500, 5000, 4096, f32 64, 50 */
    pick(&a, KTUNE_F16, 1500, &r, &st);
    pick(&none, KTUNE_F16, 50, &r, &st);
    CHECK(lines_in(untuned) == 7);
    /* in the form `ktune sweep FAMILY --untuned FILE` reads (tests/data/untuned.txt) */
    FILE *rec = fopen(untuned, "r");
    char first[128] = "";
    CHECK(rec && fgets(first, sizeof first, rec) && strcmp(first, "fam dtype=f16 n=100\n") == 0);
    if (rec)
        fclose(rec);

    setenv("KTUNE_FORCE", "other=zzz,fam=v_tile2", 1);
    ktune__select_reset();
    CHECK(strcmp(pick(&a, KTUNE_F16, 64, &r, &st), "v_tile2") == 0 && r == KTUNE_REASON_FORCED);
    pick(&a, KTUNE_F16, 5000, &r, &st);
    CHECK(st == KTUNE_ERROR_FORCED_CONFIG);
    setenv("KTUNE_FORCE", "fam=missing", 1);
    ktune__select_reset();
    pick(&a, KTUNE_F16, 64, &r, &st);
    CHECK(st == KTUNE_ERROR_FORCED_CONFIG);
    unsetenv("KTUNE_FORCE");

    /* the launch path (no choice asked): the same answers as above, the second time from the
     * keys answered before, for each device apart; untuned keys are still recorded once */
    ktune__select_reset();
    const struct {
        const ktune_device *dev;
        int64_t n;
        const char *config;
    } launches[] = {{&a, 64, "v_tile2"}, {&c, 64, "w_any"},   {&a, 1500, "v_tile2"},
                    {&a, 5000, "w_any"}, {&none, 50, "v_tile1"}, {&a_cut, 64, "v_tile2"}};
    for (int round = 0; round < 3; round++)
        for (size_t l = 0; l < sizeof launches / sizeof launches[0]; l++) {
            const int64_t lk[KTUNE_MAX_KEY] = {KTUNE_F16, launches[l].n};
            int li = -1;
            CHECK(ktune__select(&fam, lk, launches[l].dev, &li, NULL) == KTUNE_OK && li >= 0 &&
                  strcmp(instances[li].name, launches[l].config) == 0);
        }
    CHECK(lines_in(untuned) == 7 + 3); /* 1500 and 5000 on Dev A, 50 on Dev D: once each */

    /* without the bf16 row no row's config holds 5000: defaults in order, v_tile1 is out */
    static const ktune_table table_f16 = {"Dev A", 100, 90, rows_a, 3};
    static const ktune_table *const tables_f16[] = {&table_f16};
    ktune_family f16_only = fam;
    f16_only.tables = tables_f16;
    f16_only.ntables = 1;
    const int64_t k5000[KTUNE_MAX_KEY] = {KTUNE_F16, 5000};
    ktune_choice dc;
    int di = -1;
    CHECK(ktune__select(&f16_only, k5000, &a, &di, &dc) == KTUNE_OK && di == 2 &&
          dc.reason == KTUNE_REASON_DEFAULT);

    /* instantiated dtypes (a space's instantiate): v_tile2 compiled for bf16 only, f32 not
     * instantiated at all. f16 64's row names v_tile2, which no longer serves it: not the exact
     * answer; bf16 64 still gets its row's w_any; f32 is served by nothing, forced or not */
    static const ktune_instance bf16_tile2[] = {
        {"v_tile1", 0, {1}, NULL, 3, NULL},
        {"v_tile2", 0, {2}, NULL, 2, NULL},
        {"w_any", 1, {0}, NULL, 3, NULL}};
    ktune_family partial = fam;
    partial.instances = bf16_tile2;
    partial.combo = dtype_combo;
    const int64_t f16_64[KTUNE_MAX_KEY] = {KTUNE_F16, 64}, bf16_64[KTUNE_MAX_KEY] = {KTUNE_BF16, 64},
                  f32_64[KTUNE_MAX_KEY] = {KTUNE_F32, 64};
    ktune__select_reset();
    CHECK(ktune__select(&partial, f16_64, &a, &di, &dc) == KTUNE_OK && di != 1 &&
          dc.reason != KTUNE_REASON_EXACT);
    CHECK(ktune__select(&partial, bf16_64, &a, &di, &dc) == KTUNE_OK && di == 2 &&
          dc.reason == KTUNE_REASON_EXACT);
    CHECK(ktune__select(&partial, f32_64, &a, &di, &dc) == KTUNE_ERROR_NO_CONFIG);
    setenv("KTUNE_FORCE", "fam=v_tile2", 1);
    ktune__select_reset();
    CHECK(ktune__select(&partial, f16_64, &a, &di, &dc) == KTUNE_ERROR_FORCED_CONFIG &&
          strstr(dc.why, "not compiled for this key's values"));
    CHECK(ktune__select(&partial, bf16_64, &a, &di, &dc) == KTUNE_OK && di == 1);
    unsetenv("KTUNE_FORCE");

    /* the vote: n = 120 is nearest 100, where a won by 10%; 200 and 400, near too, measured b
     * 30% ahead: b scores (0.79 log 1.1) / 1.73 = 0.04 against a's (0.57 + 0.37) log 1.3 / 1.73
     * = 0.14, weights 1 / (1 + distance) */
    ktune__select_reset();
    CHECK(strcmp(pick_voted(&a, 100, &r), "a") == 0 && r == KTUNE_REASON_EXACT);
    CHECK(strcmp(pick_voted(&a, 120, &r), "b") == 0 && r == KTUNE_REASON_NEAREST);
    const int64_t k120[KTUNE_MAX_KEY] = {KTUNE_F16, 120};
    CHECK(ktune__select_nearest(&voting, k120, &a) == 0); /* the nearest row alone: a */
    /* the row the answer is measured nearest at (adaptation's candidates): 100's runner-up b */
    int table = -1;
    CHECK(ktune__select_row(&voting, k120, &a, &table) == 0 && table == 0);
    /* 300: between 200 and 400, where b won: b */
    CHECK(strcmp(pick_voted(&a, 300, &r), "b") == 0 && r == KTUNE_REASON_NEAREST);
    /* 200000: b is invalid there, so 200 and 400, whose answer it is, do not vote: 100's a */
    CHECK(strcmp(pick_voted(&a, 200000, &r), "a") == 0 && r == KTUNE_REASON_NEAREST);
    /* without runner-up times the rows' answers alone vote: at 120, 100's a against 200's and
     * 400's b: a scores (0.58 + 0.37) * 0.3 / 1.73 = 0.16, b 0.79 * 0.3 / 1.73 = 0.14: b */
    ktune_family answers_only = voting;
    answers_only.table_runner_us = NULL;
    ktune__select_reset();
    int vi = -1;
    CHECK(ktune__select(&answers_only, k120, &a, &vi, NULL) == KTUNE_OK && vi == 1);
    /* a cost model: a's time grows with n, b's with waves of 250 (n = 260 fills 1.04 of them:
     * twice the cost of 200, as much as 400). At 260 the rows vote b without the model:
     * 0.42 log 1.1 / 1.76 = 0.02 against a's (0.73 + 0.62) log 1.3 / 1.76 = 0.20; with it, a:
     * (0.42 log 2.6 + 0.73 (log 1.3 + log 1.3) + 0.62 (log 1.3 + log 0.65)) / 1.76 = 0.38
     * against b's (0.42 (log 1.1 + log 2) + 0.73 log 2) / 1.76 = 0.47 */
    const int64_t k260[KTUNE_MAX_KEY] = {KTUNE_F16, 260};
    ktune__select_reset();
    CHECK(ktune__select(&voting, k260, &a, &vi, NULL) == KTUNE_OK && vi == 1);
    ktune_family costed = voting;
    costed.cost = waves_cost;
    ktune__select_reset();
    CHECK(ktune__select(&costed, k260, &a, &vi, NULL) == KTUNE_OK && vi == 0);
    /* c, which no row measured, votes with its twin b's times, carried by the cost models from b
     * at the rows to c at 260 (375, against b's 250 at 100 and 200 and 500 at 400):
     * (0.42 (log 1.1 + log 1.5) + 0.73 log 1.5 + 0.62 log 0.75) / 1.76 = 0.18, under a's 0.38 */
    costed.instances = voters_and_twin;
    costed.ninstances = 3;
    ktune__select_reset();
    CHECK(ktune__select(&costed, k260, &a, &vi, NULL) == KTUNE_OK && vi == 2);
    /* without the twin, c is no candidate: a */
    static const ktune_instance voters_no_twin[] = {
        {"a", 0, {1}, NULL, 0, NULL}, {"b", 1, {2}, NULL, 0, NULL}, {"c", 2, {2}, NULL, 0, NULL}};
    costed.instances = voters_no_twin;
    ktune__select_reset();
    CHECK(ktune__select(&costed, k260, &a, &vi, NULL) == KTUNE_OK && vi == 0);
    costed.instances = voters;
    costed.ninstances = 2;
    /* a row that did not measure a configuration but measured its variant: that variant's fastest
     * there stands in, 0.05 (5%) worse. a2 (variant 0, like a) won at 100, 20% ahead of b; b won
     * at 200 and 400, 2% ahead of a. At 120, a scores (0.79 * 0.05 + (0.58 + 0.37) log 1.02) /
     * 1.73 = 0.034 (its variant's a2 standing in at 100), a2 (0.58 + 0.37) (log 1.02 + 0.05) /
     * 1.73 = 0.038 (a standing in at 200 and 400), b 0.79 log 1.2 / 1.73 = 0.083; counted as
     * 35% slower where unmeasured, b's 0.083 would win over a's 0.148 */
    static const ktune_instance siblings[] = {
        {"a", 0, {1}, NULL, 0, NULL}, {"b", 1, {2}, NULL, 0, NULL}, {"a2", 0, {3}, NULL, 0, NULL}};
    static const ktune_row sibling_rows[] = {
        {{KTUNE_F16, 100}, "a2", 10.0f, 10.0f},
        {{KTUNE_F16, 200}, "b", 10.0f, 10.0f},
        {{KTUNE_F16, 400}, "b", 20.0f, 20.0f},
    };
    static const ktune_table sibling_table = {"Dev A", 100, 90, sibling_rows, 3};
    static const ktune_table *const sibling_tables[] = {&sibling_table};
    static const int sibling_answers[] = {2, 1, 1};
    static const int *const sibling_table_instances[] = {sibling_answers};
    static const int sibling_runners[3 * KTUNE_TABLE_RUNNER_UPS] = {
        1, -1, -1, -1, -1, -1, -1, -1, /* 100: b */
        0, -1, -1, -1, -1, -1, -1, -1, /* 200: a */
        0, -1, -1, -1, -1, -1, -1, -1, /* 400: a */
    };
    static const float sibling_runner_us[3 * KTUNE_TABLE_RUNNER_UPS] = {
        12.0f, 0, 0, 0, 0, 0, 0, 0, 10.2f, 0, 0, 0, 0, 0, 0, 0, 20.4f, 0, 0, 0, 0, 0, 0, 0};
    static const int *const sibling_runner_instances[] = {sibling_runners};
    static const float *const sibling_runner_times[] = {sibling_runner_us};
    ktune_family kin = voting;
    kin.tables = sibling_tables;
    kin.table_instances = sibling_table_instances;
    kin.instances = siblings;
    kin.ninstances = 3;
    kin.table_runner_instances = sibling_runner_instances;
    kin.table_runner_us = sibling_runner_times;
    ktune__select_reset();
    CHECK(ktune__select(&kin, k120, &a, &vi, NULL) == KTUNE_OK && vi == 0);
    /* a variant without a model (cost 0) votes as before */
    costed.cost = no_cost;
    ktune__select_reset();
    CHECK(ktune__select(&costed, k260, &a, &vi, NULL) == KTUNE_OK && vi == 1);
    /* the launch path answers the vote, and again from memory */
    ktune__select_reset();
    for (int round = 0; round < 2; round++) {
        int li = -1;
        CHECK(ktune__select(&voting, k120, &a, &li, NULL) == KTUNE_OK && li == 1);
    }

    /* nothing valid at all */
    static const char *const only_v[] = {"v_tile1"};
    ktune_family narrow = fam;
    narrow.defaults = only_v;
    narrow.ndefaults = 1;
    narrow.ntables = 0;
    ktune__select_reset();
    const int64_t key[KTUNE_MAX_KEY] = {KTUNE_F16, 100000};
    int i;
    CHECK(ktune__select(&narrow, key, &a, &i, NULL) == KTUNE_ERROR_NO_CONFIG);

    CHECK(strcmp(ktune_status_string(KTUNE_ERROR_NO_CONFIG), "no configuration is valid for this shape") == 0);
    CHECK(strcmp(ktune_reason_string(KTUNE_REASON_NEAREST), "nearest") == 0);
    unlink(untuned);
    return check_report("test_select");
}
