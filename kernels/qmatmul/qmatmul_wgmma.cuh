/* The wgmma variant (sm_90a): the warp-specialized tensor-core GEMM of the matmul family's wgmma
 * variant (kernels/matmul/matmul_wgmma.cuh, whose TMA, barrier and descriptor wrappers it uses)
 * on 8-bit operands: wgmma's k32 instructions, four to a 128-byte swizzled row (128 k), int8 into
 * int32 accumulators (exact) or fp8 e4m3 into fp32, each 128-k slice's fp8 sums added into fp32
 * totals by the consumer (at most 96 accumulators of each a thread).
 *
 * The epilogue: each consumer loads its tile's scales of W and bias (BN columns) and scales of A
 * (its rows) into registers as the tile starts, so that the loads complete under the tile's
 * multiplies, and puts them into shared memory once the multiplies are done; each accumulator is
 * then scaled by its row's scale of A and its column's scale of W, the bias added, and the
 * consumer's share stored as bf16 or f16 through matmul's TMA stores (64 x 64 chunks through two
 * staging buffers), or from registers where C's rows are not 16-byte aligned (n % 8 != 0).
 *
 * SPLIT > 1 (few output tiles, long k): a cluster of SPLIT blocks a tile, each multiplying a share
 * of k; their partial sums meet in distributed shared memory (where the ring was), each block
 * adds up a share of the tile and stores it through the epilogue.
 *
 * Persistent blocks of CONSUMERS + 1 warpgroups take BM x BN tiles of C in grouped order;
 * warpgroup 0 produces (TMA copies of 128-wide k slices of A and W into a STAGES-deep ring), the
 * consumers multiply, each over BM / CONSUMERS rows (three consumers of 64 rows make 192-row
 * tiles, whose multiplies keep the tensor cores busy while one consumer adds fp8 sums). Tails in
 * m, n and k: TMA fills parts of a box outside the matrix with zeros; the stores skip them. TMA
 * needs 16-byte aligned rows: k % 16 == 0 and 16-byte aligned A and W (the family's rules). */
#pragma once

#include <cudaTypedefs.h> /* PFN_cuTensorMapEncodeTiled */

#include "../matmul/matmul_wgmma.cuh"
#include "qmatmul_common.cuh"

