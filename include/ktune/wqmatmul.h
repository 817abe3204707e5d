/* ktune wqmatmul: a linear layer whose weight is quantized to 2, 3, 4 or 8 bits in groups along k
 * (weight-only quantization), tuned per (dtype, bits, group, m, n, k). */
#ifndef KTUNE_WQMATMUL_H
#define KTUNE_WQMATMUL_H

#include "ktune/ktune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The packed weight layouts. Every wqmatmul configuration reads KTUNE_QWEIGHT_K32:
 *   each row j of the weight (an output channel) is cut into units of 32 consecutive k, and unit
 *   u of row j is stored at unit index j * (k / 32) + u; a unit is 32 values of b bits in b
 *   32-bit words, ordered so that a mask and a shift give two neighbouring values as the two
 *   halves of a 16-bit pair:
 *     b = 8: word i holds values 4i .. 4i + 3, value 4i + q in byte q;
 *     b = 4: word i holds values 8i .. 8i + 7, value 8i + 2p in bits 4p .. 4p + 3 and
 *            value 8i + 2p + 1 in bits 16 + 4p .. 16 + 4p + 3 (p = 0 .. 3);
 *     b = 2: word i holds values 16i .. 16i + 15, value 16i + 2p in bits 2p, 2p + 1 and
 *            value 16i + 2p + 1 in bits 16 + 2p, 17 + 2p (p = 0 .. 7);
 *     b = 3: the low two bits of every value as b = 2 (2 words a unit) in a first plane of
 *            n * k / 32 units, then the third bit in a second plane of one word a unit: value
 *            2p's in bit p and value 2p + 1's in bit 16 + p (p = 0 .. 15).
 *   The packed weight takes n * k * b / 8 bytes (ktune_qweight_packed_bytes). */
#define KTUNE_QWEIGHT_K32 1

/* A weight quantized in groups of `group` consecutive k: w[j][l] = (q[j][l] - zero) * scale,
 * with scale = scales[j * (k / group) + l / group] and zero = zeros[the same index] (unsigned
 * b-bit integers), or 2^(b - 1) for every group where zeros is NULL (symmetric quantization).
 * scales have the activations' dtype. All on the device. */
typedef struct {
    const void *packed;   /* the layout's bytes, 16-byte aligned (ktune_qweight_pack) */
    const void *scales;   /* n * (k / group) values of the activations' dtype, 2-byte aligned */
    const uint8_t *zeros; /* n * (k / group) zero points, or NULL */
    int bits;             /* 2, 3, 4 or 8 */
    int group;            /* a multiple of 32 that divides k */
    int layout;           /* KTUNE_QWEIGHT_K32 */
} ktune_qweight;

/* The bytes of a packed n x k weight of `bits` bits in `layout`; 0 for arguments the layout does
 * not take (bits other than 2, 3, 4, 8; k not a multiple of 32; n or k below 1). */
size_t ktune_qweight_packed_bytes(int64_t n, int64_t k, int bits, int layout);

/* Packs q (n x k unsigned integers of `bits` bits, one a byte, row-major; values >= 2^bits are
 * taken modulo 2^bits) into `packed` (ktune_qweight_packed_bytes bytes, 16-byte aligned) in
 * `layout`, on stream. Both on the device; they must not overlap.
 * KTUNE_ERROR_INVALID_ARGUMENT for a layout, bits or k the layout does not take. */
ktune_status ktune_qweight_pack(const uint8_t *q, void *packed, int64_t n, int64_t k, int bits,
                                int layout, cudaStream_t stream);

/* The weight w describes as an n x k matrix of dtype (KTUNE_BF16 or KTUNE_F16), each value
 * (q - zero) * scale computed in fp32 and rounded once, into out (device memory, row-major), on
 * stream: what the kernels multiply by (but where a kernel of m <= 32 with fp32 sums meets groups
 * of a multiple of 128: it multiplies by q - zero and scales the fp32 sums of each 128 k), for
 * checks and for layers that want the plain matrix. */
ktune_status ktune_qweight_dequantize(const ktune_qweight *w, void *out, int64_t n, int64_t k,
                                      ktune_dtype dtype, cudaStream_t stream);

/* A linear layer with a quantized weight: c[i][j] = sum_l a[i][l] * w[j][l], a m x k and c m x n
 * of dtype (KTUNE_BF16 or KTUNE_F16), row-major and contiguous; fp32 sums, the weight dequantized
 * in registers (no dequantized copy of it in memory).
 *
 * Rules (KTUNE_ERROR_INVALID_ARGUMENT otherwise): m, n, k >= 1; bits 2, 3, 4 or 8; group a
 * multiple of 32 dividing k (so k % 32 == 0); layout KTUNE_QWEIGHT_K32; a and w->packed 16-byte
 * aligned, c and w->scales 2-byte aligned. c must not overlap a or the weight. */
ktune_status ktune_wqmatmul(const void *a, const ktune_qweight *w, void *c, int64_t m, int64_t n,
                            int64_t k, ktune_dtype dtype, cudaStream_t stream);

/* The configuration ktune_wqmatmul would launch for this shape on the current device. */
ktune_status ktune_wqmatmul_explain(int64_t m, int64_t n, int64_t k, int bits, int group,
                                    ktune_dtype dtype, ktune_choice *choice);

#ifdef __cplusplus
}
#endif

#endif
