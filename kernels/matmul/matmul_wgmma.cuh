/* The wgmma variant (sm_90a): a warp-specialized tensor-core GEMM fed by TMA.
 *
 * Persistent blocks of CONSUMERS + 1 warpgroups take BM x BN tiles of C in turn (block b: tiles
 * b, b + grid, ..., in grouped order). Warpgroup 0 is the producer: one of its threads issues TMA
 * copies of 64-wide k slices of A (BM rows) and W (BN rows) into a STAGES-deep ring of shared
 * memory, in TMA's 128-byte swizzle, each slice completing on the stage's "full" barrier. Each
 * consumer warpgroup owns BM / CONSUMERS rows of the tile and runs wgmma.mma_async on the ring's
 * descriptors straight from shared memory, keeping one stage's multiplies in flight while it
 * waits for the next, then frees the stage on its "empty" barrier. The ring runs on across
 * tiles, so the next tile's slices arrive while the consumers store this one. The producer gives
 * its registers to the consumers (setmaxnreg), whose fp32 accumulators are up to 128 registers a
 * thread.
 *
 * A consumer writes its share of a finished tile in 64 x 64 chunks into one of two staging
 * buffers (128-byte swizzle again, so that the writes are free of bank conflicts), and one of its
 * threads hands each chunk to a TMA store; the warpgroup goes on to the next tile while the
 * stores drain. Rows of C that are not 16-byte aligned (n % 8 != 0) are stored from registers.
 *
 * Tails in m, n and k: TMA fills parts of a box outside the matrix with zeros and stores only
 * inside it. TMA needs 16-byte aligned rows: k % 8 == 0 (a constraint of the space) and 16-byte
 * aligned A and W. A call whose pointers are not aligned runs the family's default tensor-core
 * config instead. */
#pragma once

#include <cudaTypedefs.h> /* PFN_cuTensorMapEncodeTiled */

#include "matmul_mma.cuh"
#include "matmul_wgmma_ops.cuh"

