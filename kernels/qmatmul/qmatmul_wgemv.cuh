/* The wgemv variant (sm_90a): small m on 8-bit k32 wgmma, with the weight as the 64-row operand,
 * after the matmul family's wgemv (kernels/matmul/matmul_wgemv.cuh).
 *
 * C^T = W A^T: a block owns BM rows of W and BN rows of A (columns of C^T, wgmma's N: 8 to 64,
 * all of m where m <= BN, else a row tile of A), and k is split over the SPLIT blocks of a
 * cluster (contiguous ranges of 128-wide slices), so that few tiles still keep every SM busy.
 * One thread of the producer warp streams the block's slices of W (BM x 128 bytes) and A (BN x
 * 128) by TMA into a STAGES-deep ring of shared memory in 128-byte swizzle; the consumer
 * warpgroup multiplies straight from the ring and frees each stage on its "empty" barrier. W is
 * read once, in 8 or 16 KB copies with many in flight. int8 sums chain in int32 over the block's
 * whole share of k (exact), with one stage's multiplies in flight; fp8 sums of each slice are
 * added into fp32 totals once its multiplies are done (the wgmma variant's reason), which costs
 * little here: the multiplies are a small part of a stage's time.
 *
 * The blocks of a cluster lay their partial sums (int32 or fp32) out in shared memory and each
 * adds up a share of the tile from all of them through distributed shared memory, applies the
 * epilogue (scales of A and W, bias) and stores it, consecutive threads on consecutive columns of
 * C. Tails: TMA fills parts of a box outside A or W with zeros, and only the m x n part of the
 * tile is written. TMA needs 16-byte aligned rows: k % 16 == 0 and 16-byte aligned A and W (the
 * family's rules). */
#pragma once

#include "../matmul/matmul_wgemv.cuh"
#include "qmatmul_wgmma.cuh"

