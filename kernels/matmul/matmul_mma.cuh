/* The mma variant: a tensor-core GEMM for larger m.
 *
 * A block computes a BM x BN tile of C with WM x WN warps (each a (BM/WM) x (BN/WN) tile of
 * m16n8k16 mma.sync instructions). Tiles of A and W, BK wide in k, arrive in shared memory by
 * cp.async through a STAGES-deep ring; rows are stored with their 16-byte chunks XOR-swizzled so
 * that ldmatrix reads them without bank conflicts. Blocks run in grouped order (GROUP tiles of m
 * a column of n) so that neighbours share their A and W tiles in L2.
 *
 * SPLIT > 1 splits k over the blocks of a cluster; each adds its fp32 tile to the others'
 * through distributed shared memory and writes a share of the rows. Tails in m, n and k load
 * zeros; rows that are not 16-byte aligned (k % 8 != 0) load element by element.
 *
 * What the kernel multiplies and how it stores is a policy P (mma_policy below is the family's:
 * 16-bit inputs and output, fp32 sums): P::unit, the 2-byte element of the tiles (k counts
 * them); P::acc, the accumulator; P::mma(d, a, b), a 16 x 8 tile over 16 units of k from
 * m16n8k16-shaped fragments; and P::out, the epilogue object, whose store(row, col, m, n, x, y,
 * flags) writes C[row][col] and C[row][col + 1] inside m x n. An 8-bit policy (the qmatmul
 * family's) reads two elements a unit: m16n8k32's fragments hold the same bytes as m16n8k16's. */
#pragma once

#include "matmul_common.cuh"

namespace ktune_matmul_impl {

template <int BK> __device__ __forceinline__ int swizzle(int row, int chunk)
{
    static_assert(BK == 32 || BK == 64, "rows of 64 or 128 bytes");
    return BK == 64 ? chunk ^ (row & 7) : chunk ^ ((row >> 1) & 3);
}

template <int BM, int BN, int BK, int STAGES, int SPLIT>
__host__ __device__ constexpr size_t mma_smem_bytes()
{
    constexpr size_t ring = (size_t)STAGES * (BM + BN) * BK * 2;
    constexpr size_t reduce = SPLIT > 1 ? (size_t)BM * BN * 4 : 0;
    return ring > reduce ? ring : reduce;
}

/* The family's policy: T inputs and output, fp32 sums. */
template <typename T> struct mma_policy {
    using unit = T;
    using acc = float;
    struct out {
        T *c;
        __device__ __forceinline__ void store(int64_t row, int64_t col, int64_t m, int64_t n,
                                              float x, float y, int flags) const
        {
            store_pair(c, row, col, m, n, x, y, flags & PAIR_STORES);
        }
    };
    static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2])
    {
        mma_16816<T>(d, a, b);
    }
};

/* A thread's share of loading ROWS x BK tiles of a row-major matrix (`rows` rows, k columns)
 * into swizzled shared memory: chunks q = thread + i * THREADS, i < PER, which are rows
 * thread / CPR + i * STEP at one column chunk. STEP is a multiple of 8, so a thread's swizzle is
 * the same for all of its chunks; what varies with the k tile is only the column. */
template <typename T, int ROWS, int BK, int THREADS> struct tile_loader {
    static constexpr int CPR = BK / 8, PER = ROWS * CPR / THREADS, STEP = THREADS / CPR;
    static_assert(ROWS * CPR % THREADS == 0 && STEP % 8 == 0, "whole chunks a thread");
    const T *src;      /* the thread's first chunk in column 0 of the matrix */
    int dst;           /* its element offset in a stage */
    int col;           /* its column chunk, in elements */
    unsigned rows_in;  /* bit i: chunk i's row is inside the matrix */
    int64_t k;

    __device__ __forceinline__ tile_loader(const T *m, int64_t row0, int64_t rows, int64_t k_)
    {
        const int r = threadIdx.x / CPR, ch = threadIdx.x % CPR;
        k = k_;
        col = ch * 8;
        src = m + min(row0 + r, rows - 1) * k;
        dst = r * BK + swizzle<BK>(r, ch) * 8;
        rows_in = 0;
#pragma unroll
        for (int i = 0; i < PER; i++)
            rows_in |= (unsigned)(row0 + r + i * STEP < rows) << i;
    }

    __device__ __forceinline__ void load(T *stage, int64_t k0, bool vec) const
    {
        const int64_t kk = k0 + col;
#pragma unroll
        for (int i = 0; i < PER; i++) {
            const bool in = (rows_in >> i & 1) && kk < k;
            const T *p = src + (int64_t)i * STEP * k + kk;
            T *d = stage + dst + i * STEP * BK;
            if (vec) {
                cp_async16(d, in ? p : src, in ? 16 : 0);
            } else {
                const uint4 v = in ? load8<false>(p - kk, kk, k, false) : make_uint4(0, 0, 0, 0);
                *reinterpret_cast<uint4 *>(d) = v;
            }
        }
    }
};