namespace ktune_matmul_impl {

constexpr int WGMMA_BK = 64; /* a k slice: one 128-byte swizzled row of 16-bit elements */
constexpr int STAGING_BYTES = 64 * 128; /* a staging buffer: 64 x 64 16-bit values of C */

template <int BM, int BN, int CONSUMERS, int STAGES> constexpr size_t wgmma_smem_bytes()
{
    /* the ring, two staging buffers a consumer, two barriers a stage, and slack to align the ring
     * to 1024 bytes */
    return (size_t)STAGES * (BM + BN) * WGMMA_BK * 2 + (size_t)CONSUMERS * 2 * STAGING_BYTES +
           (size_t)STAGES * 2 * 8 + 1024;
}

/* A warp's part of a 64 x N fragment (rows row0 .. row0 + 15 of C, columns col0 .. col0 + N - 1;
 * see wgmma_m64k16), stored as 16-bit values inside m x n; value(i) is accumulator i's value in
 * C, in fp32. */
template <typename T, int N, typename Value>
__device__ __forceinline__ void store_fragment(T *c, int64_t row0, int64_t col0, int m, int n,
                                               Value value, int lane, bool pairs)
{
    const int64_t row = row0 + lane / 4;
#pragma unroll
    for (int j = 0; j < N / 8; j++) {
        const int64_t col = col0 + j * 8 + 2 * (lane % 4);
        store_pair(c, row, col, m, n, value(4 * j), value(4 * j + 1), pairs);
        store_pair(c, row + 8, col, m, n, value(4 * j + 2), value(4 * j + 3), pairs);
    }
}

/* A consumer warpgroup's FM pieces of 64 x N accumulators (wgmma's layout, as store_fragment
 * reads it) as the sum pairs of a tile N wide (ktune_cluster::sum_pair), from the tile's row row0:
 * a block's partial sums of a tile whose k a cluster splits. */
template <int FM, int N, typename A>
__device__ __forceinline__ void store_sum_pairs(ktune_cluster::sum_pair<A> *sums,
                                                const A (&d)[FM][N / 2], int row0, int tid)
{
    const int warp = tid / 32, lane = tid % 32;
#pragma unroll
    for (int f = 0; f < FM; f++)
#pragma unroll
        for (int j = 0; j < N / 8; j++) {
            const int r = row0 + f * 64 + warp * 16 + lane / 4, col = j * 8 + 2 * (lane % 4);
            sums[(r * N + col) / 2] = {d[f][4 * j], d[f][4 * j + 1]};
            sums[((r + 8) * N + col) / 2] = {d[f][4 * j + 2], d[f][4 * j + 3]};
        }
}

#ifdef KTUNE_WGMMA_DEVICE
/* Moves s to the ring's next stage; phase, the parity of the stage's fill, flips at the wrap. */
template <int STAGES> __device__ __forceinline__ void ring_next(int &s, int &phase)
{
    if (++s == STAGES) {
        s = 0;
        phase ^= 1;
    }
}

/* One 64-wide k slice of a ring stage: d[f] (64 x N) += rows f * 64 .. of the a tile times the b
 * tile (N rows) transposed, both 128-byte swizzled rows of 64 k at shared addresses a_tile and
 * b_tile. Returns once the previous slice's multiplies are done (this one's stay in flight), so
 * that the caller can free the previous stage. */
template <typename T, int N, int FM>
__device__ __forceinline__ void wgmma_slice(float (&d)[FM][N / 2], uint32_t a_tile, uint32_t b_tile)
{
#pragma unroll
    for (int f = 0; f < FM; f++)
        wgmma_fence_registers(d[f]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < WGMMA_BK / 16; kk++)
#pragma unroll
        for (int f = 0; f < FM; f++)
            wgmma_m64k16<T, N>(d[f], wgmma_desc(a_tile + f * 64 * 128 + kk * 32),
                               wgmma_desc(b_tile + kk * 32));
    wgmma_commit();
#pragma unroll
    for (int f = 0; f < FM; f++)
        wgmma_fence_registers(d[f]);
    wgmma_wait<1>();
}

/* A consumer warpgroup's 64 x N accumulator piece (rows row0 .., columns col0 ..) into C through
 * TMA: 64-column chunks, each written into the staging buffer the store before last has finished
 * reading, then stored by thread 0. buffer says which of the two is next; value(i) is
 * accumulator i's value in C, in fp32. */
template <typename T, int N, typename Value>
__device__ __forceinline__ void store_fragment_tma(const CUtensorMap *map_c, unsigned char *staging,
                                                   int &buffer, int row0, int col0, Value value,
                                                   int tid, int consumer)
{
    /* this thread's rows r and r + 8 of the piece, r % 8 being its group in the warp */
    const int r = tid / 32 * 16 + tid % 32 / 4, t = tid % 4;
#pragma unroll
    for (int chunk = 0; chunk < N / 64; chunk++) {
        unsigned char *const buf = staging + buffer * STAGING_BYTES;
        if (tid == 0)
            tma_store_wait_read<1>();
        warpgroup_sync(consumer);
#pragma unroll
        for (int jj = 0; jj < 8; jj++) {
            const int j = chunk * 8 + jj, swizzled = (jj ^ (r & 7)) * 16 + 4 * t;
            *reinterpret_cast<uint32_t *>(buf + r * 128 + swizzled) =
                pack2<T>(value(4 * j), value(4 * j + 1));
            *reinterpret_cast<uint32_t *>(buf + (r + 8) * 128 + swizzled) =
                pack2<T>(value(4 * j + 2), value(4 * j + 3));
        }
        fence_proxy_async();
        warpgroup_sync(consumer);
        if (tid == 0)
            tma_store(map_c, col0 + chunk * 64, row0, buf);
        buffer ^= 1;
    }
}

/* A consumer's 64 x N piece of C^T (rows w0 .. of W, rows a0 .. of A: C's columns w0 .., rows
 * a0 ..) into the m x n C, transposed. Through TMA where flags has TMA_STORES (map_c's boxes are
 * 16 rows of C by 64 columns, and N a multiple of 16, so that no box reaches past the piece's rows
 * of A into another tile's): chunks of up to 64 rows of C, each written transposed into the
 * staging buffer the store before last has finished reading, then stored by thread 0 as boxes of
 * 16 rows. Else element by element from registers. value(i) is accumulator i's value, in fp32. */
template <typename T, int N, typename Value>
__device__ __forceinline__ void store_piece_transposed(int flags, const CUtensorMap *map_c,
                                                       unsigned char *staging, int &buffer, T *c,
                                                       int w0, int a0, int m, int n, Value value,
                                                       int tid, int consumer)
{
    static_assert(N % 16 == 0, "boxes of 16 rows of C");
    /* this thread's rows r and r + 8 of the piece (columns of C), columns 8 j + 2 t and the next
     * (rows of C) */
    const int r = tid / 32 * 16 + tid % 32 / 4, t = tid % 4;
    if (!(flags & TMA_STORES)) {
#pragma unroll
        for (int j = 0; j < N / 8; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int64_t row = (int64_t)a0 + 8 * j + 2 * t + (i & 1), col = w0 + r + 8 * (i >> 1);
                if (row < m && col < n)
                    c[row * n + col] = to_out<T>(value(4 * j + i));
            }
        return;
    }
#pragma unroll
    for (int chunk = 0; chunk < (N + 63) / 64; chunk++) {
        constexpr int LAST = N % 64 == 0 ? 64 : N % 64;
        const int rows = chunk == (N + 63) / 64 - 1 ? LAST : 64;
        unsigned char *const buf = staging + buffer * STAGING_BYTES;
        if (tid == 0)
            tma_store_wait_read<1>();
        warpgroup_sync(consumer);
#pragma unroll
        for (int jj = 0; jj < 8; jj++) {
            const int j = chunk * 8 + jj;
            if (j >= N / 8)
                break;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                /* row y of the chunk (C's row), column x (C's column) in 128-byte swizzle */
                const int y = 8 * jj + 2 * t + (i & 1), x = r + 8 * (i >> 1);
                *reinterpret_cast<T *>(buf + y * 128 + ((x / 8) ^ (y % 8)) * 16 + x % 8 * 2) =
                    to_out<T>(value(4 * j + i));
            }
        }
        fence_proxy_async();
        warpgroup_sync(consumer);
        if (tid == 0)
            for (int b = 0; b < rows / 16; b++)
                tma_store(map_c, w0, a0 + chunk * 64 + 16 * b, buf + b * 16 * 128);
        buffer ^= 1;
    }
}

