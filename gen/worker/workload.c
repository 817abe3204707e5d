/* Non-tensor inputs of a worker: workload.h. */
#include "workload.h"

#include <math.h>
#include <stdlib.h>

void ktune_rng_seed(ktune_rng *rng, uint64_t seed, const int64_t *key, int nkey)
{
    rng->state = seed ^ 0x243f6a8885a308d3ULL;
    for (int d = 0; d < nkey; d++) {
        rng->state ^= (uint64_t)key[d] + 0x9e3779b97f4a7c15ULL + (rng->state << 6) +
                      (rng->state >> 2);
        ktune_rng_next(rng);
    }
}

uint64_t ktune_rng_next(ktune_rng *rng)
{
    uint64_t z = (rng->state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int64_t ktune_rng_below(ktune_rng *rng, int64_t n)
{
    const uint64_t range = (uint64_t)n, limit = UINT64_MAX - UINT64_MAX % range;
    uint64_t x;
    do
        x = ktune_rng_next(rng);
    while (x >= limit);
    return (int64_t)(x % range);
}

int ktune_workload_lengths(ktune_rng *rng, int n, int64_t total, int64_t max, int32_t *lengths)
{
    if (n < 1 || max < 1 || max > INT32_MAX || total < n || total > (int64_t)n * max)
        return -1;
    /* start at 1 each, then hand out the rest one random share at a time, within max */
    int64_t left = total - n;
    for (int i = 0; i < n; i++)
        lengths[i] = 1;
    for (int i = 0; i < n && left > 0; i++) {
        const int64_t room_after = (int64_t)(n - 1 - i) * (max - 1); /* what the rest can take */
        int64_t lo = left - room_after > 0 ? left - room_after : 0;
        int64_t hi = left < max - 1 ? left : max - 1;
        /* draw around the mean share, so that lengths spread rather than pile up at the front */
        int64_t share = lo + ktune_rng_below(rng, hi - lo + 1);
        if (i < n - 1) {
            const int64_t mean = left / (n - i);
            const int64_t blend = (share + mean) / 2;
            share = blend < lo ? lo : blend > hi ? hi : blend;
        } else {
            share = left;
        }
        lengths[i] += (int32_t)share;
        left -= share;
    }
    /* a shuffle: long and short sequences in no order */
    for (int i = n - 1; i > 0; i--) {
        const int j = (int)ktune_rng_below(rng, i + 1);
        const int32_t t = lengths[i];
        lengths[i] = lengths[j];
        lengths[j] = t;
    }
    return 0;
}

int64_t ktune_workload_page_table(ktune_rng *rng, int n, const int32_t *lengths, int page_size,
                                  int max_pages, int64_t npages, int32_t *table)
{
    if (n < 1 || page_size < 1 || max_pages < 1 || npages < 1 || npages > INT32_MAX)
        return -1;
    int64_t needed = 0;
    for (int s = 0; s < n; s++) {
        if (lengths[s] < 0)
            return -1;
        const int64_t pages = ((int64_t)lengths[s] + page_size - 1) / page_size;
        if (pages > max_pages)
            return -1;
        needed += pages;
    }
    if (needed > npages)
        return -1;
    int32_t *order = malloc(sizeof *order * (size_t)npages);
    if (!order)
        return -1;
    for (int64_t p = 0; p < npages; p++)
        order[p] = (int32_t)p;
    for (int64_t p = 0; p < needed; p++) { /* the first `needed` of a shuffle */
        const int64_t q = p + ktune_rng_below(rng, npages - p);
        const int32_t t = order[p];
        order[p] = order[q];
        order[q] = t;
    }
    int64_t used = 0;
    for (int s = 0; s < n; s++) {
        const int64_t pages = ((int64_t)lengths[s] + page_size - 1) / page_size;
        for (int p = 0; p < max_pages; p++)
            table[(int64_t)s * max_pages + p] = p < pages ? order[used + p] : -1;
        used += pages;
    }
    free(order);
    return used;
}

int ktune_workload_balanced(ktune_rng *rng, int64_t rows, int groups, int32_t *offsets)
{
    if (rows < 0 || rows > INT32_MAX || groups < 1)
        return -1;
    int32_t *order = malloc(sizeof *order * (size_t)groups);
    if (!order)
        return -1;
    /* the groups that take one more row: the first rows % groups of a shuffled order */
    for (int g = 0; g < groups; g++)
        order[g] = g;
    const int extra = (int)(rows % groups);
    for (int i = 0; i < extra; i++) {
        const int j = i + (int)ktune_rng_below(rng, groups - i);
        const int32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int g = 0; g <= groups; g++)
        offsets[g] = (int32_t)(rows / groups);
    for (int i = 0; i < extra; i++)
        offsets[order[i]]++;
    /* counts into offsets: offsets[g] is where group g starts */
    int32_t start = 0;
    for (int g = 0; g <= groups; g++) {
        const int32_t count = g < groups ? offsets[g] : 0;
        offsets[g] = start;
        start += count;
    }
    free(order);
    return 0;
}

int ktune_workload_routing(ktune_rng *rng, int tokens, int experts, int topk, double skew,
                           int32_t *expert_of, int32_t *offsets, int32_t *rows)
{
    if (tokens < 1 || experts < 1 || topk < 1 || topk > experts || !(skew >= 0) ||
        (int64_t)tokens * topk > INT32_MAX)
        return -1;
    double *cdf = malloc(sizeof *cdf * (size_t)experts);
    if (!cdf)
        return -1;
    double sum = 0;
    for (int e = 0; e < experts; e++)
        cdf[e] = (sum += pow(e + 1.0, -skew));
    for (int t = 0; t < tokens; t++)
        for (int j = 0; j < topk; j++) {
            int e, taken;
            do { /* draw until distinct from the token's others (topk <= experts) */
                const double u = (double)(ktune_rng_next(rng) >> 11) / 9007199254740992.0 * sum;
                int lo = 0, hi = experts - 1;
                while (lo < hi) {
                    const int mid = (lo + hi) / 2;
                    if (cdf[mid] > u)
                        hi = mid;
                    else
                        lo = mid + 1;
                }
                e = lo;
                taken = 0;
                for (int k = 0; k < j; k++)
                    taken |= expert_of[(int64_t)t * topk + k] == e;
            } while (taken);
            expert_of[(int64_t)t * topk + j] = e;
        }
    free(cdf);
    /* counting sort by expert, tokens ascending within one */
    for (int e = 0; e <= experts; e++)
        offsets[e] = 0;
    const int64_t nrows = (int64_t)tokens * topk;
    for (int64_t r = 0; r < nrows; r++)
        offsets[expert_of[r] + 1]++;
    for (int e = 0; e < experts; e++)
        offsets[e + 1] += offsets[e];
    int32_t *next = malloc(sizeof *next * (size_t)experts);
    if (!next)
        return -1;
    for (int e = 0; e < experts; e++)
        next[e] = offsets[e];
    for (int64_t r = 0; r < nrows; r++)
        rows[next[expert_of[r]]++] = (int32_t)(r / topk);
    free(next);
    return 0;
}

int ktune_workload_scales(ktune_rng *rng, int64_t n, float lo, float hi, float *scales)
{
    if (n < 0 || !(lo > 0) || !(hi >= lo) || !isfinite(hi))
        return -1;
    const double a = log(lo), b = log(hi);
    for (int64_t i = 0; i < n; i++) {
        const double u = (double)(ktune_rng_next(rng) >> 11) / 9007199254740992.0;
        scales[i] = (float)exp(a + (b - a) * u);
        scales[i] = scales[i] < lo ? lo : scales[i] > hi ? hi : scales[i];
    }
    return 0;
}
