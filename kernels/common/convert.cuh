/* Element conversions every family's kernels and workers share: to and from fp32 for each element
 * type a key's dtype names (KTUNE_DTYPE_MAP), rounding to nearest even, fp8 saturating to the
 * largest finite value as the tensor cores' conversions do. */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

namespace ktune_common {

template <typename T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}
template <> __device__ __forceinline__ float to_float<int8_t>(int8_t v) { return (float)v; }
template <> __device__ __forceinline__ float to_float<int32_t>(int32_t v) { return (float)v; }
template <> __device__ __forceinline__ float to_float<__nv_fp8_e4m3>(__nv_fp8_e4m3 v)
{
    return (float)v;
}
template <> __device__ __forceinline__ float to_float<__nv_fp8_e5m2>(__nv_fp8_e5m2 v)
{
    return (float)v;
}

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v)
{
    return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}
/* int8: rounded to nearest even, saturated to [-128, 127] (NaN: 0) */
template <> __device__ __forceinline__ int8_t from_float<int8_t>(float v)
{
    return (int8_t)__float2int_rn(fminf(fmaxf(v, -128.f), 127.f));
}
template <> __device__ __forceinline__ __nv_fp8_e4m3 from_float<__nv_fp8_e4m3>(float v)
{
    return __nv_fp8_e4m3(v);
}
template <> __device__ __forceinline__ __nv_fp8_e5m2 from_float<__nv_fp8_e5m2>(float v)
{
    return __nv_fp8_e5m2(v);
}

/* Two 16-bit elements of one 32-bit word (the low one first) as fp32. */
template <typename T> __device__ __forceinline__ float2 pair_to_float2(uint32_t p)
{
    if constexpr (std::is_same<T, __half>::value) {
        __half2 h;
        memcpy(&h, &p, 4);
        return __half22float2(h);
    } else {
        return make_float2(__uint_as_float(p << 16), __uint_as_float(p & 0xffff0000u));
    }
}

} // namespace ktune_common