/* A consumer's 64 x N piece (rows row0 .., columns col0 ..) into C: through TMA where flags has
 * TMA_STORES, else from registers (in pairs where it has PAIR_STORES); value(i) is accumulator
 * i's value in C, in fp32. */
template <typename T, int N, typename Value>
__device__ __forceinline__ void store_piece(int flags, const CUtensorMap *map_c,
                                            unsigned char *staging, int &buffer, T *c, int row0,
                                            int col0, int m, int n, Value value, int tid,
                                            int consumer)
{
    if (flags & TMA_STORES)
        store_fragment_tma<T, N>(map_c, staging, buffer, row0, col0, value, tid, consumer);
    else
        store_fragment<T, N>(c, (int64_t)row0 + tid / 32 * 16, col0, m, n, value, tid % 32,
                             flags & PAIR_STORES);
}
#endif

/* Where a tile of C lies: rows row0 .. of C and A, of which those below row_end are the tile's;
 * rows w_row0 .. of W (its TMA map's rows); columns col0 .. of C. */
struct tile_place {
    int row0, row_end, w_row0, col0;
};

/* Which tiles a persistent kernel computes, in which order: a Tiles type has params (a kernel
 * argument), SMEM (bytes of shared memory it keeps), a constructor from the params and that
 * memory, prepare() (called by every thread of the block before the block's first barrier, which
 * publishes what it wrote), count() and at(tile). The matmul family's: BM x BN tiles of an m x n
 * C in grouped order. */
template <int BM, int BN> struct dense_tiles {
    struct params {
        int m, n;
    };
    static constexpr size_t SMEM = 0;
    int m, tiles_m, tiles_n;
    __device__ __forceinline__ dense_tiles(const params &p, void *)
        : m(p.m), tiles_m((p.m + BM - 1) / BM), tiles_n((p.n + BN - 1) / BN)
    {
    }
    __device__ __forceinline__ void prepare() const {}
    __device__ __forceinline__ int count() const { return tiles_m * tiles_n; }
    __device__ __forceinline__ tile_place at(int tile) const
    {
        int tm, tn;
        grouped_tile(tile, tiles_m, tiles_n, tm, tn);
        return {tm * BM, m, tn * BN, tn * BN};
    }
};

