/* The ring variant: up to 8 * MTILES rows of activations (m <= 16) on tensor cores, the packed
 * weight streamed through a ring of shared memory a warp.
 *
 * The multiply is the prefill variant's (wqmatmul_small.cuh): C^T = W A^T with W the m16n8k16 A
 * operand (16 of its rows a tile) and the activations its B (8 rows a tile); a block owns
 * 16 * RTILES rows of W and all of m, its WARPS warps split k into slabs of 128 (4 units; warp v:
 * slabs v, v + WARPS, ...); lane (g, t) dequantizes unit t of the slab of rows g and g + 8 of each
 * tile and multiplies it by the same 32 k of activation row g of each 8-row tile. The weight does
 * not go through registers on its way: each warp copies its next slabs into a ring of STAGES
 * slabs in shared memory (cp.async, 16-byte chunks a lane, whole rows of 4 units), STAGES - 1
 * of them in flight while one is multiplied, so that the copies in flight do not depend on how
 * the compiler schedules loads into registers; the lanes then read their units from the ring.
 * The activations and the scales are loaded while a slab lands.
 *
 * Sums are fp32. Where every 128 k of a row share a scale (POST: groups of a multiple of 128),
 * a slab's products are summed apart and scaled once; there, without zero points (BIAS),
 * W's values are not dequantized but biased (biased_unit: M + q, one lop3 a pair) and the slab's
 * products of the activations by the constant bias, -(M + 2^(B - 1)), are added: eight more
 * multiplies a slab and 8-row tile of activations, shared by every row of W, in place of a
 * subtraction a pair. Elsewhere a value is dequantized as dequant_unit does. Rows of A past m
 * read row m - 1, whose products land in columns of C that are not stored; rows of W past n read
 * row n - 1; units past k are zeros in both operands. The warps' sums meet in shared memory. */
#pragma once

#include "async_copy.cuh"
#include "wqmatmul_small.cuh"

