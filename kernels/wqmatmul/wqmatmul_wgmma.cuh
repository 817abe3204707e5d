/* The wgmma variant (sm_90a): many rows of activations on Hopper's warpgroup multiplies, the weight
 * dequantized in registers as the multiplies' A operand.
 *
 * A block computes C^T tiles of BN = 64 * FM * CONSUMERS rows of W (columns of C) by BM rows of A
 * (the multiplies' N), persistent over the tiles in grouped order; a cluster of MC blocks takes MC
 * neighbouring tiles of W rows by the same rows of A. Warpgroup 0 is the producer. Its first
 * thread issues the TMA copies of a slab of SLAB k into a STAGES-deep ring of shared memory: BM
 * rows of A as 64-wide tiles in TMA's 128-byte swizzle (the K-major B operand of wgmma; with MC >
 * 1 each block copies its share of the rows into every block of the cluster, so that A is read
 * from L2 once for the cluster), and the packed units of its BN rows of W as TMA lays them, row
 * after row. Its other three warps write each unit's scale and zero point, as the dequantization
 * takes them, for the BN rows into the stage: the warp of stages s with s % 3 its own (one warp
 * fills a stage every time, in order, so it never waits for a phase of the "empty" barrier two
 * ahead of the last one completed, which the barrier's parity could not tell apart), the loads
 * made before it waits for the stage. Both complete the stage's "full" barrier; every consumer of
 * every block of the cluster frees it on its "empty" barrier.
 *
 * Each consumer warpgroup owns FM 64-row pieces of W (the space compiles FM = 1). For each unit
 * (32 k), lane (g, t) of warp w reads the packed words of rows 16 w + g and 16 w + g + 8 of a
 * piece and dequantizes the quarter of them that is its A fragment (dequant_quarter: values 2t,
 * 2t + 1, 2t + 8, 2t + 9 of each 16); UG units make a group of multiplies, issued with A from
 * registers and kept in flight while the next group is dequantized into the other of two
 * buffers. The weight so never passes through shared memory as 16-bit values, and the
 * activations are read by the tensor cores from where TMA put them.
 *
 * The accumulators hold C^T: thread (g, t) of warp w has columns 16 w + g and 16 w + g + 8 of C
 * for rows 8 j + 2t and 8 j + 2t + 1; neighbouring lanes swap a value so that each stores two
 * adjacent columns of one row at once.
 *
 * Tails: TMA fills what lies past m, n and k with zeros; a unit past k dequantizes the zeros with
 * the row's last scale against activations that are zeros there; rows past n (a cluster's last
 * tile may lie wholly past it) take row n - 1's scales and are not stored. TMA needs 16-byte
 * aligned rows and bases (k a multiple of 8 for A, packed rows of a multiple of 16 bytes, the
 * 3-bit second plane 16-byte aligned): a call where a map cannot be made runs the family's
 * default config instead. */
#pragma once

#include "../matmul/matmul_wgmma.cuh"
#include "cluster.cuh"
#include "launch.cuh"
#include "wqmatmul_common.cuh"
#include "wqmatmul_large.cuh"

