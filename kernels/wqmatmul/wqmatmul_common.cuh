/* What the wqmatmul kernels share: the packed weight as the kernels address it (KTUNE_QWEIGHT_K32,
 * include/ktune/wqmatmul.h), a unit's loads and its dequantization into 16-bit pairs (the
 * launchers' dispatch on the activations' dtype and the bit width: wqmatmul_instance.cuh).
 *
 * A lane dequantizes a whole unit (32 consecutive k of one row) into 16 registers, pair p holding
 * values 2p and 2p + 1: the kernels give a lane the same 32 k of the activations, so that a
 * tensor-core k16 step of lane t multiplies its values 4j .. 4j + 3 (k permuted the same way in
 * both operands, which leaves the sum unchanged). A value is (q - zero) * scale: q - zero exactly,
 * then one rounding of the product by the scale (or, for kernels that scale a group's sums after
 * the multiply, q - zero alone). q - zero is made without shifting each field down: the field is
 * masked where it lies (f16's 10 mantissa bits hold fields up to bit 9, bf16's 7 up to bit 6; the
 * word is shifted once for the fields beyond), put in the mantissa of 1024.0 (f16) or 128.0 (bf16)
 * with the mask, where the integers are exact, and one fma by 2^-offset less (the magic number
 * 2^-offset + zero) gives q - zero exactly. bf16 with 8 bits, whose values leave bf16's exact
 * integers, goes through fp32: the byte in the mantissa of 32768.0 (2^15 + q), and one fma by the
 * scale less (2^15 + zero) * scale gives (q - zero) * scale exactly (the products have 16 + 8
 * significant bits, exact in fp32), rounded once to bf16. */
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
    uint32_t group_mul;     /* u / group_units = u * group_mul >> group_shift (group_of) */
    int group_shift;
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
    /* division by a constant d for dividends below 2^31 (Granlund and Montgomery):
     * l = ceil(log2 d), shift 31 + l, multiplier ceil(2^shift / d) (below 2^32) */
    int l = 0;
    while ((1 << l) < v.group_units)
        l++;
    v.group_shift = 31 + l;
    v.group_mul = (uint32_t)(((1ull << v.group_shift) + v.group_units - 1) / v.group_units);
    return v;
}

/* The group of unit u (0 <= u < 2^31) of a row: a multiply and a shift, not a division. */
template <typename T> __device__ __forceinline__ int group_of(const qweight_view<T> &w, int u)
{
    return (int)(((uint64_t)(uint32_t)u * w.group_mul) >> w.group_shift);
}

/* One row of the packed weight: where its planes' units and its scales start (made once a row, so
 * that a unit's loads add only its offset; its zero points lie at its scales' offset from theirs,
 * made from that when used). */
template <typename T> struct qweight_row {
    const uint32_t *plane0, *plane1; /* plane1: 3 bits only */
    const T *scales;
};

template <int B, typename T>
__device__ __forceinline__ qweight_row<T> row_of(const qweight_view<T> &w, int64_t row)
{
    return {w.plane0 + row * w.units * unit_words<B>::P0,
            B == 3 ? w.plane1 + row * w.units : nullptr, w.scales + row * w.groups};
}

/* The family's rules on a quantized weight: 2, 3, 4 or 8 bits; groups of a multiple of 32 that
 * divide k (so that the layout's 32-wide units tile every row and every group). */
__host__ __device__ inline bool bits_take(int bits) { return bits == 2 || bits == 3 || bits == 4 || bits == 8; }

__host__ __device__ inline bool weight_takes(int64_t k, int bits, int group)
{
    return bits_take(bits) && group >= 32 && group % 32 == 0 && k >= group && k % group == 0;
}

/* Whether the small-m kernels with fp32 sums multiply by q - zero and scale the sums of each 128 k
 * (POST in wqmatmul_small.cuh and wqmatmul_ring.cuh): where every 128 k of a row share one scale.
 * The worker checks such keys against the unrounded weight too. */
__host__ __device__ inline bool slab_sums_scaled(int group) { return group % 128 == 0; }

