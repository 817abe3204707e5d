/* The large variant: many rows of activations, on tensor cores, a block a BM x BN tile of C.
 *
 * A ring of STAGES slabs (128 of k: 4 units) in shared memory, filled by cp.async: the slab of BM
 * rows of A (16-byte chunks swizzled so that the lanes' loads below meet no bank twice) and the
 * packed units of BN rows of W. Warp (wm, wn) of the WM x WN warps computes (BM / WM) x (BN / WN)
 * of the tile: for each 8 rows of W it owns, lane (g, t) dequantizes unit t of row g into 16 pairs
 * (the B fragments of eight m16n8k16 multiplies, k permuted as in wqmatmul_common.cuh) and reads
 * the same 32 k of A's rows g and g + 8 of each 16-row tile. fp32 sums; the epilogue stores C from
 * registers. Each warp of a column of the grid of warps dequantizes its rows of W: WM warps do it
 * for the same rows, which the sweep weighs against larger tiles. */
#pragma once

#include "../matmul/matmul_common.cuh"
#include "async_copy.cuh"
#include "launch.cuh"
#include "wqmatmul_common.cuh"

namespace ktune_wqmatmul_impl {

/* The position of 16-byte chunk ch (0..15) of row r of A's slab. */
__device__ __forceinline__ int a_chunk(int ch, int r) { return ch ^ (((ch >> 3) & 1) << 1) ^ (r & 1); }

template <typename T, int B, int BM, int BN, int WM, int WN, int STAGES> struct large_shape {
    static constexpr int THREADS = WM * WN * 32;
    static constexpr int P0 = unit_words<B>::P0, P1 = unit_words<B>::P1;
    static constexpr int MT = BM / WM / 16, NT = BN / WN / 8;
    static constexpr int A_BYTES = BM * 256, W0_BYTES = BN * 16 * P0, W1_BYTES = BN * 16 * P1;
    static constexpr int STAGE = A_BYTES + W0_BYTES + W1_BYTES;
    static constexpr int SMEM = STAGES * STAGE;
    static_assert(MT >= 1 && NT >= 1 && BM % (16 * WM) == 0 && BN % (8 * WN) == 0, "warp tiles");
};

template <typename T, int B, int BM, int BN, int WM, int WN, int STAGES>
__global__ void __launch_bounds__(WM * WN * 32)
    large_kernel(const T *__restrict__ a, qweight_view<T> w, T *__restrict__ c, int m, int n, int k)
{
    using S = large_shape<T, B, BM, BN, WM, WN, STAGES>;
    constexpr int P0 = S::P0, MT = S::MT, NT = S::NT;
    using ktune_common::cp_async16;
    extern __shared__ __align__(128) unsigned char smem[];
    const int tiles_m = (m + BM - 1) / BM, tiles_n = (n + BN - 1) / BN;
    int tm, tn;
    ktune_matmul_impl::grouped_tile((int)blockIdx.x, tiles_m, tiles_n, tm, tn);
    const int64_t m0 = (int64_t)tm * BM, n0 = (int64_t)tn * BN;
    const int64_t units = w.units, slabs = (units + 3) / 4;

    /* slab s into ring slot `slot`: zeros past m, n and k */
    auto load_slab = [&](int64_t s, int slot) {
        unsigned char *st = smem + slot * S::STAGE;
        const int64_t u0 = s * 4;
        const int valid = (int)min((int64_t)4, units - u0); /* units of the slab inside k */
        for (int i = threadIdx.x; i < BM * 16; i += S::THREADS) {
            const int r = i / 16, ch = i % 16;
            const bool ok = m0 + r < m && ch / 4 < valid;
            const T *src = a + (ok ? (m0 + r) * k + u0 * 32 + ch * 8 : 0);
            cp_async16(st + r * 256 + a_chunk(ch, r) * 16, src, ok ? 16 : 0);
        }
        unsigned char *w0 = st + S::A_BYTES;
        for (int i = threadIdx.x; i < BN * 4; i += S::THREADS) {
            const int r = i / 4, u = i % 4;
            const bool ok = n0 + r < n && u < valid;
            const uint32_t *src = w.plane0 + (ok ? ((n0 + r) * units + u0 + u) * P0 : 0);
            unsigned char *dst = w0 + r * 16 * P0 + u * 4 * P0;
            if constexpr (P0 == 2) {
                ktune_common::cp_async_small<8>(dst, src, ok ? 8 : 0);
            } else if constexpr (P0 == 4) {
                cp_async16(dst, src, ok ? 16 : 0);
            } else { /* two chunks, swizzled by the row's parity (see the reads below) */
                cp_async16(w0 + r * 128 + ((2 * u) ^ (r & 1)) * 16, src, ok ? 16 : 0);
                cp_async16(w0 + r * 128 + ((2 * u + 1) ^ (r & 1)) * 16, src + 4, ok ? 16 : 0);
            }
            if constexpr (S::P1 == 1)
                ktune_common::cp_async_small<4>(st + S::A_BYTES + S::W0_BYTES + r * 16 + u * 4,
                                                w.plane1 + (ok ? (n0 + r) * units + u0 + u : 0),
                                                ok ? 4 : 0);
        }
    };

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wm = warp % WM, wn = warp / WM;
    float acc[MT][NT][4] = {};
    /* the scales of a lane's units of slab s (past k: the last unit's), loaded a slab ahead */
    auto load_scales = [&](int64_t s, raw_scale<T> (&out)[NT]) {
        const int64_t u = min(s * 4 + t, units - 1);
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
            out[nt] = load_scale<B>(
                w, row_of<B>(w, min(n0 + wn * (BN / WN) + nt * 8 + g, (int64_t)n - 1)), (int)u);
    };
    raw_scale<T> next[NT];
    load_scales(0, next);

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < slabs)
            load_slab(s, s);
        ktune_common::cp_async_commit();
    }
    for (int64_t s = 0; s < slabs; s++) {
        ktune_common::cp_async_wait<STAGES - 2>();
        __syncthreads(); /* slab s is in, and every warp is done with the slot refilled below */
        if (s + STAGES - 1 < slabs)
            load_slab(s + STAGES - 1, (int)((s + STAGES - 1) % STAGES));
        ktune_common::cp_async_commit();
        const unsigned char *st = smem + (s % STAGES) * S::STAGE;
        raw_scale<T> sc[NT];
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
            sc[nt] = next[nt];
        if (s + 1 < slabs)
            load_scales(s + 1, next);

        uint32_t wp[NT][16];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int r = wn * (BN / WN) + nt * 8 + g;
            const unsigned char *w0 = st + S::A_BYTES + r * 16 * P0;
            uint32_t q[B];
            if constexpr (P0 == 2) {
                const uint2 v = *reinterpret_cast<const uint2 *>(w0 + t * 8);
                q[0] = v.x, q[1] = v.y;
            } else if constexpr (P0 == 4) {
                const uint4 v = *reinterpret_cast<const uint4 *>(w0 + t * 16);
                q[0] = v.x, q[1] = v.y, q[2] = v.z, q[3] = v.w;
            } else {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const uint4 v = *reinterpret_cast<const uint4 *>(w0 + ((2 * t + h) ^ (r & 1)) * 16);
                    q[4 * h] = v.x, q[4 * h + 1] = v.y, q[4 * h + 2] = v.z, q[4 * h + 3] = v.w;
                }
            }
            if constexpr (B == 3)
                q[2] = *reinterpret_cast<const uint32_t *>(st + S::A_BYTES + S::W0_BYTES + r * 16 + t * 4);
            dequant_unit<B, T>(q, scale_of(sc[nt]), wp[nt]); /* past k: zeros against zeros */
        }