/* The tiles of C^T = W A^T (TRANSPOSED: the kernel's 64-row operand is W, its N operand A, and
 * each tile is stored transposed): BW rows of W by BA rows of A, in dense_tiles' order of C's
 * tiles (the row tiles of A of one tile of W next to each other, so that blocks running at the
 * same time share that tile's slices of W in L2). For m of tens to hundreds, which BA, any
 * multiple of 16, pads less than the 64-row pieces of the kernel's other operand would. */
template <int BW, int BA> struct transposed_tiles : dense_tiles<BA, BW> {
    static constexpr bool TRANSPOSED = true;
    using params = typename dense_tiles<BA, BW>::params;
    int n;
    __device__ __forceinline__ transposed_tiles(const params &p, void *mem)
        : dense_tiles<BA, BW>(p, mem), n(p.n)
    {
    }
    /* C's tile of rows row0 .. and columns col0 .. as a tile of C^T */
    __device__ __forceinline__ tile_place at(int tile) const
    {
        const tile_place c = dense_tiles<BA, BW>::at(tile);
        return {c.col0, n, c.row0, c.row0};
    }
};

/* Whether a Tiles policy's tiles are of C^T (transposed_tiles). */
template <typename Tiles, typename = void> struct stores_transposed : std::false_type {
};
template <typename Tiles>
struct stores_transposed<Tiles, std::void_t<decltype(Tiles::TRANSPOSED)>>
    : std::integral_constant<bool, Tiles::TRANSPOSED> {
};

/* Tiles first .. first + count - 1 of Inner's order: the share of one of a config's launches. */
template <typename Inner> struct tile_range {
    struct params {
        typename Inner::params inner;
        int first, count;
    };
    static constexpr size_t SMEM = Inner::SMEM;
    Inner inner;
    int first, n;
    __device__ __forceinline__ tile_range(const params &p, void *mem)
        : inner(p.inner, mem), first(p.first), n(p.count)
    {
    }
    __device__ __forceinline__ void prepare() const { inner.prepare(); }
    __device__ __forceinline__ int count() const { return n; }
    __device__ __forceinline__ tile_place at(int tile) const { return inner.at(first + tile); }
};

/* C is m x n; a piece of 64 rows goes through TMA (where flags has TMA_STORES) when its rows are
 * the tile's or lie past the end of C, where TMA stores nothing.
 *
 * SPLIT > 1 (few output tiles, a long k): a cluster of SPLIT blocks a tile (a grid of one tile a
 * cluster), each multiplying a share of k; their partial sums meet in distributed shared memory,
 * where the ring was, and each block adds up a SPLIT-th of the tile and stores it from
 * registers.
 *
 * Tiles with TRANSPOSED (transposed_tiles): the launcher passes W's map as map_a and A's as map_w,
 * a tile's rows are W's and its columns A's, and it is stored transposed into the m x n C
 * (store_piece_transposed; map_c's boxes 16 rows of C by 64 columns). */