/* Loads that stream past L1 (the weight is read once), 4, 8 and 16 bytes, asking L2 to fetch the
 * whole 256-byte block around each from memory: a warp's load takes 8 to 64 bytes of a row, and
 * the next of that row (the block's next warps, its next slab) lie in the same block. */
__device__ __forceinline__ uint32_t stream_u32(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.u32 %0, [%1];\n" : "=r"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ uint2 stream_u64(const uint32_t *p)
{
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v2.u32 {%0,%1}, [%2];\n"
                 : "=r"(v.x), "=r"(v.y)
                 : "l"(p));
    return v;
}

__device__ __forceinline__ uint4 stream_u128(const uint32_t *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* The B words of unit u of a row (inside the matrix), streamed from global memory. */
template <int B, typename T>
__device__ __forceinline__ void load_unit(const qweight_view<T> &w, const qweight_row<T> &r, int u,
                                          uint32_t (&q)[B])
{
    constexpr int P0 = unit_words<B>::P0;
    const uint32_t *p = r.plane0 + u * P0;
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
        q[2] = stream_u32(r.plane1 + u);
}

/* The magic number's pair (1024.0 for f16, 128.0 for bf16) and its mantissa's width. */
template <typename T> struct magic_of {
    static constexpr bool F16 = std::is_same<T, __half>::value;
    static constexpr uint32_t PAIR = F16 ? 0x64006400u : 0x43004300u;
    static constexpr int VALUE = F16 ? 1024 : 128, MANTISSA = F16 ? 10 : 7;
};

/* A unit's scale and zero point as dequant_unit takes them (scale_of makes them from what
 * load_scale loaded): the scale as a pair and as fp32, and the pair to subtract from the biased
 * values (1024 + zero for f16, 128 + zero for bf16 below 8 bits); for bf16 with 8 bits the biased
 * zero point in fp32, zf = 2^15 + zero, and -zf * scale, zs (both exact). */
template <typename T> struct unit_scale {
    uint32_t s2, z2;
    float s, zf, zs;
};

template <typename T> __device__ __forceinline__ uint32_t pair_bits(T x, T y)
{
    uint32_t r;
    const T v[2] = {x, y};
    memcpy(&r, v, 4);
    return r;
}

/* The scale and zero point of unit u of a row as loaded (zero 2^(B - 1) without zero points):
 * loaded with the unit's weight, so that their latency is hidden with its. */
template <typename T> struct raw_scale {
    T s;
    int z;
};

template <int B, typename T>
__device__ __forceinline__ raw_scale<T> load_scale(const qweight_view<T> &w,
                                                  const qweight_row<T> &r, int u)
{
    const int g = group_of(w, u);
    return {r.scales[g],
            w.zeros ? w.zeros[r.scales - w.scales + g] & ((1 << B) - 1) : 1 << (B - 1)};
}

/* Made with integer operations: magic + zero is the magic's bits or'ed with the zero point, which
 * lies below 2^10 (f16) or 2^7 (bf16 below 8 bits; bf16's 8-bit zero points go through zf, 2^15 +
 * zero, the zero point in bits 8-15 of 32768.0's mantissa, whose last bit weighs 2^-8). */
template <typename T> __device__ __forceinline__ unit_scale<T> scale_of(const raw_scale<T> &raw)
{
    unit_scale<T> r;
    r.s2 = pair_bits<T>(raw.s, raw.s);
    r.s = ktune_common::to_float<T>(raw.s);
    r.z2 = ((magic_of<T>::PAIR & 0xffffu) | (uint32_t)raw.z) * 0x10001u;
    r.zf = __uint_as_float(0x47000000u | (uint32_t)raw.z << 8);
    r.zs = -r.zf * r.s;
    return r;
}

/* The bits of a 16-bit pair whose halves both hold v, for v = 2^-e (pow2_pair) or for an integer
 * 0 <= v < 2048 (f16) or < 256 (bf16) (int_pair): exact in either type. */
template <typename T> __host__ __device__ constexpr uint32_t pow2_pair(int e)
{
    return (std::is_same<T, __half>::value ? (uint32_t)(15 - e) << 10 : (uint32_t)(127 - e) << 7) *
           0x10001u;
}

template <typename T> __host__ __device__ constexpr uint32_t int_pair(int v)
{
    int e = 0;
    while (v >> (e + 1))
        e++;
    const uint32_t bits = v == 0 ? 0u
                          : std::is_same<T, __half>::value
                              ? (uint32_t)(e + 15) << 10 | ((uint32_t)v << (10 - e) & 0x3ffu)
                              : (uint32_t)(e + 127) << 7 | ((uint32_t)v << (7 - e) & 0x7fu);
    return bits * 0x10001u;
}

/* A 16-bit pair's type, and its bits as one. */
template <typename T>
using pair_t =
    typename std::conditional<std::is_same<T, __half>::value, __half2, __nv_bfloat162>::type;

template <typename T> __device__ __forceinline__ pair_t<T> as_pair(uint32_t bits)
{
    pair_t<T> v;
    memcpy(&v, &bits, 4);
    return v;
}

template <typename T> __device__ __forceinline__ uint32_t bits_of(pair_t<T> v)
{
    uint32_t r;
    memcpy(&r, &v, 4);
    return r;
}

template <typename T> __device__ __forceinline__ uint32_t mul_pair(uint32_t x, uint32_t y)
{
    return bits_of<T>(__hmul2(as_pair<T>(x), as_pair<T>(y)));
}

/* q - zero of a field (2 or 4 bits, or 3: the 2-bit plane's field with the 1-bit plane's bit above
 * it) lying at bit `at` of both halves of `biased` (the magic's pair or'ed with the field, masked
 * in place), z2 the pair of magic + zero (unit_scale's): one fma by 2^-at, less magic 2^-at + zero
 * (magic - magic 2^-at less z2: exact, as is the fma's result, a small integer). */
template <typename T>
__device__ __forceinline__ uint32_t field_value(uint32_t biased, int at, uint32_t z2)
{
    using M = magic_of<T>;
    if (at == 0)
        return bits_of<T>(__hsub2(as_pair<T>(biased), as_pair<T>(z2)));
    const uint32_t k = int_pair<T>(M::VALUE - (M::VALUE >> at));
    const pair_t<T> c = __hsub2(as_pair<T>(k), as_pair<T>(z2));
    return bits_of<T>(__hfma2(as_pair<T>(biased), as_pair<T>(pow2_pair<T>(at)), c));
}

/* (x & mask) | bits in one instruction (the compiler's own takes two: an and, then an or, each
 * with its constant as the immediate). */
__device__ __forceinline__ uint32_t mask_or(uint32_t x, uint32_t mask, uint32_t bits)
{
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0xea;\n" : "=r"(r) : "r"(x), "r"(mask), "r"(bits));
    return r;
}

/* Pair p of a word of fields F bits wide (2 or 4) at bits F p of each half, biased: the field
 * masked where it lies after the fewest shifts of the word (as many fields a shift as fit below the
 * mantissa's top), and its offset there. */
template <typename T, int F> struct field_at {
    static constexpr int PER_SHIFT = (magic_of<T>::MANTISSA - F) / F + 1;
    __host__ __device__ static constexpr int shift(int p) { return p / PER_SHIFT * PER_SHIFT * F; }
    __host__ __device__ static constexpr int at(int p) { return p % PER_SHIFT * F; }
    __device__ __forceinline__ static uint32_t biased(uint32_t word, int p,
                                                      uint32_t magic = magic_of<T>::PAIR)
    {
        constexpr uint32_t mask = ((1u << F) - 1) * 0x10001u;
        return mask_or(word >> shift(p), mask << at(p), magic);
    }
};

/* Pair `pair` (0 <= pair < 16) of a 3-bit unit: its 2-bit field (pair p = pair % 8 of word
 * pair / 8 of the first plane) with its plane-1 bit (bit `pair` of each half of q2) moved above it;
 * 3-bit fields fit below the mantissa's top (2 at + 3 <= MANTISSA) a shift of the word. */
template <typename T> struct field3_at {
    static constexpr int PER_SHIFT = (magic_of<T>::MANTISSA - 3) / 2 + 1;
    __host__ __device__ static constexpr int at(int p) { return p % PER_SHIFT * 2; }
    __device__ __forceinline__ static uint32_t biased(uint32_t word, uint32_t q2, int pair,
                                                      uint32_t magic = magic_of<T>::PAIR)
    {
        const int p = pair % 8, shift = p / PER_SHIFT * PER_SHIFT * 2, to = at(p) + 2;
        const uint32_t moved = to >= pair ? q2 << (to - pair) : q2 >> (pair - to);
        const uint32_t hi = mask_or(moved, 0x00010001u << to, magic);
        return mask_or(word >> shift, 0x00030003u << at(p), hi);
    }
};

/* The 16 pairs of a unit's 32 values, dequantized: (q - zero) * scale, or with SCALED false
 * q - zero alone (exact in the pair's type). */
template <int B, typename T, bool SCALED = true>
__device__ __forceinline__ void dequant_unit(const uint32_t (&q)[B], const unit_scale<T> &sc,
                                             uint32_t (&out)[16])
{
    if constexpr (B == 8 && std::is_same<T, __nv_bfloat16>::value) {
        /* through fp32: byte b of the word in bits 8-15 of 32768.0's mantissa, 2^15 + q */
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const uint32_t sel = 0x4505u | 2 * h << 4; /* byte 2h, then 2h + 1 */
                const float x = __uint_as_float(__byte_perm(q[i], 0x47u, sel));
                const float y = __uint_as_float(__byte_perm(q[i], 0x47u, sel + 0x10));
                const __nv_bfloat162 v =
                    SCALED ? __floats2bfloat162_rn(fmaf(x, sc.s, sc.zs), fmaf(y, sc.s, sc.zs))
                           : __floats2bfloat162_rn(x - sc.zf, y - sc.zf);
                memcpy(&out[2 * i + h], &v, 4);
            }
    } else {
#pragma unroll
        for (int pair = 0; pair < 16; pair++) {
            uint32_t v;
            if constexpr (B == 8)
                v = field_value<T>(
                    __byte_perm(q[pair / 2], 0x64646464u, pair % 2 ? 0x4342u : 0x4140u), 0, sc.z2);
            else if constexpr (B == 3)
                v = field_value<T>(field3_at<T>::biased(q[pair / 8], q[2], pair),
                                   field3_at<T>::at(pair % 8), sc.z2);
            else {
                constexpr int PER_WORD = 16 / B; /* pairs a word */
                using F = field_at<T, B>;
                const int p = pair % PER_WORD;
                v = field_value<T>(F::biased(q[pair / PER_WORD], p), F::at(p), sc.z2);
            }
            out[pair] = SCALED ? mul_pair<T>(v, sc.s2) : v;
        }
    }
}

