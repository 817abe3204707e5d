/* The wgemv variant (sm_90a): small or odd m on wgmma, with the weight as the 64-row operand.
 *
 * C^T = W A^T: a block owns BM rows of W and BN rows of A (columns of C^T, wgmma's N, any of 8 to
 * 256 in the steps wgmma_m64k16 takes: all of m where m <= BN, else a row tile of A, so that an
 * odd m is padded to a multiple of BN rather than of 64 or 128), and k is split over the SPLIT
 * blocks of a cluster (contiguous ranges of 64-wide slices): few tiles still keep every SM busy.
 * One thread of the producer warp streams the block's slices of W (BM x 64) and A (BN x 64) by
 * TMA into a STAGES-deep ring of shared memory in 128-byte swizzle, each slice completing on its
 * stage's "full" barrier; the consumer warpgroup multiplies straight from the ring (one 64-row
 * wgmma a 16-wide k step and 64 rows of W), keeping one stage's multiplies in flight, and frees
 * each stage on its "empty" barrier. W is read once, in 8 or 16 KB copies with many in flight:
 * the memory system, not the threads, keeps the weight streaming.
 *
 * The partial sums of the blocks of a cluster meet through distributed shared memory; each block
 * writes a share of the tile. Tails: TMA fills parts of a box outside A or W with zeros, and only
 * the m x n part of the tile is written. TMA needs k % 8 == 0 (a constraint of the space) and
 * 16-byte aligned A and W; a call whose pointers are not aligned runs the family's default GEMV
 * (BN <= 32) or tensor-core tile for that m instead.
 *
 * Which tile a block computes is a policy of one tile a block (not persistent: a block's tile is
 * blockIdx.x): params (a kernel argument), SMEM (bytes of shared memory it keeps, after the
 * ring's), a constructor from the params and that memory, prepare() (every thread, before the
 * block's first barrier) and locate(tile, place) (every thread, after it: where the tile lies, or
 * false past the policy's tiles, and the block does nothing). The tile's rows are A's (at most BN
 * of them: row0 to row_end), its columns W's. The matmul family's is column_tiles<BN, BM> (below);
 * the moe family's finds a group's tile from the offsets (group_locator). */
#pragma once

#include "matmul_gemv.cuh"
#include "matmul_wgmma.cuh"