namespace ktune_qmatmul_impl {

using namespace ktune_matmul_impl;

constexpr int QWGMMA_BK = 128; /* a k slice: one 128-byte swizzled row of 8-bit elements */

/* A consumer's epilogue inputs in shared memory: the scales of W and the bias of the tile's BN
 * columns, then the scales of A of its WM rows, as fp32. */
template <int BN, int WM> __host__ __device__ constexpr int qwgmma_epilogue_floats()
{
    return 2 * BN + WM;
}

template <int BM, int BN, int CONSUMERS, int STAGES> constexpr size_t qwgmma_smem_bytes()
{
    /* the ring, two staging buffers and the epilogue's inputs a consumer, two barriers a stage,
     * and slack to align the ring to 1024 bytes (spaces/qmatmul.yaml states the same sum) */
    return (size_t)STAGES * (BM + BN) * QWGMMA_BK + (size_t)CONSUMERS * 2 * STAGING_BYTES +
           (size_t)CONSUMERS * qwgmma_epilogue_floats<BN, BM / CONSUMERS>() * 4 +
           (size_t)STAGES * 2 * 8 + 1024;
}

/* Input e of a consumer's epilogue (qwgmma_epilogue_floats's order) for the tile at row0, col0;
 * 0 outside m x n. */
template <typename O, int BN>
__device__ __forceinline__ float qwgmma_epilogue_input(const ktune_qmatmul_epilogue &ep, int e,
                                                       int64_t row0, int64_t col0, int m, int n)
{
    if (e < 2 * BN) {
        const int64_t col = col0 + e % BN;
        if (col >= n)
            return 0.f;
        if (e < BN)
            return __ldg(ep.w_scale + (ep.w_scale_per_channel ? col : 0));
        return ep.bias ? ktune_common::to_float<O>(static_cast<const O *>(ep.bias)[col]) : 0.f;
    }
    const int64_t row = row0 + e - 2 * BN;
    return row < m ? __ldg(ep.a_scale + (ep.a_scale_per_token ? row : 0)) : 0.f;
}

#define KTUNE_QWGMMA_R8 "%0, %1, %2, %3"
#define KTUNE_QWGMMA_R16 KTUNE_QWGMMA_R8 ", %4, %5, %6, %7"
#define KTUNE_QWGMMA_R32 KTUNE_QWGMMA_R16 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define KTUNE_QWGMMA_R64                                                                           \
    KTUNE_QWGMMA_R32 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "    \
                     "%30, %31"
#define KTUNE_QWGMMA_R128                                                                          \
    KTUNE_QWGMMA_R64 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "    \
                     "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, " \
                     "%61, %62, %63"
#define KTUNE_QWGMMA_R192                                                                          \
    KTUNE_QWGMMA_R128 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, "   \
                      "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, "     \
                      "%92, %93, %94, %95"
#define KTUNE_QWGMMA_R256                                                                          \
    KTUNE_QWGMMA_R192 ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, "     \
                      "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, "   \
                      "%120, %121, %122, %123, %124, %125, %126, %127"
#define KTUNE_QWGMMA_V4(C, i) C(d[i]), C(d[i + 1]), C(d[i + 2]), C(d[i + 3])
#define KTUNE_QWGMMA_V8(C, i) KTUNE_QWGMMA_V4(C, i), KTUNE_QWGMMA_V4(C, i + 4)
#define KTUNE_QWGMMA_V32(C, i)                                                                     \
    KTUNE_QWGMMA_V8(C, i), KTUNE_QWGMMA_V8(C, i + 8), KTUNE_QWGMMA_V8(C, i + 16),                  \
        KTUNE_QWGMMA_V8(C, i + 24)
/* the N / 2 accumulators of an m64nN multiply, each bound with constraint C */
#define KTUNE_QWGMMA_D8(C) KTUNE_QWGMMA_V4(C, 0)
#define KTUNE_QWGMMA_D16(C) KTUNE_QWGMMA_V8(C, 0)
#define KTUNE_QWGMMA_D32(C) KTUNE_QWGMMA_V8(C, 0), KTUNE_QWGMMA_V8(C, 8)
#define KTUNE_QWGMMA_D64(C) KTUNE_QWGMMA_V32(C, 0)
#define KTUNE_QWGMMA_D128(C) KTUNE_QWGMMA_V32(C, 0), KTUNE_QWGMMA_V32(C, 32)
#define KTUNE_QWGMMA_D192(C)                                                                       \
    KTUNE_QWGMMA_V32(C, 0), KTUNE_QWGMMA_V32(C, 32), KTUNE_QWGMMA_V32(C, 64)
#define KTUNE_QWGMMA_D256(C) KTUNE_QWGMMA_D192(C), KTUNE_QWGMMA_V32(C, 96)
#define KTUNE_QWGMMA_INT(x) "+r"(x)
#define KTUNE_QWGMMA_FLOAT(x) "+f"(x)
/* d (64 x N) = a (64 x 32) * b (N x 32)^T (+ d where accumulate is not 0) on descriptors; A, B,
 * S the operand numbers of da, db and accumulate. int8: no operand scales; e4m3: both 1. */
#define KTUNE_QWGMMA_S8(N, A, B, S)                                                                \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #S ", 0;\n"                                  \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k32.s32.s8.s8 {" KTUNE_QWGMMA_R##N       \
                 "}, %" #A ", %" #B ", p;\n}\n"                                                    \
                 : KTUNE_QWGMMA_D##N(KTUNE_QWGMMA_INT)                                             \
                 : "l"(da), "l"(db), "r"(accumulate))