/* The block's sums of a BM x BN tile, rows m0 .. of A (those below m) times rows n0 .. of W
 * (those below n), over the nkt BK-wide tiles of k from kt0, into acc: warp (wm, wn)'s piece
 * (fm, fn) holds rows m0 + wm * TM + fm * 16 + g (+ 8), columns n0 + wn * TN + fn * 8 + 2t (+ 1),
 * g = lane / 4, t = lane % 4. smem holds the ring (mma_smem_bytes). */
template <typename P, int BM, int BN, int BK, int WM, int WN, int STAGES>
__device__ __forceinline__ void mma_accumulate(const typename P::unit *__restrict__ a,
                                               const typename P::unit *__restrict__ w, int64_t m0,
                                               int64_t m, int64_t n0, int64_t n, int64_t k,
                                               int64_t kt0, int64_t nkt, bool vec,
                                               unsigned char *smem,
                                               typename P::acc (&acc)[BM / WM / 16][BN / WN / 8][4])
{
    using T = typename P::unit;
    constexpr int THREADS = WM * WN * 32, TM = BM / WM, TN = BN / WN, FM = TM / 16, FN = TN / 8;
    static_assert(TM % 16 == 0 && TN % 16 == 0, "warp tiles of whole 16x16 pieces");
    T *sa = reinterpret_cast<T *>(smem);
    T *sw = sa + STAGES * BM * BK;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, wm = warp / WN, wn = warp % WN;

    const tile_loader<T, BM, BK, THREADS> la(a, m0, m, k);
    const tile_loader<T, BN, BK, THREADS> lw(w, n0, n, k);
    auto load_stage = [&](int stage, int64_t kt) {
        la.load(sa + stage * BM * BK, kt * BK, vec);
        lw.load(sw + stage * BN * BK, kt * BK, vec);
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < nkt)
            load_stage(s, kt0 + s);
        cp_async_commit();
    }

    /* a lane's ldmatrix rows: the same 8-row phase in every 16-row piece, so the swizzle of its
     * chunk is a constant XOR */
    const int a_row = wm * TM + (lane & 15), a_hi = lane >> 4;
    const int w_row = wn * TN + (lane & 7) + ((lane >> 4) << 3), w_hi = (lane >> 3) & 1;
    int read = 0, write = STAGES - 1;
    for (int i = 0; i < (int)nkt; i++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (i + STAGES - 1 < nkt)
            load_stage(write, kt0 + i + STAGES - 1);
        cp_async_commit();
        write = write == STAGES - 1 ? 0 : write + 1;
        const T *ta = sa + read * BM * BK, *tw = sw + read * BN * BK;
        read = read == STAGES - 1 ? 0 : read + 1;
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            uint32_t af[FM][4], bf[FN][2];
#pragma unroll
            for (int fm = 0; fm < FM; fm++) {
                const int r = a_row + fm * 16;
                ldmatrix_x4(af[fm], ta + r * BK + swizzle<BK>(r, kk * 2 + a_hi) * 8);
            }
#pragma unroll
            for (int fn = 0; fn < FN; fn += 2) {
                const int r = w_row + fn * 8;
                uint32_t q[4];
                ldmatrix_x4(q, tw + r * BK + swizzle<BK>(r, kk * 2 + w_hi) * 8);
                bf[fn][0] = q[0];
                bf[fn][1] = q[1];
                bf[fn + 1][0] = q[2];
                bf[fn + 1][1] = q[3];
            }
#pragma unroll
            for (int fm = 0; fm < FM; fm++)
#pragma unroll
                for (int fn = 0; fn < FN; fn++)
                    P::mma(acc[fm][fn], af[fm], bf[fn]);
        }
    }
    cp_async_wait<0>();
}

/* The block's sums (mma_accumulate) of the tile at rows m0 .., columns n0 .. into C, inside
 * m x n. */
template <typename P, int BM, int BN, int WM, int WN>
__device__ __forceinline__ void mma_store(const typename P::out &out, int64_t m0, int64_t m,
                                          int64_t n0, int64_t n, int flags,
                                          const typename P::acc (&acc)[BM / WM / 16][BN / WN / 8][4])
{
    constexpr int TM = BM / WM, TN = BN / WN, FM = TM / 16, FN = TN / 8;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, wm = warp / WN, wn = warp % WN;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int fm = 0; fm < FM; fm++)
