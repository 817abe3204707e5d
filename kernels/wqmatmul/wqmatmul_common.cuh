/* What the wqmatmul kernels share: the packed weight as the kernels address it (KTUNE_QWEIGHT_K32,
 * include/ktune/wqmatmul.h), a unit's loads and its dequantization into 16-bit pairs, and the
 * launchers' dispatch on the activations' dtype and the bit width.
 *
 * A lane dequantizes a whole unit (32 consecutive k of one row) into 16 registers, pair p holding
 * values 2p and 2p + 1: the kernels give a lane the same 32 k of the activations, so that a
 * tensor-core k16 step of lane t multiplies its values 4j .. 4j + 3 (k permuted the same way in
 * both operands, which leaves the sum unchanged). A value is (q - zero) * scale: q - zero exactly
 * (q put in the mantissa of 1024.0 for f16 or 128.0 for bf16, where the integers are exact, then
 * 1024 + zero or 128 + zero subtracted), then one rounding of the product by the scale. bf16 with
 * 8 bits, whose values leave bf16's exact integers, goes through fp32 the same way (8388608.0). */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "convert.cuh"
#include "ktune/wqmatmul.h"

namespace ktune_wqmatmul_impl {

/* The words of a unit of B bits in the first plane (P0) and the second (P1, 3 bits only). */
template <int B> struct unit_words {
    static_assert(B == 2 || B == 3 || B == 4 || B == 8, "2, 3, 4 or 8 bits");
    static constexpr int P0 = B == 3 ? 2 : B;
    static constexpr int P1 = B == 3 ? 1 : 0;
};

/* The packed weight as a kernel reads it: the planes, the scales and zero points, and the sizes
 * that index them. */
template <typename T> struct qweight_view {
    const uint32_t *plane0; /* n * units units of P0 words */
    const uint32_t *plane1; /* n * units units of P1 words (3 bits), else null */
    const T *scales;        /* n * groups */
    const uint8_t *zeros;   /* n * groups, or null: 2^(B - 1) */
    int64_t units;          /* units a row: k / 32 */
    int group_units;        /* units a group: group / 32 */
    int groups;             /* groups a row: k / group */
};

template <typename T> qweight_view<T> view_of(const ktune_qweight &w, int64_t n, int64_t k)
{
    qweight_view<T> v;
    v.plane0 = static_cast<const uint32_t *>(w.packed);
    v.plane1 = w.bits == 3 ? v.plane0 + n * (k / 32) * 2 : nullptr;
    v.scales = static_cast<const T *>(w.scales);
    v.zeros = w.zeros;
    v.units = k / 32;
    v.group_units = w.group / 32;
    v.groups = (int)(k / w.group);
    return v;
}

/* The family's rules on a quantized weight: 2, 3, 4 or 8 bits; groups of a multiple of 32 that
 * divide k (so that the layout's 32-wide units tile every row and every group). */
__host__ __device__ inline bool bits_take(int bits) { return bits == 2 || bits == 3 || bits == 4 || bits == 8; }

__host__ __device__ inline bool weight_takes(int64_t k, int bits, int group)
{
    return bits_take(bits) && group >= 32 && group % 32 == 0 && k >= group && k % group == 0;
}

/* Loads that stream past L1 (the weight is read once), 4, 8 and 16 bytes. */
__device__ __forceinline__ uint32_t stream_u32(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];\n" : "=r"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ uint2 stream_u64(const uint32_t *p)
{
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];\n"
                 : "=r"(v.x), "=r"(v.y)
                 : "l"(p));
    return v;
}