namespace ktune_matmul_impl {

template <int BM, int BN, int STAGES> constexpr size_t wgemv_smem_bytes()
{
    /* the ring, the block's partial tile (fp32), two barriers a stage, and slack to align the
     * ring to 1024 bytes (a Tiles policy's memory comes after) */
    return (size_t)STAGES * (BM + BN) * WGMMA_BK * 2 + (size_t)BM * BN * 4 + (size_t)STAGES * 2 * 8 +
           1024;
}

/* The matmul family's wgemv tiles: BN rows of A by BM columns of C, the row tiles of one column
 * of tiles in a row (blocks running together share that column's slices of W in L2; A, a few
 * hundred rows at most where this variant pays, stays in L2). A block of the usual m <= BN finds
 * its tile without dividing. */
template <int BN, int BM> struct column_tiles {
    struct params {
        int m, n;
    };
    static constexpr size_t SMEM = 0;
    int m, tiles_m, tiles_n;
    __device__ __forceinline__ column_tiles(const params &p, void *)
        : m(p.m), tiles_m((p.m + BN - 1) / BN), tiles_n((p.n + BM - 1) / BM)
    {
    }
    __device__ __forceinline__ void prepare() const {}
    __device__ __forceinline__ int count() const { return tiles_m * tiles_n; }
    __device__ __forceinline__ tile_place at(int tile) const
    {
        if (tiles_m == 1)
            return {0, m, tile * BM, tile * BM};
        const int tn = tile / tiles_m, tm = tile - tn * tiles_m;
        return {tm * BN, m, tn * BM, tn * BM};
    }
    __device__ __forceinline__ bool locate(int tile, tile_place &place) const
    {
        if (tile >= count())
            return false;
        place = at(tile);
        return true;
    }
};

#ifdef KTUNE_WGMMA_DEVICE
/* Set up by one thread of a wgemv block before the block meets: the ring's barriers (one
 * arrival a phase each: the producer's on "full", with the bytes TMA brings, the consumers' on
 * "empty") and a prefetch of the two TMA descriptors. */
template <int STAGES>
__device__ __forceinline__ void wgemv_ring_init(uint64_t *full, uint64_t *empty,
                                                const CUtensorMap *map_w, const CUtensorMap *map_a)
{
    tma_descriptor_prefetch(map_w);
    tma_descriptor_prefetch(map_a);
    for (int s = 0; s < STAGES; s++) {
        barrier_init(&full[s], 1);
        barrier_init(&empty[s], 1);
    }
    barrier_init_fence();
}

/* The producer of a wgemv block (one thread): slices kt_begin .. kt_end - 1 of k (SLICE elements,
 * 128 bytes, each) of W's rows w_row0 .. and A's rows a_row0 .. by TMA into the STAGES-deep
 * ring, each stage once the consumers have freed it. */
template <int STAGES, int SLICE, uint32_t W_BYTES, uint32_t A_BYTES>
__device__ __forceinline__ void wgemv_produce(unsigned char *ring_w, unsigned char *ring_a,
                                              const CUtensorMap *map_w, const CUtensorMap *map_a,
                                              uint64_t *full, uint64_t *empty, int kt_begin,
                                              int kt_end, int w_row0, int a_row0)
{
    int s = 0, phase = 0;
    for (int kt = kt_begin; kt < kt_end; kt++) {
        barrier_wait(&empty[s], phase ^ 1); /* the consumers are done with the stage */
        barrier_expect(&full[s], W_BYTES + A_BYTES);
        tma_load(ring_w + s * W_BYTES, map_w, kt * SLICE, w_row0, &full[s]);
        tma_load(ring_a + s * A_BYTES, map_a, kt * SLICE, a_row0, &full[s]);
        ring_next<STAGES>(s, phase);
    }
}

/* A consumer warpgroup's sums into the block's partial tile (BM rows of W a column, stored
 * [column][row]): sum(f, i) is accumulator i of its 64-row piece f of W, in wgmma's layout (the
 * caller has fenced the registers it reads). */
template <int FM, int BN, int BM, typename A, typename Sum>
__device__ __forceinline__ void wgemv_store_part(A *part, Sum sum, int warp, int lane)
{
#pragma unroll
    for (int f = 0; f < FM; f++) {
        /* rows f * 64 + 16 warp + lane / 4 (+ 8) of W, columns 8 j + 2 (lane % 4) (+ 1) */
        const int r = f * 64 + warp * 16 + lane / 4;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            const int col = j * 8 + 2 * (lane % 4);
            part[col * BM + r] = sum(f, 4 * j);
            part[(col + 1) * BM + r] = sum(f, 4 * j + 1);
            part[col * BM + r + 8] = sum(f, 4 * j + 2);
            part[(col + 1) * BM + r + 8] = sum(f, 4 * j + 3);
        }
    }
}
#endif

