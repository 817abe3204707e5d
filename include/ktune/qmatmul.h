/* ktune qmatmul: a quantized linear layer (w8a8, int8 or fp8), tuned per (dtype, m, n, k). */
#ifndef KTUNE_QMATMUL_H
#define KTUNE_QMATMUL_H

#include "ktune/ktune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the epilogue applies to each sum before it is stored: its row's scale of a (a_scale[i],
 * or a_scale[0] for the whole tensor), its column's scale of w (w_scale[j], or w_scale[0]) and
 * bias[j] where bias is not NULL. Scales are fp32 on the device; the bias, on the device too, has
 * the output's dtype, KTUNE_BF16 or KTUNE_F16. */
typedef struct {
    const float *a_scale;    /* m floats (per token), or one (per tensor) */
    const float *w_scale;    /* n floats (per output channel), or one (per tensor) */
    int a_scale_per_token;   /* 1: a_scale holds m floats; 0: one */
    int w_scale_per_channel; /* 1: w_scale holds n floats; 0: one */
    const void *bias;        /* n values of out_dtype, or NULL */
    ktune_dtype out_dtype;   /* KTUNE_BF16 or KTUNE_F16 */
} ktune_qmatmul_epilogue;

/* A quantized linear layer: c[i, j] = (sum_l a[i, l] * w[j, l]) * a_scale * w_scale + bias[j].
 * a is m x k, w is n x k (the weight as stored by PyTorch's nn.Linear), both of qdtype:
 * KTUNE_INT8 (int32 sums, exact) or KTUNE_FP8_E4M3 (fp32 sums; compute capability 8.9 on);
 * c is m x n of the epilogue's out_dtype. All row-major and contiguous.
 *
 * Alignment rules (KTUNE_ERROR_INVALID_ARGUMENT otherwise): k % 16 == 0, a and w 16-byte
 * aligned, c 2-byte aligned. c must not overlap a, w, the scales or the bias. The epilogue is
 * read before the call returns; the scales and bias when the kernel runs. */
ktune_status ktune_qmatmul(const void *a, const void *w, void *c, int64_t m, int64_t n, int64_t k,
                           ktune_dtype qdtype, const ktune_qmatmul_epilogue *epilogue,
                           cudaStream_t stream);

/* The configuration ktune_qmatmul would launch for this shape on the current device. */
ktune_status ktune_qmatmul_explain(int64_t m, int64_t n, int64_t k, ktune_dtype qdtype,
                                   ktune_choice *choice);

#ifdef __cplusplus
}
#endif

#endif