#define KTUNE_QWGMMA_E4M3(N, A, B, S)                                                              \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #S ", 0;\n"                                  \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 {" KTUNE_QWGMMA_R##N   \
                 "}, %" #A ", %" #B ", p, 1, 1;\n}\n"                                              \
                 : KTUNE_QWGMMA_D##N(KTUNE_QWGMMA_FLOAT)                                           \
                 : "l"(da), "l"(db), "r"(accumulate))

/* One warpgroup's d (64 x N) = a b^T (+ d where accumulate is not 0) over a 32-wide k step; both
 * tiles K-major in shared memory, the fragment laid out as wgmma_m64k16's (ktune_matmul_impl). */
template <typename Q, int N>
__device__ __forceinline__ void wgmma_m64k32(typename accumulator<Q>::type (&d)[N / 2], uint64_t da,
                                             uint64_t db, int accumulate)
{
#ifdef KTUNE_WGMMA_DEVICE
/* OP(N, ...) for the template's N, its operand numbers after the N / 2 accumulators */
#define KTUNE_QWGMMA_ANY_N(OP)                                                                     \
    if constexpr (N == 8)                                                                          \
        OP(8, 4, 5, 6);                                                                            \
    else if constexpr (N == 16)                                                                    \
        OP(16, 8, 9, 10);                                                                          \
    else if constexpr (N == 32)                                                                    \
        OP(32, 16, 17, 18);                                                                        \
    else if constexpr (N == 64)                                                                    \
        OP(64, 32, 33, 34);                                                                        \
    else if constexpr (N == 128)                                                                   \
        OP(128, 64, 65, 66);                                                                       \
    else if constexpr (N == 192)                                                                   \
        OP(192, 96, 97, 98);                                                                       \
    else {                                                                                         \
        static_assert(N == 256, "N of 8, 16, 32, 64, 128, 192 or 256");                            \
        OP(256, 128, 129, 130);                                                                    \
    }
    if constexpr (std::is_same<Q, int8_t>::value) {
        KTUNE_QWGMMA_ANY_N(KTUNE_QWGMMA_S8)
    } else {
        KTUNE_QWGMMA_ANY_N(KTUNE_QWGMMA_E4M3)
    }
#undef KTUNE_QWGMMA_ANY_N
#else
    (void)d, (void)da, (void)db, (void)accumulate;
#endif
}

#undef KTUNE_QWGMMA_E4M3
#undef KTUNE_QWGMMA_S8
#undef KTUNE_QWGMMA_FLOAT
#undef KTUNE_QWGMMA_INT
#undef KTUNE_QWGMMA_D256
#undef KTUNE_QWGMMA_D192
#undef KTUNE_QWGMMA_D128
#undef KTUNE_QWGMMA_D64
#undef KTUNE_QWGMMA_D32
#undef KTUNE_QWGMMA_D16
#undef KTUNE_QWGMMA_D8
#undef KTUNE_QWGMMA_V32
#undef KTUNE_QWGMMA_V8
#undef KTUNE_QWGMMA_V4
#undef KTUNE_QWGMMA_R256
#undef KTUNE_QWGMMA_R192
#undef KTUNE_QWGMMA_R128
#undef KTUNE_QWGMMA_R64
#undef KTUNE_QWGMMA_R32
#undef KTUNE_QWGMMA_R16
#undef KTUNE_QWGMMA_R8

#ifdef KTUNE_WGMMA_DEVICE
/* Issues the multiplies of one ring stage (128 k: four k32 steps) of a consumer into d: d = the
 * stage's products where fresh, d += them otherwise; rows f * 64 .. of the a tile times the b
 * tile (N rows) transposed, both 128-byte swizzled rows at shared addresses a_tile and b_tile.
 * Commits them as one group and returns without waiting. */