template <typename T, int BM, int BN, int CONSUMERS, int STAGES, typename Tiles, int SPLIT = 1>
__global__ void __launch_bounds__((CONSUMERS + 1) * 128, 1)
    wgmma_kernel(const __grid_constant__ CUtensorMap map_a,
                 const __grid_constant__ CUtensorMap map_w,
                 const __grid_constant__ CUtensorMap map_c, T *__restrict__ c,
                 const typename Tiles::params where, int m, int n, int k, int flags)
{
    constexpr int WM = BM / CONSUMERS, FM = WM / 64; /* a consumer's rows, in 64-row pieces */
    static_assert(WM % 64 == 0 && FM * BN / 2 <= 128, "64-row pieces, at most 128 accumulators");
    static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
    static_assert(SPLIT == 1 || (size_t)STAGES * (BM + BN) * WGMMA_BK * 2 >= (size_t)BM * BN * 4,
                  "a split's tile of partial sums takes the ring's place");
#ifdef KTUNE_WGMMA_DEVICE
    constexpr uint32_t A_BYTES = BM * WGMMA_BK * 2, W_BYTES = BN * WGMMA_BK * 2;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *const smem = smem_raw + (1024 - smem_addr(smem_raw) % 1024) % 1024;
    unsigned char *const ring_a = smem, *const ring_w = smem + STAGES * A_BYTES;
    unsigned char *const staging = smem + STAGES * (A_BYTES + W_BYTES);
    uint64_t *const full = reinterpret_cast<uint64_t *>(staging + CONSUMERS * 2 * STAGING_BYTES);
    uint64_t *const empty = full + STAGES;

    Tiles order(where, empty + STAGES);
    order.prepare();
    const int ktiles = (k + WGMMA_BK - 1) / WGMMA_BK;
    const int warpgroup = threadIdx.x / 128, tid = threadIdx.x % 128;
    /* SPLIT > 1: the cluster's blocks each take a share of k of one tile */
    const int split = SPLIT > 1 ? (int)ktune_cluster::rank() : 0;
    const int kt0 = (int)((int64_t)ktiles * split / SPLIT),
              kt1 = (int)((int64_t)ktiles * (split + 1) / SPLIT);

    ring_barriers_init<STAGES, CONSUMERS>(full, empty);
    const int tiles = order.count();

    if (warpgroup == 0) {
        if constexpr (CONSUMERS > 1)
            registers_lower<40>();
        if (tid == 0) {
            int s = 0, phase = 0;
            for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
                const tile_place at = order.at(tile);
                for (int kt = kt0; kt < kt1; kt++) {
                    barrier_wait(&empty[s], phase ^ 1); /* the consumers are done with the stage */
                    barrier_expect(&full[s], A_BYTES + W_BYTES);
                    tma_load(ring_a + s * A_BYTES, &map_a, kt * WGMMA_BK, at.row0, &full[s]);
                    tma_load(ring_w + s * W_BYTES, &map_w, kt * WGMMA_BK, at.w_row0, &full[s]);
                    ring_next<STAGES>(s, phase);
                }
            }
        }
        if constexpr (SPLIT > 1) { /* the consumers' three cluster barriers (below) */
            ktune_cluster::sync();
            ktune_cluster::sync();
            ktune_cluster::sync();
        }
        return; /* the consumers wait for every copy this thread issued */
    }

    if constexpr (CONSUMERS > 1)
        registers_raise<232>();
    const int consumer = warpgroup - 1;
    int buffer = 0; /* the next staging buffer of this consumer */
    float d[FM][BN / 2];
    int s = 0, phase = 0; /* the ring's next stage, and the parity of its fill */
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
#pragma unroll
        for (int f = 0; f < FM; f++)
#pragma unroll
            for (int i = 0; i < BN / 2; i++)
                d[f][i] = 0.f;
        int released = -1; /* the stage whose multiplies are still in flight */
        for (int kt = kt0; kt < kt1; kt++) {
            barrier_wait(&full[s], phase);
            wgmma_slice<T, BN, FM>(d, smem_addr(ring_a + s * A_BYTES) + consumer * WM * 128,
                                   smem_addr(ring_w + s * W_BYTES));
            if (released >= 0 && tid == 0) /* the previous stage's multiplies are done */
                barrier_arrive(&empty[released]);
            released = s;
            ring_next<STAGES>(s, phase);
        }
        wgmma_wait<0>();
#pragma unroll
        for (int f = 0; f < FM; f++)
            wgmma_fence_registers(d[f]);
        /* the producer fills it with the next tile's slices while this one stores (none: a split
         * without a share of k, k being shorter than the splits) */
        if (tid == 0 && released >= 0)
            barrier_arrive(&empty[released]);

        const tile_place at = order.at(tile);
        if constexpr (SPLIT > 1) {
            /* every block's partial sums into its shared memory, where the ring was (its loads
             * and multiplies are all done once the cluster meets), then each block adds up a
             * share of the tile from all of them */
            using sum_pair = ktune_cluster::sum_pair<float>;
            ktune_cluster::sync();
            sum_pair *const sums = reinterpret_cast<sum_pair *>(smem);
            store_sum_pairs<FM, BN>(sums, d, consumer * WM, tid);
            ktune_cluster::sync();
            ktune_cluster::add_split_pairs<SPLIT, BM * BN / 2>(
                sums, consumer * 128 + tid, CONSUMERS * 128, [&](int i, const sum_pair &v) {
                    store_pair(c, (int64_t)at.row0 + 2 * i / BN, (int64_t)at.col0 + 2 * i % BN,
                               at.row_end, n, v.x, v.y, flags & PAIR_STORES);
                });
            ktune_cluster::sync(); /* no block leaves while another reads its sums */
            continue;
        }
        const int row0 = at.row0 + consumer * WM;
        if constexpr (stores_transposed<Tiles>::value) {
#pragma unroll
            for (int f = 0; f < FM; f++)
                store_piece_transposed<T, BN>(flags, &map_c, staging + consumer * 2 * STAGING_BYTES,
                                              buffer, c, row0 + f * 64, at.col0, m, n,
                                              [&](int i) { return d[f][i]; }, tid, consumer);
        } else {
#pragma unroll
            for (int f = 0; f < FM; f++) {
                const int piece = row0 + f * 64;
                const int piece_flags =
                    piece + 64 <= at.row_end || at.row_end == m ? flags : flags & ~TMA_STORES;
                store_piece<T, BN>(piece_flags, &map_c, staging + consumer * 2 * STAGING_BYTES,
                                   buffer, c, piece, at.col0, at.row_end, n,
                                   [&](int i) { return d[f][i]; }, tid, consumer);
            }
        }
    }
    if (tid == 0)
        tma_store_wait_all(); /* shared memory stays until the last store has read it */