namespace ktune_wqmatmul_impl {

/* The depth of a warp's ring of slabs of w: STAGES (STAGES - 1 slabs in flight while one is
 * multiplied), fewer where a block's rings would pass RING_BUDGET bytes (one slab a warp at
 * least). */
constexpr int RING_BUDGET = 160 * 1024;

template <int B, int RTILES> __host__ __device__ constexpr int slab_bytes()
{
    return 16 * RTILES * 16 * (unit_words<B>::P0 + unit_words<B>::P1); /* 4 units a row */
}

template <int B, int WARPS, int STAGES, int RTILES> __host__ __device__ constexpr int ring_stages()
{
    constexpr int fit = RING_BUDGET / (WARPS * slab_bytes<B, RTILES>());
    return fit < 1 ? 1 : fit < STAGES ? fit : STAGES;
}

template <typename T, int B, int WARPS, int STAGES_ASKED, int MTILES, int RTILES, bool BIAS,
          bool POST>
__global__ void __launch_bounds__(WARPS * 32)
    ring_kernel(const T *__restrict__ a, qweight_view<T> w, T *__restrict__ c, int m, int n, int k)
{
    static_assert(WARPS >= 2, "the warps' sums meet in shared memory");
    /* BIAS (with POST, without zero points: the launcher's choice) multiplies the biased values
     * (biased_unit) where they are exact and adds the activations' products by the bias once a
     * slab */
    using BU = biased_unit<B, T>;
    constexpr bool BIASED = BIAS && POST && BU::TAKES;
    constexpr int P0 = unit_words<B>::P0, P1 = unit_words<B>::P1, ROWS = 16 * RTILES;
    constexpr int STAGES = ring_stages<B, WARPS, STAGES_ASKED, RTILES>(), AHEAD = STAGES - 1;
    /* a stage: the slab's 16-byte chunks, plane 0 (P0 a row) then plane 1 (one a row) */
    constexpr int CHUNKS = ROWS * (P0 + P1), STAGE_BYTES = 16 * CHUNKS;
    constexpr int LANE_CHUNKS = (CHUNKS + 31) / 32, J1 = ROWS * P0 / 32, KEPT = 4;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int64_t row0 = (int64_t)blockIdx.x * ROWS; /* the block's first row of W */
    const int units = (int)w.units, full = units / 4, slabs = (units + 3) / 4;
    const int rows_left = (int)min((int64_t)n - row0, (int64_t)ROWS);
    extern __shared__ __align__(16) uint32_t rings[];
    const uint32_t ring = ktune_common::smem_addr(rings) + warp * STAGES * STAGE_BYTES;
    float d[RTILES][MTILES][4] = {};

    /* The lane's chunks of a stage: chunk lane + 32 j, in plane 0 for j < J1 (row lane / P0 +
     * 32 j / P0, words 4 (lane % P0) on of the row's slab), else in plane 1 (row lane + 32 (j -
     * J1)); rows past n read as the last row (multiplied, not stored). The first KEPT chunks'
     * addresses are made once. */
    const int off0 = lane % P0 * 4;
    auto chunk_src = [&](int j) -> const uint32_t * {
        const bool p0 = j < J1;
        const int row = min(p0 ? lane / P0 + 32 / P0 * j : lane + 32 * (j - J1), rows_left - 1);
        return p0 ? w.plane0 + (row0 + row) * w.units * P0 + off0
                  : w.plane1 + (row0 + row) * w.units;
    };
    const uint32_t *src[LANE_CHUNKS < KEPT ? LANE_CHUNKS : KEPT];
#pragma unroll
    for (int j = 0; j < LANE_CHUNKS && j < KEPT; j++)
        src[j] = chunk_src(j);
    /* Rows start 16-byte aligned but for 2 and 3 bits where k is not a multiple of 64 (of 128 for
     * plane 1): then, and for a slab past k, the general copy, in 8- (plane 0) or 4-byte (plane 1)
     * pieces, zeros past k. */
    const bool whole =
        (P0 != 2 || k % 64 == 0) && (P1 == 0 || (k % 128 == 0 && (uintptr_t)w.plane1 % 16 == 0));
    auto issue = [&](int slab, uint32_t to) {
        const bool fast = whole && slab < full;
#pragma unroll
        for (int j = 0; j < LANE_CHUNKS; j++) {
            const int i = lane + 32 * j;
            if (CHUNKS % 32 == 0 || i < CHUNKS) {
                const bool p0 = j < J1;
                const int per_unit = p0 ? P0 : 1;
                const uint32_t *row = j < KEPT ? src[j < KEPT ? j : 0] : chunk_src(j);
                if (fast) {
                    ktune_common::cp_async16(to + 16 * i, row + slab * 4 * per_unit);
                    continue;
                }
                const int first = slab * 4 * per_unit + (p0 ? off0 : 0); /* in the row's words */
                const int words = min(max(units * per_unit - first, 0), 4);
                const uint32_t *from = row - (p0 ? off0 : 0) + (words > 0 ? first : 0);
                if (whole)
                    ktune_common::cp_async16(to + 16 * i, from, 4 * words);
                else if (p0) {
#pragma unroll
                    for (int h = 0; h < 2; h++)
                        ktune_common::cp_async_small<8>(to + 16 * i + 8 * h,
                                                        words > 2 * h ? from + 2 * h : from,
                                                        4 * min(max(words - 2 * h, 0), 2));
                } else {
#pragma unroll
                    for (int h = 0; h < 4; h++)
                        ktune_common::cp_async_small<4>(
                            to + 16 * i + 4 * h, words > h ? from + h : from, words > h ? 4 : 0);
                }
            }
        }
    };

    /* the rows' scales (and zero points), and the lane's activations: rows past m read row m - 1,
     * whose products land in columns of C that are not stored */
    const T *srow[RTILES][2];
    const uint8_t *zrow[RTILES][2];
#pragma unroll
    for (int r = 0; r < RTILES; r++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int64_t row = min(row0 + 16 * r + g + 8 * h, (int64_t)n - 1);
            srow[r][h] = w.scales + row * w.groups;
            zrow[r][h] = w.zeros ? w.zeros + row * w.groups : nullptr;
        }
    const T *arow[MTILES];
#pragma unroll
    for (int mt = 0; mt < MTILES; mt++)
        arow[mt] = a + (int64_t)min(8 * mt + g, m - 1) * k + 32 * t;

#pragma unroll
    for (int i = 0; i < AHEAD; i++) {
        const int slab = warp + i * WARPS;
        if (slab < slabs)
            issue(slab, ring + i * STAGE_BYTES);
        ktune_common::cp_async_commit();
    }
    uint32_t stage = ring, ahead = ring + AHEAD * STAGE_BYTES;
    const uint32_t ring_end = ring + STAGES * STAGE_BYTES;
    /* slab s: whole (TAIL false), or the last, past k (its units past k zeros in both operands) */
    auto slab_step = [&](int s, auto tail_tag) {
        constexpr bool TAIL = decltype(tail_tag)::value;
        /* the activations and the scales of slab s, loaded while its weight lands */
        uint4 x[MTILES][4];
#pragma unroll
        for (int mt = 0; mt < MTILES; mt++)
#pragma unroll
            for (int v = 0; v < 4; v++)
                x[mt][v] = !TAIL || s * 4 + t < units
                               ? __ldg(reinterpret_cast<const uint4 *>(arow[mt] + 128 * s) + v)
                               : make_uint4(0, 0, 0, 0);
        /* a slab's group (POST), else the lane's unit's */
        const int grp = group_of(w, POST ? 4 * s : TAIL ? min(4 * s + t, units - 1) : 4 * s + t);
        T sc[RTILES][2];
        int z[RTILES][2];
#pragma unroll
        for (int r = 0; r < RTILES; r++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                sc[r][h] = srow[r][h][grp];
                z[r][h] = !BIASED && w.zeros ? zrow[r][h][grp] & ((1 << B) - 1) : 1 << (B - 1);
            }

        __syncwarp(); /* every lane is done with the stage the next issue overwrites */
        const int next = s + AHEAD * WARPS;
        if (next < slabs)
            issue(next, ahead);
        ktune_common::cp_async_commit();
        ktune_common::cp_async_wait<AHEAD>();
        __syncwarp(); /* the other lanes' copies of slab s are visible */
        const uint32_t st = stage;
        stage = stage + STAGE_BYTES == ring_end ? ring : stage + STAGE_BYTES;
        ahead = ahead + STAGE_BYTES == ring_end ? ring : ahead + STAGE_BYTES;

        /* BIASED: the slab's products of the activations by the bias, the same for every row */
        [[maybe_unused]] float bias[MTILES][4] = {};
        if constexpr (BIASED) {
#pragma unroll
            for (int mt = 0; mt < MTILES; mt++) {
                const uint32_t *xa = reinterpret_cast<const uint32_t *>(x[mt]);
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const uint32_t fb[2] = {xa[2 * j], xa[2 * j + 1]};
                    const uint32_t fa[4] = {BU::minus_bias(2 * j), BU::minus_bias(2 * j),
                                            BU::minus_bias(2 * j + 1), BU::minus_bias(2 * j + 1)};
                    ktune_matmul_impl::mma_16816<T>(bias[mt], fa, fb);
                }
            }
        }
#pragma unroll
        for (int r = 0; r < RTILES; r++) {
            uint32_t p[2][16];
            float sf[2]; /* POST: rows g and g + 8's scales */
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = 16 * r + g + 8 * h;
                uint32_t q[B];
                const uint32_t w0 = st + (row * 4 + t) * P0 * 4;
                if constexpr (P0 == 2) {
                    asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];\n"
                                 : "=r"(q[0]), "=r"(q[1])
                                 : "r"(w0));
                } else {
#pragma unroll
                    for (int i = 0; i < P0; i += 4)
                        asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                                     : "=r"(q[i]), "=r"(q[i + 1]), "=r"(q[i + 2]), "=r"(q[i + 3])
                                     : "r"(w0 + 4 * i));
                }
                if constexpr (B == 3)
                    asm volatile("ld.shared.u32 %0, [%1];\n"
                                 : "=r"(q[2])
                                 : "r"(st + (ROWS * 4 * P0 + row * 4 + t) * 4));
                if constexpr (BIASED) {
                    BU::unit(q, p[h]);
                    sf[h] = ktune_common::to_float<T>(sc[r][h]);
                } else {
                    const unit_scale<T> us = scale_of(raw_scale<T>{sc[r][h], z[r][h]});
                    dequant_unit<B, T, !POST>(q, us, p[h]);
                    sf[h] = us.s;
                }
            }