template <typename Q, int N, int FM>
__device__ __forceinline__ void qwgmma_slice(typename accumulator<Q>::type (&d)[FM][N / 2],
                                             uint32_t a_tile, uint32_t b_tile, bool fresh)
{
#pragma unroll
    for (int f = 0; f < FM; f++)
        wgmma_fence_registers(d[f]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < QWGMMA_BK / 32; kk++)
#pragma unroll
        for (int f = 0; f < FM; f++)
            wgmma_m64k32<Q, N>(d[f], wgmma_desc(a_tile + f * 64 * 128 + kk * 32),
                               wgmma_desc(b_tile + kk * 32), kk > 0 || !fresh);
    wgmma_commit();
#pragma unroll
    for (int f = 0; f < FM; f++)
        wgmma_fence_registers(d[f]);
}

/* total += d, once d's multiplies are done. */
template <int FM, int N>
__device__ __forceinline__ void qwgmma_promote(float (&total)[FM][N / 2], float (&d)[FM][N / 2])
{
#pragma unroll
    for (int f = 0; f < FM; f++) {
        wgmma_fence_registers(d[f]);
#pragma unroll
        for (int i = 0; i < N / 2; i++)
            total[f][i] += d[f][i];
    }
}
#endif

template <typename Q, typename O, int BM, int BN, int CONSUMERS, int STAGES, int SPLIT>
__global__ void __launch_bounds__((CONSUMERS + 1) * 128, 1)
    qwgmma_kernel(const __grid_constant__ CUtensorMap map_a,
                  const __grid_constant__ CUtensorMap map_w,
                  const __grid_constant__ CUtensorMap map_c, O *__restrict__ c, int m, int n, int k,
                  ktune_qmatmul_epilogue ep, int flags)
{
    using acc_t = typename accumulator<Q>::type;
    constexpr int WM = BM / CONSUMERS, FM = WM / 64; /* a consumer's rows, in 64-row pieces */
    static_assert(WM % 64 == 0 && FM * BN / 2 <= 128, "64-row pieces, at most 128 accumulators");
    static_assert(CONSUMERS >= 1 && CONSUMERS <= 3, "one to three consumer warpgroups");
    static_assert(CONSUMERS < 3 || FM * BN / 2 <= 64, "three consumers: 64 accumulators a thread");
    static_assert(SPLIT == 1 || (size_t)STAGES * (BM + BN) * QWGMMA_BK >= (size_t)BM * BN * 4,
                  "a split's tile of partial sums takes the ring's place");
#ifdef KTUNE_WGMMA_DEVICE
    constexpr uint32_t A_BYTES = BM * QWGMMA_BK, W_BYTES = BN * QWGMMA_BK;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *const smem = smem_raw + (1024 - smem_addr(smem_raw) % 1024) % 1024;
    unsigned char *const ring_a = smem, *const ring_w = smem + STAGES * A_BYTES;
    unsigned char *const staging = smem + STAGES * (A_BYTES + W_BYTES);
    constexpr int EPI = qwgmma_epilogue_floats<BN, WM>();
    float *const epi_all = reinterpret_cast<float *>(staging + CONSUMERS * 2 * STAGING_BYTES);
    uint64_t *const full = reinterpret_cast<uint64_t *>(epi_all + CONSUMERS * EPI);
    uint64_t *const empty = full + STAGES;

    const int tiles_m = (m + BM - 1) / BM, tiles_n = (n + BN - 1) / BN, tiles = tiles_m * tiles_n;
    const int ktiles = (k + QWGMMA_BK - 1) / QWGMMA_BK;
    const int warpgroup = threadIdx.x / 128, tid = threadIdx.x % 128;
    /* SPLIT > 1: the cluster's blocks each take a share of k of one tile */
    const int split = SPLIT > 1 ? (int)ktune_cluster::rank() : 0;
    const int kt0 = (int)((int64_t)ktiles * split / SPLIT),
              kt1 = (int)((int64_t)ktiles * (split + 1) / SPLIT);

    ring_barriers_init<STAGES, CONSUMERS>(full, empty);

    if (warpgroup == 0) {
        if constexpr (CONSUMERS > 1)
            registers_lower<40>();
        if (tid == 0) {
            int s = 0, phase = 0;
            for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
                int tm, tn;
                grouped_tile(tile, tiles_m, tiles_n, tm, tn);
                for (int kt = kt0; kt < kt1; kt++) {
                    barrier_wait(&empty[s], phase ^ 1);
                    barrier_expect(&full[s], A_BYTES + W_BYTES);
                    tma_load(ring_a + s * A_BYTES, &map_a, kt * QWGMMA_BK, tm * BM, &full[s]);
                    tma_load(ring_w + s * W_BYTES, &map_w, kt * QWGMMA_BK, tn * BN, &full[s]);
                    ring_next<STAGES>(s, phase);
                }
            }
        }
        if constexpr (SPLIT > 1) { /* the consumers' three cluster barriers (below) */
            ktune_cluster::sync();
            ktune_cluster::sync();
            ktune_cluster::sync();
        }
        return;
    }

    /* the producer keeps 40 registers a thread, the consumers share the rest of the 64 K */
    if constexpr (CONSUMERS > 1)
        registers_raise<CONSUMERS == 2 ? 232 : 152>();
    const int consumer = warpgroup - 1;
    const int warp = tid / 32, lane = tid % 32;
    float *const epi = epi_all + consumer * EPI; /* w_scale[BN], bias[BN], a_scale[WM] */
    int buffer = 0;                              /* the next staging buffer of this consumer */
    /* int8: one set of accumulators, the stages' multiplies chained on it. fp8: the tensor cores
     * keep fewer bits of a sum than fp32 does, so each stage's sums (128 k) are added into fp32
     * totals, as cuBLASLt does unless told to accumulate fast, once that stage's multiplies are
     * done. Where the registers hold a second set (PAIRS: at most 64 accumulators a set, one or
     * two consumers), the stages are taken two at a time, the second's multiplies issued before
     * the first's sums are added, so that the tensor cores work while the consumer adds; three
     * consumers (152 registers a thread) and sets of 96 (64 x 192 pieces) have no room for it,
     * and keep the tensor cores busy with the other consumers' multiplies instead. Nothing stays
     * in flight from one iteration into the next: where sums are read in a later iteration than
     * the one that issued their multiplies, ptxas serializes every multiply of the kernel (its
     * warning C7514). */
    constexpr bool PROMOTE = !std::is_same<Q, int8_t>::value;
    constexpr bool PAIRS = PROMOTE && CONSUMERS < 3 && FM * BN / 2 <= 64;
    acc_t d[FM][BN / 2];
    float total[PROMOTE ? FM : 1][PROMOTE ? BN / 2 : 1];
    acc_t second[PAIRS ? FM : 1][PAIRS ? BN / 2 : 1];
    int s = 0, phase = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int tm, tn;
        grouped_tile(tile, tiles_m, tiles_n, tm, tn);
        const int row0 = tm * BM + consumer * WM, col0 = tn * BN;
        /* the epilogue's inputs, loaded now and used after the multiplies (a split's sums are
         * scaled where they are added up, below) */
        float input[(EPI + 127) / 128];