#else
    (void)map_a, (void)map_w, (void)map_c, (void)c, (void)where, (void)m, (void)n, (void)k,
        (void)flags;
#endif
}

/* cuTensorMapEncodeTiled from the driver, found once; NULL where the driver has none. */
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder()
{
    static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
        void *fn = nullptr;
        cudaDriverEntryPointQueryResult found;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                             cudaEnableDefault, &found) != cudaSuccess ||
            found != cudaDriverEntryPointSuccess)
            fn = nullptr;
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }();
    return encode;
}

/* cuTensorMapEncodeTiled of a rank-dimensional tensor of T (16-bit floats, or uint8_t for
 * bytes) at base, dims[0] contiguous, strides in bytes for dims 1..: boxes of box elements in
 * 128-byte swizzle, L2 fetching 256-byte blocks, parts of a box outside the tensor read as zeros.
 * False where the driver has no encoder or refuses the map. */
template <typename T>
inline bool encode_map(CUtensorMap *map, cuuint32_t rank, const void *base, const cuuint64_t *dims,
                       const cuuint64_t *strides, const cuuint32_t *box)
{
    const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    const cuuint32_t unit[5] = {1, 1, 1, 1, 1};
    const CUtensorMapDataType type = std::is_same<T, __nv_bfloat16>::value
                                         ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                     : std::is_same<T, __half>::value
                                         ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                         : CU_TENSOR_MAP_DATA_TYPE_UINT8;
    return encode && encode(map, type, rank, const_cast<void *>(base), dims, strides, box, unit,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* A TMA map of a row-major rows x cols matrix of T, boxes of box_rows x 64 in 128-byte swizzle.
 * False where TMA cannot address it. */
template <typename T>
inline bool tensor_map(CUtensorMap *map, const void *base, int64_t rows, int64_t cols, int box_rows)
{
    if ((uintptr_t)base % 16 != 0 || cols % 8 != 0)
        return false;
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)cols * sizeof(T)};
    const cuuint32_t box[2] = {WGMMA_BK, (cuuint32_t)box_rows};
    return encode_map<T>(map, 2, base, dims, strides, box);
}

/* flags with TMA_STORES where C (rows x cols of T) can be stored through TMA in boxes of box_rows
 * rows, *map_c then its map; else flags as given and *map_c a copy of unused (the kernel does not
 * read it). */
template <typename T>
inline int with_tma_stores(int flags, CUtensorMap *map_c, void *c, int64_t rows, int64_t cols,
                           int box_rows, const CUtensorMap &unused)
{
    if (tensor_map<T>(map_c, c, rows, cols, box_rows))
        return flags | TMA_STORES;
    *map_c = unused;
    return flags;
}

/* The family's default tensor-core config (spaces/matmul.yaml), for what TMA cannot load. */
using wgmma_fallback = mma_launcher<128, 128, 32, 2, 2, 4, 1>;

/* SPLIT > 1: a cluster of SPLIT blocks a tile, each a share of k (few tiles). TAIL > 1: the
 * tiles of the waves the persistent grid fills, then the rest (less than a wave, which would
 * leave most SMs idle for a whole tile) with a cluster of TAIL blocks a tile, in a second launch. */