#pragma unroll
        for (int fn = 0; fn < FN; fn++) {
            const int64_t row = m0 + wm * TM + fm * 16 + g, col = n0 + wn * TN + fn * 8 + 2 * t;
            out.store(row, col, m, n, acc[fm][fn][0], acc[fm][fn][1], flags);
            out.store(row + 8, col, m, n, acc[fm][fn][2], acc[fm][fn][3], flags);
        }
}

template <typename P, int BM, int BN, int BK, int WM, int WN, int STAGES, int SPLIT>
__global__ void __launch_bounds__(WM *WN * 32)
    mma_kernel(const typename P::unit *__restrict__ a, const typename P::unit *__restrict__ w,
               const typename P::out out, int m, int n, int64_t k, int flags)
{
    using A = typename P::acc;
    constexpr int THREADS = WM * WN * 32, TM = BM / WM, TN = BN / WN, FM = TM / 16, FN = TN / 8;
    extern __shared__ __align__(128) unsigned char smem[];

    int tm, tn;
    grouped_tile(blockIdx.x, (m + BM - 1) / BM, (n + BN - 1) / BN, tm, tn);
    const int64_t m0 = (int64_t)tm * BM, n0 = (int64_t)tn * BN;

    const int split = SPLIT > 1 ? (int)ktune_cluster::rank() : 0;
    const int64_t ktiles = (k + BK - 1) / BK;
    const int64_t kt0 = ktiles * split / SPLIT, nkt = ktiles * (split + 1) / SPLIT - kt0;

    A acc[FM][FN][4] = {};
    mma_accumulate<P, BM, BN, BK, WM, WN, STAGES>(a, w, m0, m, n0, n, k, kt0, nkt,
                                                  flags & VEC_LOADS, smem, acc);

    if constexpr (SPLIT == 1) {
        mma_store<P, BM, BN, WM, WN>(out, m0, m, n0, n, flags, acc);
    } else {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, wm = warp / WN, wn = warp % WN;
        const int g = lane >> 2, t = lane & 3;
        /* the blocks' partial sums, added in the accumulator's type (exact for int32) */
        using sum_pair = ktune_cluster::sum_pair<A>;
        static_assert(sizeof(A) == 4, "4-byte accumulators: the tile is BM x BN x 4 bytes");
        __syncthreads(); /* the ring is reused for the tile of sums */
        sum_pair *tile = reinterpret_cast<sum_pair *>(smem);
#pragma unroll
        for (int fm = 0; fm < FM; fm++)
#pragma unroll
            for (int fn = 0; fn < FN; fn++) {
                const int r = wm * TM + fm * 16 + g, col = wn * TN + fn * 8 + 2 * t;
                tile[(r * BN + col) / 2] = sum_pair{acc[fm][fn][0], acc[fm][fn][1]};
                tile[((r + 8) * BN + col) / 2] = sum_pair{acc[fm][fn][2], acc[fm][fn][3]};
            }
        ktune_cluster::sync();
        ktune_cluster::add_split_pairs<SPLIT, BM * BN / 2>(
            tile, threadIdx.x, THREADS, [&](int i, const sum_pair &s) {
                out.store(m0 + 2 * i / BN, n0 + 2 * i % BN, m, n, s.x, s.y, flags);
            });
        ktune_cluster::sync();
    }
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, int SPLIT> struct mma_launcher {
    template <typename T>
    static cudaError_t run(const void *a, const void *w, void *c, int64_t m, int64_t n, int64_t k,
                           cudaStream_t s)
    {
        const int64_t tiles = ((m + BM - 1) / BM) * ((n + BN - 1) / BN);
        if (tiles > INT32_MAX)
            return cudaErrorInvalidValue;
        using P = mma_policy<T>;
        return ktune_launch::launch(mma_kernel<P, BM, BN, BK, WM, WN, STAGES, SPLIT>,
                                    dim3((unsigned)tiles, SPLIT), dim3(WM * WN * 32),
                                    dim3(1, SPLIT, 1), mma_smem_bytes<BM, BN, BK, STAGES, SPLIT>(),
                                    s, (const T *)a, (const T *)w, typename P::out{(T *)c}, (int)m,
                                    (int)n, k, layout_flags<T>(a, w, c, n, k));
    }
};

} // namespace ktune_matmul_impl