#pragma unroll
        for (int i = 0; i < (EPI + 127) / 128; i++)
            input[i] = SPLIT == 1 && tid + i * 128 < EPI
                           ? qwgmma_epilogue_input<O, BN>(ep, tid + i * 128, row0, col0, m, n)
                           : 0.f;
        if constexpr (PROMOTE)
#pragma unroll
            for (int f = 0; f < FM; f++)
#pragma unroll
                for (int i = 0; i < BN / 2; i++)
                    total[f][i] = 0.f;
        if (kt1 == kt0) /* a split without a share of k (k shorter than the splits) */
#pragma unroll
            for (int f = 0; f < FM; f++)
#pragma unroll
                for (int i = 0; i < BN / 2; i++)
                    d[f][i] = 0;
        /* the consumer's rows of stage s's slice of A, and the slice of W */
        const auto a_tile = [&](int stage) {
            return smem_addr(ring_a + stage * A_BYTES) + consumer * WM * 128;
        };
        const auto b_tile = [&](int stage) { return smem_addr(ring_w + stage * W_BYTES); };
        int released = -1; /* the stage whose multiplies may still be in flight */
        if constexpr (PROMOTE) {
            for (int kt = kt0; kt < kt1;) {
                const int first = s;
                barrier_wait(&full[s], phase);
                qwgmma_slice<Q, BN, FM>(d, a_tile(s), b_tile(s), true);
                ring_next<STAGES>(s, phase);
                bool paired = false;
                if constexpr (PAIRS) {
                    if (kt + 1 < kt1) {
                        barrier_wait(&full[s], phase);
                        qwgmma_slice<Q, BN, FM>(second, a_tile(s), b_tile(s), true);
                        wgmma_wait<1>();
                        qwgmma_promote<FM, BN>(total, d);
                        if (tid == 0)
                            barrier_arrive(&empty[first]);
                        wgmma_wait<0>();
                        qwgmma_promote<FM, BN>(total, second);
                        if (tid == 0)
                            barrier_arrive(&empty[s]);
                        ring_next<STAGES>(s, phase);
                        paired = true;
                    }
                }
                if (!paired) {
                    wgmma_wait<0>();
                    qwgmma_promote<FM, BN>(total, d);
                    if (tid == 0)
                        barrier_arrive(&empty[first]);
                }
                kt += paired ? 2 : 1;
            }
        } else {
            for (int kt = kt0; kt < kt1; kt++) {
                barrier_wait(&full[s], phase);
                qwgmma_slice<Q, BN, FM>(d, a_tile(s), b_tile(s), kt == kt0);
                wgmma_wait<1>();
                if (released >= 0 && tid == 0)
                    barrier_arrive(&empty[released]);
                released = s;
                ring_next<STAGES>(s, phase);
            }
        }
        wgmma_wait<0>();