namespace ktune_qmatmul_impl {

template <int BM, int BN, int STAGES> constexpr size_t qwgemv_smem_bytes()
{
    /* the ring, the block's partial tile (4-byte sums), two barriers a stage, and slack to align
     * the ring to 1024 bytes (spaces/qmatmul.yaml states the same sum) */
    return (size_t)STAGES * (BM + BN) * QWGMMA_BK + (size_t)BM * BN * 4 + (size_t)STAGES * 2 * 8 +
           1024;
}

template <typename Q, typename O, int BM, int BN, int STAGES, int SPLIT>
__global__ void __launch_bounds__(160)
    qwgemv_kernel(const __grid_constant__ CUtensorMap map_w,
                  const __grid_constant__ CUtensorMap map_a, O *__restrict__ c,
                  const typename column_tiles<BN, BM>::params where, int n, int k,
                  ktune_qmatmul_epilogue ep)
{
    using acc_t = typename accumulator<Q>::type;
    constexpr int FM = BM / 64;   /* 64-row pieces of W a k step */
    constexpr int TILE = BM * BN; /* sums of the block's partial tile, stored [column][row] */
    static_assert(BM % 64 == 0 && FM <= 2, "64 or 128 rows of W");
    static_assert(FM * BN / 2 <= 64, "at most 64 accumulators a thread");
#ifdef KTUNE_WGMMA_DEVICE
    constexpr bool PROMOTE = !std::is_same<Q, int8_t>::value;
    constexpr uint32_t W_BYTES = BM * QWGMMA_BK, A_BYTES = BN * QWGMMA_BK;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *const smem = smem_raw + (1024 - smem_addr(smem_raw) % 1024) % 1024;
    unsigned char *const ring_w = smem, *const ring_a = smem + STAGES * W_BYTES;
    acc_t *const part = reinterpret_cast<acc_t *>(smem + STAGES * (W_BYTES + A_BYTES));
    uint64_t *const full = reinterpret_cast<uint64_t *>(part + TILE);
    uint64_t *const empty = full + STAGES;

    const column_tiles<BN, BM> order(where, nullptr);
    const int split = SPLIT > 1 ? (int)ktune_cluster::rank() : 0;
    const int ktiles = (k + QWGMMA_BK - 1) / QWGMMA_BK;
    const int kt_begin = (int)((int64_t)ktiles * split / SPLIT);
    const int kt_end = (int)((int64_t)ktiles * (split + 1) / SPLIT);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    if (threadIdx.x == 128) /* the producer's lane */
        wgemv_ring_init<STAGES>(full, empty, &map_w, &map_a);
    __syncthreads();
    /* a cluster's blocks share blockIdx.x, so they leave together */
    if ((int)blockIdx.x >= order.count())
        return;
    const tile_place at = order.at((int)blockIdx.x);
    const int m = min(at.row_end - at.row0, BN), n0 = at.col0;

    if (warp == 4) { /* the producer */
        if (lane == 0)
            wgemv_produce<STAGES, QWGMMA_BK, W_BYTES, A_BYTES>(ring_w, ring_a, &map_w, &map_a, full,
                                                               empty, kt_begin, kt_end, at.w_row0,
                                                               at.row0);
    } else { /* the consumer warpgroup */
        acc_t d[FM][BN / 2] = {};
        float total[PROMOTE ? FM : 1][PROMOTE ? BN / 2 : 1] = {};
        int s = 0, phase = 0, released = -1; /* released: the stage whose multiplies are in flight */
        for (int kt = kt_begin; kt < kt_end; kt++) {
            barrier_wait(&full[s], phase);
            /* W is the 64-row operand, A the N one */
            qwgmma_slice<Q, BN, FM>(d, smem_addr(ring_w + s * W_BYTES),
                                    smem_addr(ring_a + s * A_BYTES), PROMOTE);
            if constexpr (PROMOTE) {
                wgmma_wait<0>();
                qwgmma_promote<FM, BN>(total, d);
                if (threadIdx.x == 0)
                    barrier_arrive(&empty[s]);
            } else {
                wgmma_wait<1>();
                if (released >= 0 && threadIdx.x == 0)
                    barrier_arrive(&empty[released]);
                released = s;
            }
            ring_next<STAGES>(s, phase);
        }
        wgmma_wait<0>();
#pragma unroll
        for (int f = 0; f < FM; f++)
            wgmma_fence_registers(d[f]);
        wgemv_store_part<FM, BN, BM>(
            part,
            [&](int f, int i) -> acc_t {
                if constexpr (PROMOTE)
                    return total[f][i];
                else
                    return d[f][i];
            },
            warp, lane);
    }

    const int begin = TILE * split / SPLIT, end = TILE * (split + 1) / SPLIT;
    ktune_cluster::sync_split<SPLIT>();
    for (int i = begin + threadIdx.x; i < end; i += blockDim.x) {
        const int col = i / BM, r = i % BM;
        if (col >= m || n0 + r >= n)
            continue;
        const int64_t row = (int64_t)at.row0 + col;
        c[row * n + n0 + r] = ktune_common::from_float<O>(
            epilogue_value<O>((float)ktune_cluster::sum_split<SPLIT>(part, i), ep, row, n0 + r));
    }
    if constexpr (SPLIT > 1)
        ktune_cluster::sync(); /* the others' shared memory stays until every block has read it */
#else
    (void)map_w, (void)map_a, (void)c, (void)where, (void)n, (void)k, (void)ep;
#endif
}

template <int BM, int BN, int STAGES, int SPLIT> struct qwgemv_launcher {
    template <typename Q, typename O>
    static cudaError_t run(const void *a, const void *w, void *c, int64_t m, int64_t n, int64_t k,
                           const ktune_qmatmul_epilogue &ep, cudaStream_t s)
    {
        if (!KTUNE_SM90A) /* the kernel has no code in this build */
            return cudaErrorNotSupported;
        const int64_t tiles = (m + BN - 1) / BN * ((n + BM - 1) / BM);
        if (tiles > INT32_MAX)
            return cudaErrorInvalidValue;
        CUtensorMap map_w, map_a;
        if (!byte_tensor_map(&map_w, w, n, k, BM) || !byte_tensor_map(&map_a, a, m, k, BN))
            return cudaErrorInvalidValue;
        using tiles_t = column_tiles<BN, BM>;
        constexpr auto kernel = qwgemv_kernel<Q, O, BM, BN, STAGES, SPLIT>;
        return ktune_launch::launch(kernel, dim3((unsigned)tiles, SPLIT), dim3(160),
                                    dim3(1, SPLIT, 1), qwgemv_smem_bytes<BM, BN, STAGES>(), s,
                                    map_w, map_a, (O *)c, typename tiles_t::params{(int)m, (int)n},
                                    (int)n, (int)k, ep);
    }
};

} // namespace ktune_qmatmul_impl