/* A unit's 16 pairs biased rather than dequantized: each value M + q, M = 2^(mantissa - at) for
 * the place `at` where its field lies in the mantissa, so that the field's last bit weighs one:
 * the lop3 that or's the field into the mantissa is the whole of a pair's work (with a shift of
 * the word for every PER_SHIFT fields, and for 3 bits the plane-1 bit's move). A kernel that
 * multiplies these adds the products of the same activations by minus_bias (-(M + zero) for the
 * symmetric zero point 2^(B - 1)): a multiply by constants, the same for every row of the weight,
 * in place of a subtraction a pair. Exact for every width but bf16's 8 bits (128 + q leaves bf16's
 * integers: TAKES false). */
template <int B, typename T> struct biased_unit {
    using M = magic_of<T>;
    static constexpr bool TAKES = !(B == 8 && !M::F16);
    __host__ __device__ static constexpr int at(int pair)
    {
        return B == 2   ? field_at<T, 2>::at(pair % 8)
               : B == 3 ? field3_at<T>::at(pair % 8)
               : B == 4 ? field_at<T, 4>::at(pair % 4)
                        : 0;
    }
    /* M of pair `pair` as a pair: 2^(mantissa - at), mantissa bits clear */
    __host__ __device__ static constexpr uint32_t magic(int pair)
    {
        return pow2_pair<T>(at(pair) - M::MANTISSA);
    }
    __host__ __device__ static constexpr uint32_t minus_bias(int pair)
    {
        return int_pair<T>((1 << (M::MANTISSA - at(pair))) + (1 << (B - 1))) | 0x80008000u;
    }
    __device__ __forceinline__ static void unit(const uint32_t (&q)[B], uint32_t (&out)[16])
    {
        static_assert(TAKES, "bf16's 8 bits go through fp32");
#pragma unroll
        for (int pair = 0; pair < 16; pair++) {
            if constexpr (B == 8)
                out[pair] = __byte_perm(q[pair / 2], 0x64646464u, pair % 2 ? 0x4342u : 0x4140u);
            else if constexpr (B == 3)
                out[pair] = field3_at<T>::biased(q[pair / 8], q[2], pair, magic(pair));
            else
                out[pair] =
                    field_at<T, B>::biased(q[pair / (16 / B)], pair % (16 / B), magic(pair));
        }
    }
};