template <int BM, int BN, int CONSUMERS, int STAGES, int SPLIT = 1, int TAIL = 1>
struct wgmma_launcher {
    static_assert(SPLIT == 1 || TAIL == 1, "a split of every tile or of the last wave's");
    template <typename T>
    static cudaError_t run(const void *a, const void *w, void *c, int64_t m, int64_t n, int64_t k,
                           cudaStream_t s)
    {
        if (!KTUNE_SM90A) /* the kernel has no code in this build */
            return cudaErrorNotSupported;
        const int64_t tiles = ((m + BM - 1) / BM) * ((n + BN - 1) / BN);
        if (tiles > INT32_MAX || k > INT32_MAX)
            return cudaErrorInvalidValue;
        CUtensorMap map_a, map_w, map_c;
        if (!tensor_map<T>(&map_a, a, m, k, BM) || !tensor_map<T>(&map_w, w, n, k, BN))
            return wgmma_fallback::run<T>(a, w, c, m, n, k, s);
        const int flags =
            with_tma_stores<T>(layout_flags<T>(a, w, c, n, k), &map_c, c, m, n, 64, map_a);
        const dim3 block((CONSUMERS + 1) * 128);
        constexpr size_t smem = wgmma_smem_bytes<BM, BN, CONSUMERS, STAGES>();
        using dense_t = dense_tiles<BM, BN>;
        const typename dense_t::params dense{(int)m, (int)n};
        if constexpr (TAIL > 1) {
            using tiles_t = tile_range<dense_t>;
            constexpr auto whole = wgmma_kernel<T, BM, BN, CONSUMERS, STAGES, tiles_t>;
            constexpr auto split = wgmma_kernel<T, BM, BN, CONSUMERS, STAGES, tiles_t, TAIL>;
            unsigned grid;
            cudaError_t e = ktune_launch::persistent_grid<whole>(block, dim3(1, 1, 1), smem, tiles,
                                                                 &grid);
            if (e != cudaSuccess)
                return e;
            const int waves = (int)(tiles / grid * grid), rest = (int)tiles - waves;
            if (waves > 0)
                e = ktune_launch::launch(whole, dim3(grid), block, dim3(1, 1, 1), smem, s, map_a,
                                         map_w, map_c, (T *)c,
                                         typename tiles_t::params{dense, 0, waves}, (int)m, (int)n,
                                         (int)k, flags);
            if (e == cudaSuccess && rest > 0)
                e = ktune_launch::launch(split, dim3((unsigned)rest, TAIL), block,
                                         dim3(1, TAIL, 1), smem, s, map_a, map_w, map_c, (T *)c,
                                         typename tiles_t::params{dense, waves, rest}, (int)m,
                                         (int)n, (int)k, flags);
            return e;
        } else if constexpr (SPLIT > 1) { /* a cluster a tile, each of its blocks a share of k */
            constexpr auto kernel = wgmma_kernel<T, BM, BN, CONSUMERS, STAGES, dense_t, SPLIT>;
            return ktune_launch::launch(kernel, dim3((unsigned)tiles, SPLIT), block,
                                        dim3(1, SPLIT, 1), smem, s, map_a, map_w, map_c, (T *)c,
                                        dense, (int)m, (int)n, (int)k, flags);
        } else {
            constexpr auto kernel = wgmma_kernel<T, BM, BN, CONSUMERS, STAGES, dense_t>;
            return ktune_launch::launch_persistent<kernel>(block, smem, tiles, s, map_a, map_w,
                                                           map_c, (T *)c, dense, (int)m, (int)n,
                                                           (int)k, flags);
        }
    }
};

/* C^T = W A^T on the wgmma kernel (transposed_tiles): persistent blocks of CONSUMERS consumer
 * warpgroups, BW = 64 CONSUMERS rows of W by BA rows of A a tile, and a ring of RING_KB KiB (as
 * many stages as fit, at most 8). BA is the call's: any multiple of 16 from 64 to 256 (one kernel
 * each), by rows_of_a (the variant's cost model in spaces/matmul.yaml, for the vote, counts the
 * padded tiles' multiply-adds over the waves alone, as wgmma's does). */
