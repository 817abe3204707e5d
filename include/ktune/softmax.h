/* ktune softmax: row softmax, tuned per (dtype, rows, cols). */
#ifndef KTUNE_SOFTMAX_H
#define KTUNE_SOFTMAX_H

#include "ktune/ktune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Row softmax: y[r, c] = exp(x[r, c] - max_c x[r, :]) / sum_c exp(...), fp32 arithmetic.
 * x and y are rows x cols, row-major, contiguous, of the same dtype; x == y is allowed. Long rows
 * may run on a cooperative grid spread over every multiprocessor (the `split` and `resident`
 * variants), which starts once all its blocks fit at once; `resident` fills the shared memory of
 * every multiprocessor, so that kernels of other streams do not run beside it. */
ktune_status ktune_softmax(const void *x, void *y, int64_t rows, int64_t cols, ktune_dtype dtype,
                           cudaStream_t stream);

/* The configuration ktune_softmax would launch for this shape on the current device. */
ktune_status ktune_softmax_explain(int64_t rows, int64_t cols, ktune_dtype dtype,
                                   ktune_choice *choice);

#ifdef __cplusplus
}
#endif

#endif