/* A quarter of a unit, dequantized: pairs t, t + 4, t + 8 and t + 12 (pair p holding values 2p
 * and 2p + 1, as in dequant_unit, with the same arithmetic) into out[0..3], for t of 0..3. Lane t
 * of a quad so holds values 2t, 2t + 1, 2t + 8 and 2t + 9 of each 16 of the unit, its part of an
 * m16n8k16 A fragment with k in order. s2 and z2 are unit_scale's; for bf16 with 8 bits z2 holds
 * the bits of unit_scale's zs instead (the fp32 path's fma adds that). */
template <int B, typename T>
__device__ __forceinline__ void dequant_quarter(const uint32_t (&q)[B], uint32_t s2, uint32_t z2,
                                                int t, uint32_t (&out)[4])
{
    if constexpr (B == 8 && std::is_same<T, __nv_bfloat16>::value) {
        const float s = __uint_as_float(s2 << 16), zs = __uint_as_float(z2);
        const uint32_t sel = 0x4505u | 2 * (t & 1) << 4;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint32_t word = (t >> 1) ? q[2 * j + 1] : q[2 * j];
            const float x = __uint_as_float(__byte_perm(word, 0x47u, sel));
            const float y = __uint_as_float(__byte_perm(word, 0x47u, sel + 0x10));
            const __nv_bfloat162 v = __floats2bfloat162_rn(fmaf(x, s, zs), fmaf(y, s, zs));
            memcpy(&out[j], &v, 4);
        }
    } else if constexpr (B == 8) {
        const uint32_t sel = (t & 1) ? 0x4342u : 0x4140u;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint32_t word = (t >> 1) ? q[2 * j + 1] : q[2 * j];
            out[j] = mul_pair<T>(field_value<T>(__byte_perm(word, 0x64646464u, sel), 0, z2), s2);
        }
    } else {
        /* t is known only at run time: the fields are shifted down to bit 0 (f16's 2-bit fields
         * but for the one at bit 8) */
#pragma unroll
        for (int j = 0; j < 4; j++) {
            uint32_t biased;
            int at = 0;
            constexpr uint32_t magic = magic_of<T>::PAIR;
            if constexpr (B == 4)
                biased = mask_or(q[j] >> (4 * t), 0x000f000fu, magic);
            else if constexpr (B == 2 && magic_of<T>::MANTISSA >= 10) {
                /* pairs t and t + 4 of word j / 2: bits 2t and 2t + 8 of its halves, one shift */
                at = 8 * (j & 1);
                biased = mask_or(q[j >> 1] >> (2 * t), 0x00030003u << at, magic);
            } else {
                const int p = t + 4 * (j & 1); /* pair t + 4 j is pair p of word j / 2 */
                uint32_t bits = magic;
                if constexpr (B == 3) /* bit t + 4 j of each half of q[2] to bit 2 */
                    bits = mask_or(j == 0 ? (q[2] << 2) >> t : q[2] >> (t + 4 * j - 2), 0x00040004u,
                                   magic);
                biased = mask_or(q[j >> 1] >> (2 * p), 0x00030003u, bits);
            }
            out[j] = mul_pair<T>(field_value<T>(biased, at, z2), s2);
        }
    }
}

} // namespace ktune_wqmatmul_impl