#pragma unroll
            for (int mt = 0; mt < MTILES; mt++) {
                const uint32_t *xa = reinterpret_cast<const uint32_t *>(x[mt]);
                [[maybe_unused]] float slab[4] = {0, 0, 0, 0};
                unit_multiplies(p, xa, [&](const uint32_t(&fa)[4], const uint32_t(&fb)[2]) {
                    ktune_matmul_impl::mma_16816<T>(POST ? slab : d[r][mt], fa, fb);
                });
                if constexpr (BIASED) {
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        d[r][mt][i] = fmaf(sf[i / 2], slab[i] + bias[mt][i], d[r][mt][i]);
                } else if constexpr (POST) {
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        d[r][mt][i] = fmaf(sf[i / 2], slab[i], d[r][mt][i]);
                }
            }
        }
    };
    int s = warp;
    for (; s < full; s += WARPS)
        slab_step(s, std::false_type());
    if (s < slabs)
        slab_step(s, std::true_type());
    ktune_common::cp_async_wait<0>(); /* no copy outlives the block */

    store_sums<T, WARPS>(d, c, row0, m, n);
}

template <int WARPS, int STAGES, int MTILES, int RTILES> struct ring_launcher {
    template <typename T, int B>
    static cudaError_t run(const void *a, const ktune_qweight &w, void *c, int64_t m, int64_t n,
                           int64_t k, cudaStream_t s)
    {
        if (m > 8 * MTILES)
            return cudaErrorInvalidValue;
        const int64_t blocks = (n + 16 * RTILES - 1) / (16 * RTILES);
        const qweight_view<T> v = view_of<T>(w, n, k);
        const bool post = slab_sums_scaled(w.group);
        const auto kernel = !post ? ring_kernel<T, B, WARPS, STAGES, MTILES, RTILES, false, false>
                            : w.zeros
                                ? ring_kernel<T, B, WARPS, STAGES, MTILES, RTILES, false, true>
                                : ring_kernel<T, B, WARPS, STAGES, MTILES, RTILES, true, true>;
        constexpr size_t smem =
            (size_t)WARPS * ring_stages<B, WARPS, STAGES, RTILES>() * slab_bytes<B, RTILES>();
        return ktune_launch::launch(kernel, dim3((unsigned)blocks), dim3(WARPS * 32), dim3(1, 1, 1),
                                    smem, s, (const T *)a, v, (T *)c, (int)m, (int)n, (int)k);
    }
};

} // namespace ktune_wqmatmul_impl