__device__ __forceinline__ uint4 stream_u128(const uint32_t *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* The B words of unit u of row `row` (both inside the matrix), streamed from global memory. */
template <int B, typename T>
__device__ __forceinline__ void load_unit(const qweight_view<T> &w, int64_t row, int64_t u,
                                          uint32_t (&q)[B])
{
    const int64_t at = row * w.units + u;
    constexpr int P0 = unit_words<B>::P0;
    const uint32_t *p = w.plane0 + at * P0;
    if constexpr (P0 == 2) {
        const uint2 v = stream_u64(p);
        q[0] = v.x, q[1] = v.y;
    } else {
#pragma unroll
        for (int i = 0; i < P0; i += 4) {
            const uint4 v = stream_u128(p + i);
            q[i] = v.x, q[i + 1] = v.y, q[i + 2] = v.z, q[i + 3] = v.w;
        }
    }
    if constexpr (B == 3)
        q[2] = stream_u32(w.plane1 + at);
}

/* A unit's scale and zero point as dequant_unit takes them (scale_of makes them from what
 * load_scale loaded): the scale as a pair and as fp32, and the pair to subtract from the biased
 * values (1024 + zero for f16, 128 + zero for bf16 below 8 bits; for bf16 with 8 bits the biased
 * zero point in fp32, zf). */
template <typename T> struct unit_scale {
    uint32_t s2, z2;
    float s, zf;
};

template <typename T> __device__ __forceinline__ uint32_t pair_bits(T x, T y)
{
    uint32_t r;
    const T v[2] = {x, y};
    memcpy(&r, v, 4);
    return r;
}

/* The scale and zero point of unit u of row `row` as loaded (zero 2^(B - 1) without zero points):
 * loaded with the unit's weight, so that their latency is hidden with its. */
template <typename T> struct raw_scale {
    T s;
    int z;
};

template <int B, typename T>
__device__ __forceinline__ raw_scale<T> load_scale(const qweight_view<T> &w, int64_t row, int64_t u)
{
    const int64_t g = row * w.groups + u / w.group_units;
    return {w.scales[g], w.zeros ? w.zeros[g] & ((1 << B) - 1) : 1 << (B - 1)};
}

template <typename T> __device__ __forceinline__ unit_scale<T> scale_of(const raw_scale<T> &raw)
{
    unit_scale<T> r;
    r.s2 = pair_bits<T>(raw.s, raw.s);
    r.s = ktune_common::to_float<T>(raw.s);
    if constexpr (std::is_same<T, __half>::value) {
        const __half zb = __float2half_rn(1024.f + (float)raw.z);
        r.z2 = pair_bits<T>(zb, zb);
        r.zf = 0;
    } else {
        const __nv_bfloat16 zb = __float2bfloat16_rn(128.f + (float)raw.z);
        r.z2 = pair_bits<T>(zb, zb);
        r.zf = 8388608.f + (float)raw.z;
    }
    return r;
}

/* (biased - z2) * s2 on two 16-bit values. */
template <typename T> __device__ __forceinline__ uint32_t sub_mul(uint32_t biased, uint32_t z2, uint32_t s2)
{
    uint32_t r;
    if constexpr (std::is_same<T, __half>::value) {
        __half2 x, z, s;
        memcpy(&x, &biased, 4), memcpy(&z, &z2, 4), memcpy(&s, &s2, 4);
        const __half2 v = __hmul2(__hsub2(x, z), s);
        memcpy(&r, &v, 4);
    } else {
        __nv_bfloat162 x, z, s;
        memcpy(&x, &biased, 4), memcpy(&z, &z2, 4), memcpy(&s, &s2, 4);
        const __nv_bfloat162 v = __hmul2(__hsub2(x, z), s);
        memcpy(&r, &v, 4);
    }
    return r;
}

/* The 16 pairs of a unit's 32 values, dequantized. */
template <int B, typename T>
__device__ __forceinline__ void dequant_unit(const uint32_t (&q)[B], const unit_scale<T> &sc,
                                             uint32_t (&out)[16])
{
    constexpr uint32_t magic = std::is_same<T, __half>::value ? 0x64006400u : 0x43004300u;
    if constexpr (B == 8 && std::is_same<T, __nv_bfloat16>::value) {
        /* through fp32: a byte in the mantissa of 2^23 */
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const float x = __uint_as_float(__byte_perm(q[i], 0x4bu, 0x4550 + 2 * h)) - sc.zf;
                const float y = __uint_as_float(__byte_perm(q[i], 0x4bu, 0x4551 + 2 * h)) - sc.zf;
                const __nv_bfloat162 v = __floats2bfloat162_rn(x * sc.s, y * sc.s);
                memcpy(&out[2 * i + h], &v, 4);
            }
    } else if constexpr (B == 8) {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            out[2 * i] = sub_mul<T>(__byte_perm(q[i], 0x64646464u, 0x4140), sc.z2, sc.s2);
            out[2 * i + 1] = sub_mul<T>(__byte_perm(q[i], 0x64646464u, 0x4342), sc.z2, sc.s2);
        }
    } else if constexpr (B == 4) {
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int p = 0; p < 4; p++)
                out[4 * i + p] = sub_mul<T>(((q[i] >> (4 * p)) & 0x000f000fu) | magic, sc.z2, sc.s2);
    } else if constexpr (B == 2) {
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int p = 0; p < 8; p++)
                out[8 * i + p] = sub_mul<T>(((q[i] >> (2 * p)) & 0x00030003u) | magic, sc.z2, sc.s2);
    } else {
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int p = 0; p < 8; p++) {
                const int pair = 8 * i + p;
                const uint32_t hi = ((q[2] >> pair) & 0x00010001u) << 2;
                out[pair] = sub_mul<T>(((q[i] >> (2 * p)) & 0x00030003u) | hi | magic, sc.z2, sc.s2);
            }
    }
}