#pragma unroll
        for (int jj = 0; jj < 4; jj++) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                const int r = wm * (BM / WM) + mt * 16 + g;
                const uint4 x0 = *reinterpret_cast<const uint4 *>(st + r * 256 + a_chunk(4 * t + jj, r) * 16);
                const uint4 x1 = *reinterpret_cast<const uint4 *>(st + (r + 8) * 256 + a_chunk(4 * t + jj, r + 8) * 16);
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int j = 2 * jj + h;
                    const uint32_t fa[4] = {h ? x0.z : x0.x, h ? x1.z : x1.x, h ? x0.w : x0.y,
                                            h ? x1.w : x1.y};
#pragma unroll
                    for (int nt = 0; nt < NT; nt++) {
                        const uint32_t fb[2] = {wp[nt][2 * j], wp[nt][2 * j + 1]};
                        ktune_matmul_impl::mma_16816<T>(acc[mt][nt], fa, fb);
                    }
                }
            }
        }
    }
    ktune_common::cp_async_wait_all();

    const bool pairs = n % 2 == 0 && (uintptr_t)c % 4 == 0;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int64_t row = m0 + wm * (BM / WM) + mt * 16 + g;
            const int64_t col = n0 + wn * (BN / WN) + nt * 8 + 2 * t;
            ktune_matmul_impl::store_pair<T>(c, row, col, m, n, acc[mt][nt][0], acc[mt][nt][1], pairs);
            ktune_matmul_impl::store_pair<T>(c, row + 8, col, m, n, acc[mt][nt][2], acc[mt][nt][3], pairs);
        }
}

template <int BM, int BN, int WM, int WN, int STAGES> struct large_launcher {
    template <typename T, int B>
    static cudaError_t run(const void *a, const ktune_qweight &w, void *c, int64_t m, int64_t n,
                           int64_t k, cudaStream_t s)
    {
        using S = large_shape<T, B, BM, BN, WM, WN, STAGES>;
        const int64_t tiles = ((m + BM - 1) / BM) * ((n + BN - 1) / BN);
        if (tiles > INT32_MAX)
            return cudaErrorInvalidValue;
        return ktune_launch::launch(large_kernel<T, B, BM, BN, WM, WN, STAGES>, dim3((unsigned)tiles),
                                    dim3(S::THREADS), dim3(1, 1, 1), (size_t)S::SMEM, s,
                                    (const T *)a, view_of<T>(w, n, k), (T *)c, (int)m, (int)n, (int)k);
    }
};

} // namespace ktune_wqmatmul_impl