namespace ktune_wqmatmul_impl {

template <typename T, int B, int BM, int FM, int CONSUMERS, int STAGES, int SLAB>
struct wgmma_shape {
    static constexpr int SU = SLAB / 32; /* units a stage */
    static constexpr int BN = 64 * FM * CONSUMERS; /* rows of W a tile */
    static constexpr int THREADS = (CONSUMERS + 1) * 128;
    static constexpr int P0 = unit_words<B>::P0, P1 = unit_words<B>::P1;
    static constexpr int A_HALF = BM * 128;            /* BM rows of 64 k: one swizzled tile */
    static constexpr int A_BYTES = SU / 2 * A_HALF;    /* the slab's k */
    static constexpr int W0_BYTES = BN * SU * P0 * 4;  /* the units' first planes */
    static constexpr int W1_BYTES = BN * SU * P1 * 4;  /* 3 bits: the second plane */
    static constexpr int SC_BYTES = BN * SU * 8;       /* a uint2 a unit of a row */
    static constexpr int STAGE = A_BYTES + W0_BYTES + W1_BYTES + SC_BYTES;
    /* the ring, two barriers a stage, and slack to align the ring to 1024 bytes */
    static constexpr size_t SMEM = (size_t)STAGES * STAGE + STAGES * 16 + 1024;
    static_assert(BM == 64 || BM == 128 || BM == 256, "the multiplies' N");
    static_assert(SLAB == 64 || SLAB == 128, "slabs of 64 or 128 k");
    static_assert(P1 == 0 || SLAB == 128, "3 bits: the second plane's box is 16 bytes at 128 k");
    static_assert(FM * BM / 2 <= 128, "at most 128 accumulators a thread");
    static_assert(STAGE % 1024 == 0, "each stage's A tiles 1024-byte aligned");
    /* Units a consumer dequantizes before it issues their multiplies as one group (one group in
     * flight while it dequantizes the next into a second buffer): the most of 4, 2, 1 whose two
     * buffers (8 registers a unit and piece, 16 with 8 bits, whose packed words the compiler
     * loads ahead too) fit beside the accumulators and the rest (about 40 registers, 72 with two
     * pieces) in what ptxas gives a thread (168 with two consumers). Small tiles then keep a whole
     * slab of multiplies in flight, large ones their accumulators out of local memory. */
    static constexpr int REGISTERS = CONSUMERS == 1 ? 255 : 168, ACC = FM * BM / 2;
    static constexpr int UNIT = FM * (B == 8 ? 16 : 8), REST = 40 + 32 * (FM - 1);
    static constexpr int UG = ACC + 2 * 4 * UNIT + REST <= REGISTERS && SU == 4 ? 4
                              : ACC + 2 * 2 * UNIT + REST <= REGISTERS          ? 2
                                                                                : 1;
};

/* The scale and zero point of unit u of a row, as the producer loads them: the group by a 64-bit
 * division, not load_scale's multiply and shift, which made this kernel slower for a reason not
 * established (README, wqmatmul). */
template <int B, typename T>
__device__ __forceinline__ raw_scale<T> producer_scale(const qweight_view<T> &w, int64_t row, int u)
{
    const int64_t g = row * w.groups + (int64_t)u / w.group_units;
    return {w.scales[g], w.zeros ? w.zeros[g] & ((1 << B) - 1) : 1 << (B - 1)};
}

/* The scale and zero point of a unit as dequant_quarter takes them (see there). */
template <int B, typename T> __device__ __forceinline__ uint2 scale_entry(const raw_scale<T> &raw)
{
    const unit_scale<T> sc = scale_of(raw);
    if constexpr (B == 8 && std::is_same<T, __nv_bfloat16>::value)
        return make_uint2(sc.s2, __float_as_uint(sc.zs));
    else
        return make_uint2(sc.s2, sc.z2);
}

#ifdef KTUNE_WGMMA_DEVICE
/* A consumer's release of a stage: an arrival on its "empty" barrier in every block of the
 * cluster (each block's TMA thread writes the stage in all of them). */
template <int MC> __device__ __forceinline__ void release(uint64_t *bar)
{
    if constexpr (MC == 1)
        ktune_matmul_impl::barrier_arrive(bar);
    else
#pragma unroll
        for (int q = 0; q < MC; q++)
            ktune_matmul_impl::barrier_arrive_cluster(bar, q);
}
#endif

/* Reads every value of a group's fragments into sink, so that they stay in their registers up to
 * here (see the consumer's loop). */
template <int UG, int FM>
__device__ __forceinline__ void retire(const uint32_t (&frag)[UG][FM][2][4], uint32_t &sink)
{
#pragma unroll
    for (int u = 0; u < UG; u++)
#pragma unroll
        for (int f = 0; f < FM; f++)
#pragma unroll
            for (int step = 0; step < 2; step++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    sink ^= frag[u][f][step][j];
}

template <typename T, int B, int BM, int FM, int CONSUMERS, int STAGES, int SLAB, int MC>
__global__ void __launch_bounds__((CONSUMERS + 1) * 128, 1)
    wq_wgmma_kernel(const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_w0,
                    const __grid_constant__ CUtensorMap map_w1, qweight_view<T> w,
                    T *__restrict__ c, int m, int n, bool pairs)
{
#ifdef KTUNE_WGMMA_DEVICE
    using namespace ktune_matmul_impl;
    using S = wgmma_shape<T, B, BM, FM, CONSUMERS, STAGES, SLAB>;
    constexpr int BN = S::BN, P0 = S::P0, P1 = S::P1, UG = S::UG, SU = S::SU;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *const ring = smem_raw + (1024 - smem_addr(smem_raw) % 1024) % 1024;
    uint64_t *const full = reinterpret_cast<uint64_t *>(ring + STAGES * S::STAGE);
    uint64_t *const empty = full + STAGES;
    const int units = (int)w.units, slabs = (units + SU - 1) / SU;
    /* a cluster of MC blocks takes MC neighbouring tiles of W rows by the same rows of A */
    const int tiles_m = (m + BM - 1) / BM, tiles_n = (n + BN - 1) / BN;
    const int cluster_cols = (tiles_n + MC - 1) / MC, items = tiles_m * cluster_cols;
    const int rank = MC > 1 ? (int)ktune_cluster::rank() : 0;
    const int warpgroup = threadIdx.x / 128, tid = threadIdx.x % 128;

    /* full: the TMA thread's arrival (with the bytes) and the 32 lanes of the scales' warp;
     * empty: each consumer of each block of the cluster (all of them read what this block's TMA
     * thread writes) */
    ring_barriers_setup<STAGES>(full, empty, 33, CONSUMERS * MC);
    if constexpr (MC > 1)
        ktune_cluster::sync(); /* the other blocks' barriers are set up before any arrival */
    else
        __syncthreads();

    if (warpgroup == 0) {
        if constexpr (CONSUMERS > 1)
            registers_lower<72>();
        const int warp = tid / 32, lane = tid % 32;
        int s = 0, phase = 0;
        for (int item = blockIdx.x / MC; item < items; item += gridDim.x / MC) {
            int tm, tn;
            grouped_tile(item, tiles_m, cluster_cols, tm, tn);
            const int m0 = tm * BM, n0 = (tn * MC + rank) * BN; /* past n: zeros, not stored */
            for (int kt = 0; kt < slabs; kt++) {
                unsigned char *const st = ring + s * S::STAGE;
                if (warp == 0 && lane == 0) {
                    barrier_wait(&empty[s], phase ^ 1);
                    barrier_expect(&full[s], S::A_BYTES + S::W0_BYTES + S::W1_BYTES);
#pragma unroll
                    for (int h = 0; h < SU / 2; h++) {
                        /* MC > 1: this block's share of A's rows, into every block */
                        unsigned char *const part = st + h * S::A_HALF + rank * (S::A_HALF / MC);
                        if constexpr (MC > 1)
                            tma_load_multicast(part, &map_a, kt * SLAB + 64 * h,
                                               m0 + rank * (BM / MC), &full[s], (1 << MC) - 1);
                        else
                            tma_load(part, &map_a, kt * SLAB + 64 * h, m0, &full[s]);
                    }
                    tma_load(st + S::A_BYTES, &map_w0, kt * SU * P0, n0, &full[s]);
                    if constexpr (P1 > 0)
                        tma_load(st + S::A_BYTES + S::W0_BYTES, &map_w1, kt * SU * P1,
                                 n0, &full[s]);
                } else if (warp > 0 && s % 3 == warp - 1) {
                    /* a lane's rows r = lane + 32 i; a unit's group is read once, the units
                     * of the slab that share it take the same entry. The entries are made
                     * before the stage is free, so that the loads' latency passes while the
                     * consumers still read it. */
                    constexpr int ROWS = BN / 32;
                    const int u0 = kt * SU;
                    uint2 entry[SU][ROWS];
                    raw_scale<T> raw[ROWS];
#pragma unroll
                    for (int uu = 0; uu < SU; uu++) {
                        const int u = min(u0 + uu, units - 1);
                        const int before = min(u0 + uu - 1, units - 1);
                        if (uu == 0 || u / w.group_units != before / w.group_units)
#pragma unroll
                            for (int i = 0; i < ROWS; i++)
                                raw[i] = producer_scale<B>(w, min(n0 + lane + 32 * i, n - 1), u);
#pragma unroll
                        for (int i = 0; i < ROWS; i++)
                            entry[uu][i] = scale_entry<B, T>(raw[i]);
                    }
                    barrier_wait(&empty[s], phase ^ 1);
                    uint2 *const out =
                        reinterpret_cast<uint2 *>(st + S::A_BYTES + S::W0_BYTES + S::W1_BYTES);
#pragma unroll
                    for (int uu = 0; uu < SU; uu++)
#pragma unroll
                        for (int i = 0; i < ROWS; i++)
                            out[uu * BN + lane + 32 * i] = entry[uu][i];
                    barrier_arrive(&full[s]);
                }
                ring_next<STAGES>(s, phase);
            }
        }
    } else {
        if constexpr (CONSUMERS > 1)
            registers_raise<216>();
        const int consumer = warpgroup - 1, warp = tid / 32, lane = tid % 32;
        const int g = lane / 4, t = lane % 4;
        float d[FM][BM / 2];
        constexpr int GROUPS = SU / UG;
        uint32_t frags[2][UG][FM][2][4] = {}, sink = 0;
        int s = 0, phase = 0;
        for (int item = blockIdx.x / MC; item < items; item += gridDim.x / MC) {
            int tm, tn;
            grouped_tile(item, tiles_m, cluster_cols, tm, tn);
            tn = tn * MC + rank;
#pragma unroll
            for (int f = 0; f < FM; f++)
#pragma unroll
                for (int i = 0; i < BM / 2; i++)
                    d[f][i] = 0.f;
            int released = -1; /* the stage whose last multiplies may still be in flight */
            /* The multiplies read a group's fragments after they are issued, so the next group
             * is dequantized into the other of two buffers, and each buffer's values are read
             * once more (retire) after the wait that retires its multiplies: ptxas, which
             * otherwise gives the registers of an issued multiply's fragments to the next values,
             * so keeps them, rather than serializing the multiplies (C7513) or, across a turn of
             * the loop, writing over them in flight (seen with one buffer). Slabs go in pairs so
             * that a group's buffer is known at compile time. */
            for (int kt0 = 0; kt0 < slabs; kt0 += 2) {
#pragma unroll
                for (int par = 0; par < 2; par++) {
                    if (kt0 + par >= slabs)
                        break;
                    barrier_wait(&full[s], phase);
                    const unsigned char *const st = ring + s * S::STAGE;
                    const uint2 *const entries = reinterpret_cast<const uint2 *>(
                        st + S::A_BYTES + S::W0_BYTES + S::W1_BYTES);
                    const uint32_t a_tile = smem_addr(st);
#pragma unroll
                    for (int u0 = 0; u0 < SU; u0 += UG) {
                        uint32_t(&frag)[UG][FM][2][4] = frags[(par * GROUPS + u0 / UG) % 2];
#pragma unroll
                        for (int ug = 0; ug < UG; ug++)
#pragma unroll
                            for (int f = 0; f < FM; f++) {
                                const int uu = u0 + ug;
                                uint32_t pairs_of[2][4];
#pragma unroll
                                for (int h = 0; h < 2; h++) {
                                    const int r = (consumer * FM + f) * 64 + warp * 16 + g + 8 * h;
                                    const unsigned char *w0 =
                                        st + S::A_BYTES + (r * SU + uu) * P0 * 4;
                                    uint32_t q[B];
                                    if constexpr (P0 == 2) {
                                        const uint2 v = *reinterpret_cast<const uint2 *>(w0);
                                        q[0] = v.x, q[1] = v.y;
                                    } else {
#pragma unroll
                                        for (int i = 0; i < P0; i += 4) {
                                            const uint4 v =
                                                *reinterpret_cast<const uint4 *>(w0 + 4 * i);
                                            q[i] = v.x, q[i + 1] = v.y;
                                            q[i + 2] = v.z, q[i + 3] = v.w;
                                        }
                                    }
                                    if constexpr (P1 > 0)
                                        q[2] = *reinterpret_cast<const uint32_t *>(
                                            st + S::A_BYTES + S::W0_BYTES + (r * SU + uu) * 4);
                                    const uint2 e = entries[uu * BN + r];
                                    dequant_quarter<B, T>(q, e.x, e.y, t, pairs_of[h]);
                                }
#pragma unroll
                                for (int step = 0; step < 2; step++) {
                                    frag[ug][f][step][0] = pairs_of[0][2 * step];
                                    frag[ug][f][step][1] = pairs_of[1][2 * step];
                                    frag[ug][f][step][2] = pairs_of[0][2 * step + 1];
                                    frag[ug][f][step][3] = pairs_of[1][2 * step + 1];
                                }
                            }
#pragma unroll
                        for (int f = 0; f < FM; f++)
                            wgmma_fence_registers(d[f]);
                        wgmma_fence();
#pragma unroll
                        for (int ug = 0; ug < UG; ug++)
#pragma unroll
                            for (int step = 0; step < 2; step++)
#pragma unroll
                                for (int f = 0; f < FM; f++) {
                                    const int uu = u0 + ug;
                                    const uint32_t b_addr =
                                        a_tile + (uu / 2) * S::A_HALF + (uu % 2) * 64 + step * 32;
                                    wgmma_m64k16_ra<T, BM>(d[f], frag[ug][f][step],
                                                           wgmma_desc(b_addr));
                                }
                        wgmma_commit();
#pragma unroll
                        for (int f = 0; f < FM; f++)
                            wgmma_fence_registers(d[f]);
                        wgmma_wait<1>();
                        retire(frags[(par * GROUPS + u0 / UG + 1) % 2], sink);
                        /* the previous slab's last multiplies are done: its stage is free */
                        if (u0 == 0 && released >= 0 && tid == 0)
                            release<MC>(&empty[released]);
                    }
                    released = s;
                    ring_next<STAGES>(s, phase);
                }
            }
            wgmma_wait<0>();
#pragma unroll
            for (int f = 0; f < FM; f++)
                wgmma_fence_registers(d[f]);
            if (tid == 0)
                release<MC>(&empty[released]);

            /* C[row][col .. col + 1] from two lanes' values: lanes of even g store row 8 j + 2t,
             * those of odd g row 8 j + 2t + 1, each with its neighbour's (lane ^ 4) value */
            const int64_t row0 = (int64_t)tm * BM + 2 * t;
            const bool odd = g & 1;
#pragma unroll
            for (int f = 0; f < FM; f++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int64_t col = (int64_t)tn * BN + (consumer * FM + f) * 64 + warp * 16 +
                                        8 * h + (g & ~1);
#pragma unroll
                    for (int j = 0; j < BM / 8; j++) {
                        const float mine0 = d[f][4 * j + 2 * h], mine1 = d[f][4 * j + 2 * h + 1];
                        const float theirs = __shfl_xor_sync(0xffffffffu, odd ? mine0 : mine1, 4);
                        const int64_t row = row0 + 8 * j + (odd ? 1 : 0);
                        store_pair<T>(c, row, col, m, n, odd ? theirs : mine0, odd ? mine1 : theirs,
                                      pairs);
                    }
                }
        }
        if (m < 0) /* never (the launcher takes m >= 1): the values read by retire go somewhere */
            c[0] = ktune_common::from_float<T>((float)sink);
    }
    if constexpr (MC > 1)
        ktune_cluster::sync(); /* no block leaves while another may still arrive on its barriers */
#else
    (void)map_a, (void)map_w0, (void)map_w1, (void)w, (void)c, (void)m, (void)n, (void)pairs;
#endif
}

/* A TMA map of the rows x cols 32-bit words of a packed plane (rows of W), boxes of box_rows x
 * box_cols words as they lie, no swizzle. False where TMA cannot address it. */
inline bool words_map(CUtensorMap *map, const void *base, int64_t rows, int64_t cols, int box_cols,
                      int box_rows)
{
    const PFN_cuTensorMapEncodeTiled_v12000 encode = ktune_matmul_impl::tensor_map_encoder();
    if (!encode || (uintptr_t)base % 16 != 0 || cols * 4 % 16 != 0)
        return false;
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)cols * 4};
    const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
    const cuuint32_t unit[2] = {1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, const_cast<void *>(base), dims, strides,
                  box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* The family's default config for large m (spaces/wqmatmul.yaml), for what TMA cannot load. */
using wgmma_fallback = large_launcher<64, 128, 2, 4, 3>;

template <int BM, int FM, int CONSUMERS, int STAGES, int SLAB, int MC> struct wgmma_launcher {
    template <typename T, int B>
    static cudaError_t run(const void *a, const ktune_qweight &w, void *c, int64_t m, int64_t n,
                           int64_t k, cudaStream_t s)
    {
        if constexpr (unit_words<B>::P1 > 0 && SLAB != 128)
            return cudaErrorNotSupported; /* 3 bits take slabs of 128 k (the space says so) */
        else
            return launch<T, B>(a, w, c, m, n, k, s);
    }

  private:
    template <typename T, int B>
    static cudaError_t launch(const void *a, const ktune_qweight &w, void *c, int64_t m, int64_t n,
                              int64_t k, cudaStream_t s)
    {
        if (!KTUNE_SM90A) /* the kernel has no code in this build */
            return cudaErrorNotSupported;
        using S = wgmma_shape<T, B, BM, FM, CONSUMERS, STAGES, SLAB>;
        /* a cluster's work: MC neighbouring tiles of W rows by the same rows of A */
        const int64_t items = ((m + BM - 1) / BM) * ((n + S::BN * MC - 1) / (S::BN * MC));
        if (items > INT32_MAX / MC)
            return cudaErrorInvalidValue;
        const qweight_view<T> v = view_of<T>(w, n, k);
        CUtensorMap map_a, map_w0, map_w1;
        if (!ktune_matmul_impl::tensor_map<T>(&map_a, a, m, k, BM / MC) ||
            !words_map(&map_w0, v.plane0, n, v.units * S::P0, S::SU * S::P0, S::BN) ||
            (S::P1 > 0 &&
             !words_map(&map_w1, v.plane1, n, v.units * S::P1, S::SU * S::P1, S::BN)))
            return wgmma_fallback::run<T, B>(a, w, c, m, n, k, s);
        if (S::P1 == 0)
            map_w1 = map_w0; /* unused */
        constexpr auto kernel = wq_wgmma_kernel<T, B, BM, FM, CONSUMERS, STAGES, SLAB, MC>;
        const dim3 block(S::THREADS);
        unsigned clusters;
        const cudaError_t e =
            ktune_launch::persistent_grid<kernel>(block, dim3(MC, 1, 1), S::SMEM, items, &clusters);
        if (e != cudaSuccess)
            return e;
        const bool pairs = n % 2 == 0 && (uintptr_t)c % 4 == 0;
        return ktune_launch::launch(kernel, dim3(clusters * MC), block, dim3(MC, 1, 1), S::SMEM, s,
                                    map_a, map_w0, map_w1, v, (T *)c, (int)m, (int)n, pairs);
    }
};

} // namespace ktune_wqmatmul_impl