/* A quarter of a unit, dequantized: pairs t, t + 4, t + 8 and t + 12 (pair p holding values 2p
 * and 2p + 1, as in dequant_unit, with the same arithmetic) into out[0..3], for t of 0..3. Lane t
 * of a quad so holds values 2t, 2t + 1, 2t + 8 and 2t + 9 of each 16 of the unit, its part of an
 * m16n8k16 A fragment with k in order. s2 and z2 are unit_scale's; for bf16 with 8 bits z2 holds
 * the bits of unit_scale's zf instead (the fp32 path subtracts that). */
template <int B, typename T>
__device__ __forceinline__ void dequant_quarter(const uint32_t (&q)[B], uint32_t s2, uint32_t z2,
                                                int t, uint32_t (&out)[4])
{
    constexpr uint32_t magic = std::is_same<T, __half>::value ? 0x64006400u : 0x43004300u;
    if constexpr (B == 8 && std::is_same<T, __nv_bfloat16>::value) {
        const float s = __uint_as_float(s2 << 16), zf = __uint_as_float(z2);
        const uint32_t sel = 0x4550u + 2 * (t & 1);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint32_t word = (t >> 1) ? q[2 * j + 1] : q[2 * j];
            const float x = __uint_as_float(__byte_perm(word, 0x4bu, sel)) - zf;
            const float y = __uint_as_float(__byte_perm(word, 0x4bu, sel + 1)) - zf;
            const __nv_bfloat162 v = __floats2bfloat162_rn(x * s, y * s);
            memcpy(&out[j], &v, 4);
        }
    } else if constexpr (B == 8) {
        const uint32_t sel = (t & 1) ? 0x4342u : 0x4140u;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint32_t word = (t >> 1) ? q[2 * j + 1] : q[2 * j];
            out[j] = sub_mul<T>(__byte_perm(word, 0x64646464u, sel), z2, s2);
        }
    } else if constexpr (B == 4) {
#pragma unroll
        for (int j = 0; j < 4; j++)
            out[j] = sub_mul<T>(((q[j] >> (4 * t)) & 0x000f000fu) | magic, z2, s2);
    } else {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int p = t + 4 * (j & 1); /* pair t + 4 j is pair p of word j / 2 */
            uint32_t biased = ((q[j >> 1] >> (2 * p)) & 0x00030003u) | magic;
            if constexpr (B == 3)
                biased |= ((q[2] >> (t + 4 * j)) & 0x00010001u) << 2;
            out[j] = sub_mul<T>(biased, z2, s2);
        }
    }
}

/* Runs Launcher::run<T, B> for the activations' dtype and the weight's bits. */
template <typename Launcher>
cudaError_t dispatch(const void *a, const ktune_qweight *w, void *c, int64_t m, int64_t n, int64_t k,
                     int dtype, cudaStream_t s)
{
    if (m < 1 || n < 1 || k < 1 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || !w ||
        w->layout != KTUNE_QWEIGHT_K32 || !weight_takes(k, w->bits, w->group) ||
        (uintptr_t)a % 16 != 0 || (uintptr_t)w->packed % 16 != 0 || (uintptr_t)c % 2 != 0 ||
        (uintptr_t)w->scales % 2 != 0)
        return cudaErrorInvalidValue;
    const bool f16 = dtype == KTUNE_F16;
    if (!f16 && dtype != KTUNE_BF16)
        return cudaErrorInvalidValue;
#define KTUNE_WQ_BITS(b)                                                                           \
    case b:                                                                                        \
        return f16 ? Launcher::template run<__half, b>(a, *w, c, m, n, k, s)                       \
                   : Launcher::template run<__nv_bfloat16, b>(a, *w, c, m, n, k, s);
    switch (w->bits) {
        KTUNE_WQ_BITS(2)
        KTUNE_WQ_BITS(3)
        KTUNE_WQ_BITS(4)
        KTUNE_WQ_BITS(8)
    default:
        return cudaErrorInvalidValue;
    }
#undef KTUNE_WQ_BITS
}

} // namespace ktune_wqmatmul_impl
