/* ktune matmul: a linear layer, tuned per (dtype, m, n, k). */
#ifndef KTUNE_MATMUL_H
#define KTUNE_MATMUL_H

#include "ktune/ktune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A linear layer: c[i, j] = sum_l a[i, l] * w[j, l], fp32 accumulation. a is m x k, w is n x k
 * (the weight as stored by PyTorch's nn.Linear), c is m x n; all row-major, contiguous, of one
 * dtype, f16 or bf16 (f32 is KTUNE_ERROR_INVALID_ARGUMENT). c must not overlap a or w. */
ktune_status ktune_matmul(const void *a, const void *w, void *c, int64_t m, int64_t n, int64_t k,
                          ktune_dtype dtype, cudaStream_t stream);

/* The configuration ktune_matmul would launch for this shape on the current device. */
ktune_status ktune_matmul_explain(int64_t m, int64_t n, int64_t k, ktune_dtype dtype,
                                  ktune_choice *choice);

#ifdef __cplusplus
}
#endif

#endif