template <typename T, int BM, int BN, int STAGES, int SPLIT, typename Tiles>
__global__ void __launch_bounds__(160)
    wgemv_kernel(const __grid_constant__ CUtensorMap map_w,
                 const __grid_constant__ CUtensorMap map_a, T *__restrict__ c,
                 const typename Tiles::params where, int n, int k)
{
    constexpr int FM = BM / 64; /* 64-row pieces of W a k step */
    constexpr int TILE = BM * BN; /* floats of the block's partial tile, stored [column][row] */
    static_assert(BM % 64 == 0 && FM <= 2, "64 or 128 rows of W");
    static_assert(FM * BN / 2 <= 128, "at most 128 accumulators a thread");
#ifdef KTUNE_WGMMA_DEVICE
    constexpr uint32_t W_BYTES = BM * WGMMA_BK * 2, A_BYTES = BN * WGMMA_BK * 2;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *const smem = smem_raw + (1024 - smem_addr(smem_raw) % 1024) % 1024;
    unsigned char *const ring_w = smem, *const ring_a = smem + STAGES * W_BYTES;
    float *const part = reinterpret_cast<float *>(smem + STAGES * (W_BYTES + A_BYTES));
    uint64_t *const full = reinterpret_cast<uint64_t *>(part + TILE);
    uint64_t *const empty = full + STAGES;

    const Tiles order(where, empty + STAGES);
    order.prepare(); /* warp 0, where the policy has anything to prepare */
    const int split = SPLIT > 1 ? (int)ktune_cluster::rank() : 0;
    const int ktiles = (k + WGMMA_BK - 1) / WGMMA_BK;
    const int kt_begin = (int)((int64_t)ktiles * split / SPLIT);
    const int kt_end = (int)((int64_t)ktiles * (split + 1) / SPLIT);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    if (threadIdx.x == 128) /* the producer's lane, while warp 0 prepares */
        wgemv_ring_init<STAGES>(full, empty, &map_w, &map_a);
    __syncthreads();
    /* a cluster's blocks share blockIdx.x, so they leave together */
    tile_place at;
    if (!order.locate((int)blockIdx.x, at))
        return;
    const int m = min(at.row_end - at.row0, BN), n0 = at.col0;

    float d[FM][BN / 2] = {};
    if (warp == 4) { /* the producer */
        if (lane == 0)
            wgemv_produce<STAGES, WGMMA_BK, W_BYTES, A_BYTES>(ring_w, ring_a, &map_w, &map_a, full,
                                                              empty, kt_begin, kt_end, at.w_row0,
                                                              at.row0);
    } else { /* the consumer warpgroup */
        int s = 0, phase = 0, released = -1; /* released: the stage whose multiplies are in flight */
        for (int kt = kt_begin; kt < kt_end; kt++) {
            barrier_wait(&full[s], phase);
            /* W is the 64-row operand, A the N one */
            wgmma_slice<T, BN, FM>(d, smem_addr(ring_w + s * W_BYTES),
                                   smem_addr(ring_a + s * A_BYTES));
            if (released >= 0 && threadIdx.x == 0) /* the previous stage's multiplies are done */
                barrier_arrive(&empty[released]);
            released = s;
            ring_next<STAGES>(s, phase);
        }
        wgmma_wait<0>();
#pragma unroll
        for (int f = 0; f < FM; f++)
            wgmma_fence_registers(d[f]);
        wgemv_store_part<FM, BN, BM>(part, [&](int f, int i) { return d[f][i]; }, warp, lane);
    }

    const int begin = TILE * split / SPLIT, end = TILE * (split + 1) / SPLIT;
    ktune_cluster::sync_split<SPLIT>();
    for (int i = begin + threadIdx.x; i < end; i += blockDim.x) {
        const int col = i / BM, r = i % BM;
        if (col >= m || n0 + r >= n)
            continue;
        c[(int64_t)(at.row0 + col) * n + n0 + r] =
            to_out<T>(ktune_cluster::sum_split<SPLIT>(part, i));
    }
    if constexpr (SPLIT > 1)
        ktune_cluster::sync(); /* the others' shared memory stays until every block has read it */
#else
    (void)map_w, (void)map_a, (void)c, (void)where, (void)n, (void)k;
#endif
}

template <int BM, int BN, int STAGES, int SPLIT> struct wgemv_launcher {
    template <typename T>
    static cudaError_t run(const void *a, const void *w, void *c, int64_t m, int64_t n, int64_t k,
                           cudaStream_t s)
    {
        if (!KTUNE_SM90A) /* the kernel has no code in this build */
            return cudaErrorNotSupported;
        const int64_t tiles = (m + BN - 1) / BN * ((n + BM - 1) / BM);
        if (k > INT32_MAX || n > INT32_MAX || tiles > INT32_MAX)
            return cudaErrorInvalidValue;
        CUtensorMap map_w, map_a;
        if (!tensor_map<T>(&map_w, w, n, k, BM) || !tensor_map<T>(&map_a, a, m, k, BN)) {
            if constexpr (BN <= 32) {
                if (m <= BN)
                    return gemv_launcher<16, 8, 4, 1, BN / 8>::template run<T>(a, w, c, m, n, k, s);
            }
            return wgmma_fallback::run<T>(a, w, c, m, n, k, s);
        }
        using tiles_t = column_tiles<BN, BM>;
        constexpr auto kernel = wgemv_kernel<T, BM, BN, STAGES, SPLIT, tiles_t>;
        const dim3 grid((unsigned)tiles, SPLIT);
        return ktune_launch::launch(kernel, grid, dim3(160), dim3(1, SPLIT, 1),
                                    wgemv_smem_bytes<BM, BN, STAGES>(), s, map_w, map_a, (T *)c,
                                    typename tiles_t::params{(int)m, (int)n}, (int)n, (int)k);
    }
};

} // namespace ktune_matmul_impl