template <int BW, int CONSUMERS, int RING_KB> struct transposed_launcher {
    static_assert(BW == 64 * CONSUMERS, "64 rows of W a consumer");
    static constexpr int BA_MIN = 64, BA_STEP = 16, BA_COUNT = 13; /* 64, 80, ..., 256 */

    /* The tile's rows of A for an m x n x k product of elements of `bytes` bytes on sms
     * multiprocessors sharing l2 bytes of L2: the BA of the least cost, the larger of
     *  - the waves of tiles over the multiprocessors times BW (BW + BA) k: a tile's time grows
     *    with the rows of both operands it streams, not only with the products (W's tile is
     *    streamed again for each tile of A), and
     *  - the bytes read: W once where it fits in L2, else once a tile of A (the tiles of A of one
     *    tile of W run side by side, but a W larger than L2 is evicted between them), A and C once,
     * the smaller BA where two tie (less padding). */
    static int rows_of_a(int64_t m, int64_t n, int64_t k, int bytes, int sms, int64_t l2)
    {
        const double w = (double)bytes * (double)n * (double)k;
        const double ac = (double)bytes * (double)m * (double)(k + n);
        int best = 0;
        double best_cost = 0;
        for (int i = 0; i < BA_COUNT; i++) {
            const int ba = BA_MIN + BA_STEP * i;
            const int64_t tiles_a = (m + ba - 1) / ba, tiles = (n + BW - 1) / BW * tiles_a;
            const double waves = (double)((tiles + sms - 1) / sms);
            const double streamed = waves * BW * (BW + ba) * (double)k;
            const double read = (w <= (double)l2 ? w : w * (double)tiles_a) + ac;
            const double cost = streamed > read ? streamed : read;
            if (best == 0 || cost < best_cost) {
                best = ba;
                best_cost = cost;
            }
        }
        return best;
    }

    template <typename T, int BA>
    static cudaError_t run_tile(const void *a, const void *w, void *c, int64_t m, int64_t n,
                                int64_t k, cudaStream_t s)
    {
        constexpr int STAGES = RING_KB * 1024 / ((BW + BA) * 128) < 8
                                   ? RING_KB * 1024 / ((BW + BA) * 128)
                                   : 8;
        static_assert(STAGES >= 2, "a ring of two stages or more");
        CUtensorMap map_w, map_a, map_c;
        if (!tensor_map<T>(&map_w, w, n, k, BW) || !tensor_map<T>(&map_a, a, m, k, BA))
            return wgmma_fallback::run<T>(a, w, c, m, n, k, s);
        const int flags =
            with_tma_stores<T>(layout_flags<T>(a, w, c, n, k), &map_c, c, m, n, 16, map_a);
        const dim3 block((CONSUMERS + 1) * 128);
        constexpr size_t smem = wgmma_smem_bytes<BW, BA, CONSUMERS, STAGES>();
        using tiles_t = transposed_tiles<BW, BA>;
        constexpr auto kernel = wgmma_kernel<T, BW, BA, CONSUMERS, STAGES, tiles_t>;
        const int64_t tiles = ((n + BW - 1) / BW) * ((m + BA - 1) / BA);
        return ktune_launch::launch_persistent<kernel>(block, smem, tiles, s, map_w, map_a, map_c,
                                                       (T *)c,
                                                       typename tiles_t::params{(int)m, (int)n},
                                                       (int)m, (int)n, (int)k, flags);
    }

    template <typename T, int... I>
    static cudaError_t run_rows(int ba, std::integer_sequence<int, I...>, const void *a,
                                const void *w, void *c, int64_t m, int64_t n, int64_t k,
                                cudaStream_t s)
    {
        cudaError_t e = cudaErrorInvalidValue;
        (void)((ba == BA_MIN + BA_STEP * I &&
                (e = run_tile<T, BA_MIN + BA_STEP * I>(a, w, c, m, n, k, s), true)) ||
               ...);
        return e;
    }

    template <typename T>
    static cudaError_t run(const void *a, const void *w, void *c, int64_t m, int64_t n, int64_t k,
                           cudaStream_t s)
    {
        if (!KTUNE_SM90A) /* the kernel has no code in this build */
            return cudaErrorNotSupported;
        if ((n + BW - 1) / BW * ((m + BA_MIN - 1) / BA_MIN) > INT32_MAX || k > INT32_MAX)
            return cudaErrorInvalidValue;
        int sms = 0, l2 = 0;
        cudaError_t e = ktune_launch::multiprocessors(&sms);
        if (e == cudaSuccess)
            e = ktune_launch::l2_bytes(&l2);
        if (e != cudaSuccess)
            return e;
        return run_rows<T>(rows_of_a(m, n, k, (int)sizeof(T), sms, l2),
                           std::make_integer_sequence<int, BA_COUNT>(), a, w, c, m, n, k, s);
    }
};

} // namespace ktune_matmul_impl
