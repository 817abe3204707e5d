/* What the workers of families keyed (dtype, m, n, k) as a GEMM share: the floating-point (or
 * integer) operations of one launch and the key whose vendor throughput stands for the device's
 * compute ceiling (a large square problem of the key's dtype). */
#pragma once

#include <stdint.h>

namespace ktune_worker_gemm {

inline double flops(const int64_t *key) { return 2.0 * (double)key[1] * key[2] * key[3]; }

inline void ceiling_key(const int64_t *key, int64_t *out)
{
    out[0] = key[0];
    out[1] = out[2] = out[3] = 8192;
}

} // namespace ktune_worker_gemm
