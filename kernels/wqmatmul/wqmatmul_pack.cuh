/* The packed weight's layout, written and read by the rule that include/ktune/wqmatmul.h states
 * (KTUNE_QWEIGHT_K32), one thread a unit: pack() turns plain b-bit integers into it and
 * dequantize() turns it back into a plain matrix of (q - zero) * scale. Neither shares code with
 * the kernels' loads (wqmatmul_common.cuh): the round trip through both checks the layout that
 * the kernels and these functions each implement. */
#pragma once

#include <algorithm>

#include "wqmatmul_common.cuh"

namespace ktune_wqmatmul_impl {

/* Bit position of value v (0..31) of a unit in its word of the first plane: the word is
 * word_of(v), the bits (b wide, b = 3 taking the low 2 there) start at shift_of(v). */
__host__ __device__ inline int word_of(int v, int b) { return b == 8 ? v / 4 : b == 4 ? v / 8 : v / 16; }

__host__ __device__ inline int shift_of(int v, int b)
{
    if (b == 8)
        return 8 * (v % 4);
    if (b == 4)
        return 4 * (v % 8 / 2) + 16 * (v % 2);
    return 2 * (v % 16 / 2) + 16 * (v % 2); /* 2 bits, and 3 bits' low two */
}

/* b = 3: the third bit of value v in the second plane's word. */
__host__ __device__ inline int high_bit_of(int v) { return v / 2 + 16 * (v % 2); }

__global__ void pack_kernel(const uint8_t *__restrict__ q, uint32_t *__restrict__ packed, int64_t n,
                            int64_t k, int b)
{
    const int64_t units = k / 32, total = n * units;
    const int p0 = b == 3 ? 2 : b, low = b == 3 ? 2 : b;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = e / units, u = e % units;
        const uint8_t *src = q + row * k + 32 * u;
        uint32_t words[8] = {}, high = 0;
        for (int v = 0; v < 32; v++) {
            const uint32_t x = src[v] & ((1u << b) - 1);
            words[word_of(v, b)] |= (x & ((1u << low) - 1)) << shift_of(v, b);
            if (b == 3)
                high |= (x >> 2) << high_bit_of(v);
        }
        for (int i = 0; i < p0; i++)
            packed[e * p0 + i] = words[i];
        if (b == 3)
            packed[total * 2 + e] = high;
    }
}

template <typename T, typename O>
__global__ void dequantize_kernel(const uint32_t *__restrict__ packed, const T *__restrict__ scales,
                                  const uint8_t *__restrict__ zeros, O *__restrict__ out, int64_t n,
                                  int64_t k, int b, int group)
{
    const int64_t units = k / 32, total = n * units, groups = k / group;
    const int p0 = b == 3 ? 2 : b, low = b == 3 ? 2 : b;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = e / units, u = e % units;
        const int64_t gi = row * groups + 32 * u / group;
        const float s = ktune_common::to_float<T>(scales[gi]);
        const int z = zeros ? zeros[gi] & ((1 << b) - 1) : 1 << (b - 1);
        for (int v = 0; v < 32; v++) {
            uint32_t x = packed[e * p0 + word_of(v, b)] >> shift_of(v, b) & ((1u << low) - 1);
            if (b == 3)
                x |= (packed[total * 2 + e] >> high_bit_of(v) & 1) << 2;
            out[row * k + 32 * u + v] = ktune_common::from_float<O>(((float)x - (float)z) * s);
        }
    }
}

inline bool layout_takes(int64_t n, int64_t k, int bits, int layout)
{
    return layout == KTUNE_QWEIGHT_K32 && bits_take(bits) &&
           n >= 1 && k >= 32 && k % 32 == 0;
}

inline unsigned grid_of(int64_t units) { return (unsigned)std::min<int64_t>((units + 255) / 256, 65536); }

inline cudaError_t pack(const uint8_t *q, void *packed, int64_t n, int64_t k, int bits,
                        cudaStream_t s)
{
    pack_kernel<<<grid_of(n * (k / 32)), 256, 0, s>>>(q, (uint32_t *)packed, n, k, bits);
    return cudaGetLastError();
}

/* The plain matrix into out: of the scales' dtype, or (f32) in fp32, unrounded ((q - zero) * scale
 * is exact there: an integer of at most 9 bits times a 16-bit float). */
inline cudaError_t dequantize(const ktune_qweight &w, void *out, int64_t n, int64_t k, int dtype,
                              cudaStream_t s, bool f32 = false)
{
    const unsigned grid = grid_of(n * (k / 32));
    const uint32_t *packed = (const uint32_t *)w.packed;
    if (dtype == KTUNE_F16 && f32)
        dequantize_kernel<<<grid, 256, 0, s>>>(packed, (const __half *)w.scales, w.zeros,
                                               (float *)out, n, k, w.bits, w.group);
    else if (dtype == KTUNE_F16)
        dequantize_kernel<<<grid, 256, 0, s>>>(packed, (const __half *)w.scales, w.zeros,
                                               (__half *)out, n, k, w.bits, w.group);
    else if (f32)
        dequantize_kernel<<<grid, 256, 0, s>>>(packed, (const __nv_bfloat16 *)w.scales, w.zeros,
                                               (float *)out, n, k, w.bits, w.group);
    else
        dequantize_kernel<<<grid, 256, 0, s>>>(packed, (const __nv_bfloat16 *)w.scales, w.zeros,
                                               (__nv_bfloat16 *)out, n, k, w.bits, w.group);
    return cudaGetLastError();
}

} // namespace ktune_wqmatmul_impl
