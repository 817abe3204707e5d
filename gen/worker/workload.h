/* Non-tensor inputs a family's worker builds from the key and a seed: ragged sequence lengths,
 * page tables of a paged KV cache, token-to-expert routing with expert offsets, quantization
 * scales. Host code (C11), deterministic: the same key and seed give the same workload on every
 * machine, so a resumed sweep, verify and bench time what the sweep timed. Each generator checks
 * what it is asked and fails (-1) rather than produce a workload the kernel would not see.
 *
 * A family's prepare() (worker.h) makes them on the host, copies them into the arena beside its
 * tensors, and, where a kernel reads them as it reads its tensors, once into each input set, so
 * that they rotate with the sets; the check's reference reads the same copies. */
#ifndef KTUNE_WORKER_WORKLOAD_H
#define KTUNE_WORKER_WORKLOAD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A splitmix64 generator seeded by a seed and a key. */
typedef struct {
    uint64_t state;
} ktune_rng;

void ktune_rng_seed(ktune_rng *rng, uint64_t seed, const int64_t *key, int nkey);
uint64_t ktune_rng_next(ktune_rng *rng);
/* Uniform in [0, n), n >= 1, without modulo bias. */
int64_t ktune_rng_below(ktune_rng *rng, int64_t n);

/* n lengths in [1, max] that sum to total exactly (ragged queries or KV lengths of a batch):
 * 0, or -1 unless 1 <= n and n <= total <= n * max. */
int ktune_workload_lengths(ktune_rng *rng, int n, int64_t total, int64_t max, int32_t *lengths);

/* The page table of n sequences of the given lengths in a paged KV cache of npages pages of
 * page_size tokens: table[s * max_pages + p] is the page holding tokens p * page_size... of
 * sequence s, every page used once, in a shuffled order (a cache after many allocations and
 * frees); unused slots are -1. The pages used, or -1 when a sequence needs more than max_pages
 * or all need more than npages. */
int64_t ktune_workload_page_table(ktune_rng *rng, int n, const int32_t *lengths, int page_size,
                                  int max_pages, int64_t npages, int32_t *table);

/* Routing of tokens to experts: topk distinct experts a token (expert_of[t * topk + j]), drawn
 * uniformly, or with skew > 0 from a distribution where expert e has weight 1 / (e + 1)^skew
 * (a few hot experts); then the expert-sorted rows: offsets[e]..offsets[e + 1] are expert e's rows
 * (offsets has experts + 1 entries, offsets[experts] = tokens * topk), rows[r] the token of row r
 * (ascending within an expert). 0, or -1 unless 1 <= topk <= experts and tokens >= 1. */
int ktune_workload_routing(ktune_rng *rng, int tokens, int experts, int topk, double skew,
                           int32_t *expert_of, int32_t *offsets, int32_t *rows);

/* Balanced routing of rows over groups: every group takes rows / groups rows, and rows % groups
 * groups drawn without repetition take one more (with fewer rows than groups, the rows' groups are
 * that many distinct groups drawn at random: a decode step's touched experts). offsets has
 * groups + 1 entries, from 0 to rows. 0, or -1 unless rows >= 0 and groups >= 1. */
int ktune_workload_balanced(ktune_rng *rng, int64_t rows, int groups, int32_t *offsets);

/* n quantization scales, log-uniform in [lo, hi] (0 < lo <= hi). 0, or -1. */
int ktune_workload_scales(ktune_rng *rng, int64_t n, float lo, float hi, float *scales);

#ifdef __cplusplus
}
#endif

#endif