#pragma unroll
        for (int f = 0; f < FM; f++)
            wgmma_fence_registers(d[f]);
        if (tid == 0 && released >= 0)
            barrier_arrive(&empty[released]);

        if constexpr (SPLIT > 1) {
            /* every block's partial sums into its shared memory, where the ring was (its loads
             * and multiplies are all done once the cluster meets), then each block adds up a
             * share of the tile from all of them and stores it through the epilogue */
            ktune_cluster::sync();
            using sum_pair = ktune_cluster::sum_pair<acc_t>;
            sum_pair *const sums = reinterpret_cast<sum_pair *>(smem);
            if constexpr (PROMOTE)
                store_sum_pairs<FM, BN>(sums, total, consumer * WM, tid);
            else
                store_sum_pairs<FM, BN>(sums, d, consumer * WM, tid);
            ktune_cluster::sync();
            ktune_cluster::add_split_pairs<SPLIT, BM * BN / 2>(
                sums, consumer * 128 + tid, CONSUMERS * 128, [&](int i, const sum_pair &v) {
                    const int64_t row = (int64_t)tm * BM + 2 * i / BN,
                                  col = (int64_t)col0 + 2 * i % BN;
                    if (row < m && col < n)
                        store_pair(c, row, col, m, n, epilogue_value<O>((float)v.x, ep, row, col),
                                   col + 1 < n ? epilogue_value<O>((float)v.y, ep, row, col + 1)
                                               : 0.f,
                                   flags & PAIR_STORES);
                });
            ktune_cluster::sync(); /* no block leaves while another reads its sums */
            continue;
        }

        warpgroup_sync(consumer); /* the previous tile's epilogue has read epi */
#pragma unroll
        for (int i = 0; i < (EPI + 127) / 128; i++)
            if (tid + i * 128 < EPI)
                epi[tid + i * 128] = input[i];
        warpgroup_sync(consumer);
