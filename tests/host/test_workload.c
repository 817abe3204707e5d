/* The workers' non-tensor inputs (gen/worker/workload.h): what each generator promises, the same
 * workload for the same key and seed, and refusals of what cannot be made. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "workload.h"

static ktune_rng rng_of(uint64_t seed)
{
    const int64_t key[] = {2, 4096, 128};
    ktune_rng r;
    ktune_rng_seed(&r, seed, key, 3);
    return r;
}

int main(void)
{
    /* lengths: in [1, max], summing to total, the same for the same seed, not for another */
    int32_t a[64], b[64];
    ktune_rng r = rng_of(1), r2 = rng_of(1), r3 = rng_of(2);
    CHECK(ktune_workload_lengths(&r, 64, 20000, 1024, a) == 0);
    CHECK(ktune_workload_lengths(&r2, 64, 20000, 1024, b) == 0 && memcmp(a, b, sizeof a) == 0);
    int64_t sum = 0, lo = 1 << 30, hi = 0;
    for (int i = 0; i < 64; i++) {
        sum += a[i];
        lo = a[i] < lo ? a[i] : lo;
        hi = a[i] > hi ? a[i] : hi;
    }
    CHECK(sum == 20000 && lo >= 1 && hi <= 1024 && hi > lo); /* ragged, within bounds */
    CHECK(ktune_workload_lengths(&r3, 64, 20000, 1024, b) == 0 && memcmp(a, b, sizeof a) != 0);
    CHECK(ktune_workload_lengths(&r, 4, 16, 4, b) == 0 && b[0] == 4 && b[1] == 4 && b[3] == 4);
    CHECK(ktune_workload_lengths(&r, 4, 3, 4, b) == -1);  /* fewer than one a sequence */
    CHECK(ktune_workload_lengths(&r, 4, 17, 4, b) == -1); /* more than max a sequence */

    /* page table: every page at most once, enough pages a sequence, unused slots -1 */
    const int32_t lengths[3] = {1, 33, 64};
    int32_t table[3 * 4];
    r = rng_of(3);
    CHECK(ktune_workload_page_table(&r, 3, lengths, 16, 4, 100, table) == 1 + 3 + 4);
    char seen[100] = {0};
    int distinct = 1;
    for (int s = 0; s < 3; s++)
        for (int p = 0; p < 4; p++) {
            const int32_t page = table[s * 4 + p];
            const int needed = (lengths[s] + 15) / 16;
            CHECK(p < needed ? page >= 0 && page < 100 : page == -1);
            if (page >= 0)
                distinct &= !seen[page]++;
        }
    CHECK(distinct);
    CHECK(ktune_workload_page_table(&r, 3, lengths, 16, 3, 100, table) == -1); /* 64 needs 4 */
    CHECK(ktune_workload_page_table(&r, 3, lengths, 16, 4, 7, table) == -1);   /* 8 needed */

    /* routing: topk distinct experts a token; offsets and rows sort the rows by expert */
    enum { tokens = 257, experts = 8, topk = 2 };
    int32_t expert_of[tokens * topk], offsets[experts + 1], rows[tokens * topk];
    r = rng_of(4);
    CHECK(ktune_workload_routing(&r, tokens, experts, topk, 0, expert_of, offsets, rows) == 0);
    int ok = offsets[0] == 0 && offsets[experts] == tokens * topk;
    for (int t = 0; t < tokens; t++)
        ok &= expert_of[t * 2] != expert_of[t * 2 + 1] && expert_of[t * 2] >= 0 &&
              expert_of[t * 2] < experts;
    for (int e = 0; e < experts; e++)
        for (int32_t row = offsets[e]; row < offsets[e + 1]; row++) {
            const int t = rows[row];
            ok &= t >= 0 && t < tokens && (expert_of[t * 2] == e || expert_of[t * 2 + 1] == e);
            ok &= row == offsets[e] || rows[row - 1] < t; /* tokens ascending within an expert */
        }
    CHECK(ok);
    /* skew: expert 0 takes more rows than the last */
    CHECK(ktune_workload_routing(&r, tokens, experts, topk, 1.5, expert_of, offsets, rows) == 0);
    CHECK(offsets[1] - offsets[0] > offsets[experts] - offsets[experts - 1]);
    CHECK(ktune_workload_routing(&r, tokens, 2, 3, 0, expert_of, offsets, rows) == -1);

    /* balanced: counts differ by at most one, sum to the rows; fewer rows than groups touch
     * that many distinct groups */
    int32_t bal[65];
    CHECK(ktune_workload_balanced(&r, 1000, 64, bal) == 0);
    int fewest = 1 << 30, most_rows = 0;
    for (int g = 0; g < 64; g++) {
        const int c = bal[g + 1] - bal[g];
        fewest = c < fewest ? c : fewest;
        most_rows = c > most_rows ? c : most_rows;
    }
    CHECK(bal[0] == 0 && bal[64] == 1000 && fewest == 15 && most_rows == 16);
    CHECK(ktune_workload_balanced(&r, 6, 64, bal) == 0);
    int touched = 0, most = 0;
    for (int g = 0; g < 64; g++) {
        touched += bal[g + 1] > bal[g];
        most = bal[g + 1] - bal[g] > most ? bal[g + 1] - bal[g] : most;
    }
    CHECK(touched == 6 && most == 1 && bal[64] == 6);
    CHECK(ktune_workload_balanced(&r, 5, 0, bal) == -1);

    /* scales: in [lo, hi] */
    float scales[1000];
    CHECK(ktune_workload_scales(&r, 1000, 1e-3f, 1e-1f, scales) == 0);
    int in_range = 1;
    for (int i = 0; i < 1000; i++)
        in_range &= scales[i] >= 1e-3f && scales[i] <= 1e-1f;
    CHECK(in_range && ktune_workload_scales(&r, 10, 0, 1, scales) == -1);
    return check_report("test_workload");
}
