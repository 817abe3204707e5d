/* The shapes of an attention layer given on the command line, as the seed's ragged paged
 * attention tuner takes them: --page-size 128 --head-dim 128 --num-q-heads 32 --num-kv-heads 8
 * --max-model-len 8192 --tp-size 4. Heads are global: one GPU of the tensor-parallel degree holds
 * q_heads / tp query heads and kv_heads / tp KV heads (one, replicated, where tp is a multiple of
 * kv_heads). They take the place of the space's own shapes, for any family whose key has
 * dimensions q_len, page_size, head_dim, q_heads, kv_heads and max_len (and a dtype): a shape
 * for each q_len and dtype the space's own shapes use (q_len at most max_len). */
#ifndef KTUNE_GEN_ATTENTION_H
#define KTUNE_GEN_ATTENTION_H

#include <stdint.h>

#include "util.h"

typedef struct {
    int64_t page_size, head_dim, max_len;
    int64_t q_heads, kv_heads; /* on one GPU */
} ktune_attention_shapes;

/* The flags' values (0: not given, the seed's default then: pages of 128, head_dim 128, 128 query
 * heads, 1 KV head, 1024 tokens, tp 1) into a. Errors name the flags: a degree that divides
 * neither the query heads nor (and is no multiple of) the KV heads, query heads no multiple of
 * the KV heads, a length no multiple of the page size. */
int ktune_attention_parse(int64_t page_size, int64_t head_dim, int64_t q_heads, int64_t kv_heads,
                          int64_t max_len, int64_t tp, ktune_attention_shapes *a, ktune_err *err);

/* The most sequence lengths --seq-len takes. */
#define KTUNE_ATTENTION_MAX_SEQS 64

/* The shapes of dense attention given on the command line, as the seed's INT8-QK attention tuner
 * takes them: --seq-len 8192 16384 32768 --batch-size 1 --num-heads 5 --head-dim 128 (the heads
 * of one GPU). They take the place of the space's own shapes, for any family whose key has
 * dimensions batch, heads, seq_len and head_dim: a shape for each sequence length and each
 * combination of the other dimensions (dtype, mask, ...) the space's own shapes use. */
typedef struct {
    int64_t batch, heads, head_dim;
    int64_t seq_len[KTUNE_ATTENTION_MAX_SEQS];
    int nseq;
} ktune_dense_attention;

/* The flags' values (seq_lens: the lengths separated by commas; 0: not given, the seed's default
 * then: batch 1, 5 heads, head_dim 128) into a. Errors name the flag and the item. */
int ktune_dense_attention_parse(const char *seq_lens, int64_t batch, int64_t heads,
                                int64_t head_dim, ktune_dense_attention *a, ktune_err *err);

#endif