#pragma unroll
        for (int f = 0; f < FM; f++) {
            /* accumulator i = 4j + q: row warp * 16 + lane / 4 (+ 8 for q >= 2) of the piece,
             * column 8j + 2 (lane % 4) (+ 1 for odd q) */
            const auto value = [&](int i) {
                const int r = f * 64 + warp * 16 + lane / 4 + (i % 4 >= 2 ? 8 : 0);
                const int col = i / 4 * 8 + 2 * (lane % 4) + i % 2;
                float sum;
                if constexpr (PROMOTE)
                    sum = total[f][i];
                else
                    sum = (float)d[f][i];
                return sum * epi[2 * BN + r] * epi[col] + epi[BN + col];
            };
            store_piece<O, BN>(flags, &map_c, staging + consumer * 2 * STAGING_BYTES, buffer, c,
                               row0 + f * 64, col0, m, n, value, tid, consumer);
        }
    }
    if (tid == 0)
        tma_store_wait_all(); /* shared memory stays until the last store has read it */
#else
    (void)map_a, (void)map_w, (void)map_c, (void)c, (void)m, (void)n, (void)k, (void)ep,
        (void)flags;
#endif
}

/* A TMA map of a row-major rows x cols matrix of bytes, boxes of box_rows x 128 in 128-byte
 * swizzle. False where TMA cannot address it. */
inline bool byte_tensor_map(CUtensorMap *map, const void *base, int64_t rows, int64_t cols,
                            int box_rows)
{
    if ((uintptr_t)base % 16 != 0 || cols % 16 != 0)
        return false;
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)cols};
    const cuuint32_t box[2] = {QWGMMA_BK, (cuuint32_t)box_rows};
    return encode_map<uint8_t>(map, 2, base, dims, strides, box);
}

template <int BM, int BN, int CONSUMERS, int STAGES, int SPLIT> struct qwgmma_launcher {
    template <typename Q, typename O>
    static cudaError_t run(const void *a, const void *w, void *c, int64_t m, int64_t n, int64_t k,
                           const ktune_qmatmul_epilogue &ep, cudaStream_t s)
    {
        if (!KTUNE_SM90A) /* the kernel has no code in this build */
            return cudaErrorNotSupported;
        /* fp8 holds a second set of accumulators (the fp32 totals): at most 96 of each a thread
         * (the kernel is not even compiled beyond) */
        if constexpr (!std::is_same<Q, int8_t>::value && BM / CONSUMERS / 64 * BN > 192)
            return cudaErrorNotSupported;
        else
            return launch<Q, O>(a, w, c, m, n, k, ep, s);
    }

    template <typename Q, typename O>
    static cudaError_t launch(const void *a, const void *w, void *c, int64_t m, int64_t n,
                              int64_t k, const ktune_qmatmul_epilogue &ep, cudaStream_t s)
    {
        const int64_t tiles = ((m + BM - 1) / BM) * ((n + BN - 1) / BN);
        if (tiles > INT32_MAX)
            return cudaErrorInvalidValue;
        CUtensorMap map_a, map_w, map_c;
        if (!byte_tensor_map(&map_a, a, m, k, BM) || !byte_tensor_map(&map_w, w, n, k, BN))
            return cudaErrorInvalidValue;
        const int flags = with_tma_stores<O>(pair_stores(c, n), &map_c, c, m, n, 64, map_a);
        constexpr auto kernel = qwgmma_kernel<Q, O, BM, BN, CONSUMERS, STAGES, SPLIT>;
        const dim3 block((CONSUMERS + 1) * 128);
        constexpr size_t smem = qwgmma_smem_bytes<BM, BN, CONSUMERS, STAGES>();
        if constexpr (SPLIT > 1) /* a cluster a tile, each of its blocks a share of k */
            return ktune_launch::launch(kernel, dim3((unsigned)tiles, SPLIT), block,
                                        dim3(1, SPLIT, 1), smem, s, map_a, map_w, map_c, (O *)c,
                                        (int)m, (int)n, (int)k, ep, flags);
        return ktune_launch::launch_persistent<kernel>(block, smem, tiles, s, map_a, map_w, map_c,
                                                       (O *)c, (int)m, (int)n, (int)k, ep, flags);
    }
};

} // namespace ktune_qmatmul_impl
