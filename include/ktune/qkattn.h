/* ktune qkattn: attention whose Q K^T runs on int8 tensor cores, Q and K quantized per block of
 * tokens inside the call, tuned per (dtype, batch, heads, seq_len, head_dim, mask): mask 1 for
 * none, 2 for causal. */
#ifndef KTUNE_QKATTN_H
#define KTUNE_QKATTN_H

#include "ktune/ktune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The finest quantization block the configurations use, in tokens: a Q or K scale a block of
 * at least this many tokens (the workspace holds that many scales). */
#define KTUNE_QKATTN_MIN_QUANT_BLOCK 16

/* One attention: out = softmax(scale * q k^T) v for every (batch, head), with q, k, v and out
 * row-major and contiguous, batch x heads x seq_len x head_dim, of dtype KTUNE_BF16 or
 * KTUNE_F16, on the device. causal: query i attends to keys 0 .. i only (queries and keys are
 * the same seq_len tokens); else to all of them.
 *
 * How it is computed (a call is several launches on the stream, with no host synchronization,
 * so it can be captured in a CUDA graph):
 *   1. K is smoothed: each (batch, head)'s per-channel mean over the tokens is subtracted (the
 *      softmax of a row does not change when every score of it moves by q . mean);
 *   2. channels are balanced: channel c of the smoothed K is divided, and channel c of Q
 *      multiplied, by a_c = sqrt(K's range in c / Q's largest |q| in c) (q . k is unchanged; a
 *      few channels of large keys no longer set the scale of every other channel's keys);
 *   3. Q and K are quantized to int8 symmetrically, one fp32 scale (max |x| / 127) a block of
 *      q_gran queries or k_gran keys of a (batch, head): the configuration's quantization
 *      granularity;
 *   4. S = Q_int8 K_int8^T in exact int32 on the tensor cores (mma.sync m16n8k32, or wgmma's
 *      k32 int8 multiplies where the build has sm_90a code and the table chooses them), scaled
 *      back by the two blocks' scales; softmax in fp32 (an online softmax over blocks of keys);
 *      P rounded to the inputs' dtype for P V in fp32 accumulators.
 * The result is that of fp32 attention within the quantization's error: against it, cosine
 * similarity >= 0.999 and relative L1 error <= 0.03 on uniform inputs and on K with a few
 * channels 50 times larger than the others (the sweep's check of every configuration).
 *
 * workspace: at least ktune_qkattn_workspace_bytes(batch, heads, seq_len, head_dim) bytes,
 * 256-byte aligned (the int8 copies of Q and K, their scales, the channels' statistics, and what
 * the stream configurations' blocks hand each other); its contents need no initialization. */
typedef struct {
    const void *q;
    const void *k;
    const void *v;
    void *out;
    void *workspace;
    size_t workspace_bytes;
    int64_t batch, heads, seq_len, head_dim;
    int causal;
    float scale;
    ktune_dtype dtype;
} ktune_qkattn_problem;

/* The workspace a problem of these sizes needs: two bytes a q and k element, plus
 * 8 * batch * heads * (seq_len / KTUNE_QKATTN_MIN_QUANT_BLOCK + 1) bytes of scales,
 * 520 * batch * heads * head_dim of the channels' statistics, 4 * batch * heads *
 * (seq_len / 64 + 2) of tile counters and 1024 * (head_dim + 8) * min(160, batch * heads * c^2),
 * c = ceil(seq_len / 64), of the stream configurations' partial results (at most about 22 MB at
 * head_dim 128), each part rounded up to 256 bytes; 0 where a size is below 1 or the total does
 * not fit a size_t. */
size_t ktune_qkattn_workspace_bytes(int64_t batch, int64_t heads, int64_t seq_len,
                                    int64_t head_dim);

/* Rules (KTUNE_ERROR_INVALID_ARGUMENT otherwise): batch, heads and seq_len >= 1, head_dim 64 or
 * 128, batch * heads <= 65535, seq_len < 2^30, scale finite and > 0, causal 0 or 1,
 * q, k, v and out 16-byte aligned and non-NULL, the workspace as above. out must not overlap the
 * inputs or the workspace. */
ktune_status ktune_qkattn(const ktune_qkattn_problem *problem, cudaStream_t stream);

/* The configuration ktune_qkattn would launch for this problem on the current device (its key:
 * dtype, batch, heads, seq_len, head_dim, mask = causal + 1). */
ktune_status ktune_qkattn_explain(const ktune_qkattn_problem *problem, ktune_choice *choice);

#ifdef __cplusplus
}
#endif

#endif
