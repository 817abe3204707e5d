/* The GPU tests' 16-bit floating-point values on the host: a float rounded to f16 or bf16 as its
 * bits, and bits as the float they stand for. */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "ktune/ktune.h"

static inline uint16_t bits16_of(float v, int dtype)
{
    if (dtype == KTUNE_F16)
        return __half_raw(__float2half_rn(v)).x;
    return __nv_bfloat16_raw(__float2bfloat16_rn(v)).x;
}

static inline float bits16_value(uint16_t b, int dtype)
{
    if (dtype == KTUNE_F16) {
        __half_raw r;
        r.x = b;
        return __half2float(__half(r));
    }
    __nv_bfloat16_raw r;
    r.x = b;
    return __bfloat162float(__nv_bfloat16(r));
}
