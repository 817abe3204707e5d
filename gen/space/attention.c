#include "attention.h"
#include "linear.h"

int ktune_attention_parse(int64_t page_size, int64_t head_dim, int64_t q_heads, int64_t kv_heads,
                          int64_t max_len, int64_t tp, ktune_attention_shapes *a, ktune_err *err)
{
    a->page_size = page_size > 0 ? page_size : 128;
    a->head_dim = head_dim > 0 ? head_dim : 128;
    a->max_len = max_len > 0 ? max_len : 1024;
    q_heads = q_heads > 0 ? q_heads : 128;
    kv_heads = kv_heads > 0 ? kv_heads : 1;
    tp = tp > 0 ? tp : 1;
    if (a->max_len % a->page_size != 0)
        return ktune_fail(err, "--max-model-len %lld is not a multiple of --page-size %lld",
                          (long long)a->max_len, (long long)a->page_size);
    if (q_heads % kv_heads != 0)
        return ktune_fail(err, "--num-q-heads %lld is not a multiple of --num-kv-heads %lld",
                          (long long)q_heads, (long long)kv_heads);
    if (q_heads % tp != 0)
        return ktune_fail(err, "--tp-size %lld does not divide --num-q-heads %lld", (long long)tp,
                          (long long)q_heads);
    if (kv_heads % tp != 0 && tp % kv_heads != 0)
        return ktune_fail(err,
                          "--tp-size %lld and --num-kv-heads %lld: neither divides the other "
                          "(each GPU holds kv_heads / tp KV heads, or one of them replicated)",
                          (long long)tp, (long long)kv_heads);
    a->q_heads = q_heads / tp;
    a->kv_heads = kv_heads % tp == 0 ? kv_heads / tp : 1;
    return 0;
}

int ktune_dense_attention_parse(const char *seq_lens, int64_t batch, int64_t heads,
                                int64_t head_dim, ktune_dense_attention *a, ktune_err *err)
{
    a->batch = batch > 0 ? batch : 1;
    a->heads = heads > 0 ? heads : 5;
    a->head_dim = head_dim > 0 ? head_dim : 128;
    return ktune_sizes_parse("--seq-len", seq_lens, a->seq_len, KTUNE_ATTENTION_MAX_SEQS,
                             &a->nseq, err);
}
