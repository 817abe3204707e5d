/* ktune moe: an MoE layer's grouped GEMM, every expert in one launch, tuned per
 * (dtype, rows, n, k, groups). */
#ifndef KTUNE_MOE_H
#define KTUNE_MOE_H

#include "ktune/ktune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most groups (experts on one GPU) a call takes. */
#define KTUNE_MOE_MAX_GROUPS 1024

/* The workspace a call uses, in bytes: none. */
#define KTUNE_MOE_WORKSPACE_BYTES 0

/* An MoE layer's grouped GEMM: c[r][j] = sum_l a[r][l] * w[g][j][l] for every row r of group g,
 * offsets[g] <= r < offsets[g + 1]. a is rows x k (the routed token rows, sorted by expert), w is
 * groups x n x k (each expert's weight as PyTorch's nn.Linear stores it), c is rows x n; all
 * row-major and contiguous, of dtype KTUNE_BF16 or KTUNE_F16, with fp32 sums.
 *
 * offsets: groups + 1 int32 on the device, nondecreasing from offsets[0] = 0 to
 * offsets[groups] = rows. The kernel reads them: the call neither synchronizes nor reads device
 * memory on the host, so it can be captured in a CUDA graph. Empty groups cost nothing and their
 * experts' weights are not read. Offsets outside that contract give unspecified values in c but
 * never an access outside a, w and c (they are clamped to [0, rows] and made nondecreasing).
 *
 * Rules (KTUNE_ERROR_INVALID_ARGUMENT otherwise): rows >= 0 (0: nothing to do), n, k >= 1,
 * 1 <= groups <= KTUNE_MOE_MAX_GROUPS, k % 8 == 0, a and w 16-byte aligned, c 2-byte aligned,
 * groups * n < 2^31. c must not overlap a, w or offsets. */
ktune_status ktune_moe(const void *a, const void *w, const int32_t *offsets, void *c, int64_t rows,
                       int64_t n, int64_t k, int64_t groups, ktune_dtype dtype, cudaStream_t stream);

/* The configuration ktune_moe would launch for this shape on the current device. */
ktune_status ktune_moe_explain(int64_t rows, int64_t n, int64_t k, int64_t groups,
                               ktune_dtype dtype, ktune_choice *choice);

#ifdef __cplusplus
}
#endif

#endif
