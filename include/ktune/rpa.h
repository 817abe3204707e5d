/* ktune rpa: ragged paged attention, a batch mixing prefill and decode sequences over a paged KV
 * cache in one launch, tuned per (dtype, q_len, page_size, head_dim, q_heads, kv_heads,
 * max_len). */
#ifndef KTUNE_RPA_H
#define KTUNE_RPA_H

#include "ktune/ktune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most KV splits a call uses (the workspace below holds that many partial results). */
#define KTUNE_RPA_MAX_SPLITS 16

/* One batch of attention over a paged KV cache. Every tensor is row-major and contiguous, of
 * dtype KTUNE_BF16 or KTUNE_F16, on the device:
 *   q, out      total_q x q_heads x head_dim (the new tokens of every sequence, in order)
 *   k_cache,    num_pages x page_size x kv_heads x head_dim each
 *   v_cache
 *   page_table  seqs x max_pages int32: page p of sequence s holds its tokens
 *               p * page_size .. (p + 1) * page_size - 1
 *   cu_q_lens   seqs + 1 int32, nondecreasing from 0 to total_q: sequence s's queries are rows
 *               cu_q_lens[s] .. cu_q_lens[s + 1] - 1 of q
 *   kv_lens     seqs int32: sequence s's tokens in the cache, its new ones (already written to
 *               the cache) the last q_len = cu_q_lens[s + 1] - cu_q_lens[s] of them
 * Query j of sequence s (0 <= j < q_len) is at position kv_len - q_len + j and attends to the
 * cache's tokens 0 .. kv_len - q_len + j (causal), through KV head h / (q_heads / kv_heads)
 * for query head h (grouped-query attention). out = softmax(scale * q k^T) v with fp32 scores
 * and softmax; a query that attends to no token (kv_len < q_len) gets zeros.
 *
 * Pages are read where they are: nothing is gathered or padded. The call neither synchronizes nor
 * reads device memory on the host, so it can be captured in a CUDA graph. Lengths and page
 * numbers outside the contract give unspecified values in out but never an access outside the
 * tensors (they are clamped to total_q, max_pages * page_size and num_pages).
 *
 * decode_seqs: how many of the first sequences decode (one query each), or 0 when the caller
 * does not say. Given (0 < decode_seqs < seqs), the call runs them and the others as two
 * launches, each with the configuration of its own key (its q_len): one configuration for the
 * whole batch serves a batch of many decoding sequences beside a few long prefills badly.
 * Sequences that do not keep it get unspecified values in out, as lengths outside the contract
 * do.
 *
 * workspace: fp32 partial results of KV splits (flash-decoding), at least
 * ktune_rpa_workspace_bytes(total_q, q_heads, head_dim, splits) bytes for `splits` splits,
 * 16-byte aligned; a call splits a sequence's keys over at most as many blocks as the workspace
 * holds (workspace_bytes 0: never), whatever its configuration asks. */
typedef struct {
    const void *q;
    const void *k_cache;
    const void *v_cache;
    const int32_t *page_table;
    const int32_t *cu_q_lens;
    const int32_t *kv_lens;
    void *out;
    void *workspace;
    size_t workspace_bytes;
    int64_t total_q, seqs, decode_seqs, q_heads, kv_heads, head_dim;
    int64_t page_size, num_pages, max_pages;
    float scale;
    ktune_dtype dtype;
} ktune_rpa_problem;

/* The workspace `splits` KV splits of a batch use (2 <= splits <= KTUNE_RPA_MAX_SPLITS):
 * splits * total_q * q_heads * (head_dim + 2) floats; 0 for other splits (none needs a
 * workspace) and where the size does not fit a size_t. */
size_t ktune_rpa_workspace_bytes(int64_t total_q, int64_t q_heads, int64_t head_dim, int splits);

/* Rules (KTUNE_ERROR_INVALID_ARGUMENT otherwise): seqs >= 1, 0 <= decode_seqs <= min(seqs,
 * total_q), total_q >= 0 (0: nothing to do), head_dim 64, 128 or 256, kv_heads >= 1, q_heads
 * a multiple of kv_heads, page_size a multiple of 8 from 8 to 1024, num_pages and max_pages >= 1,
 * scale finite, q, the caches and out 16-byte aligned, every pointer but workspace non-NULL,
 * sizes whose products fit int64 (and row counts that fit int32). out must not overlap the
 * inputs. */
ktune_status ktune_rpa(const ktune_rpa_problem *problem, cudaStream_t stream);

/* The configuration ktune_rpa would launch for this problem on the current device (its key:
 * dtype, q_len = total_q / seqs rounded up, page_size, head_dim, q_heads, kv_heads and
 * max_len = max_pages * page_size); with decode_seqs given, the configuration of the sequences
 * after them (the prefill part's key). */
ktune_status ktune_rpa_explain(const ktune_rpa_problem *problem, ktune_choice *choice);

#ifdef __cplusplus
}
#endif

#endif
