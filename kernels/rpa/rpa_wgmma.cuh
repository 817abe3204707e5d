/* Ragged paged attention on wgmma (sm_90a): prefill, mixed batches and, with one consumer, decode
 * (the TMA ring streams the pages while the tensor cores idle on the rows padding a tile).
 *
 * A block takes BM = 64 * CONSUMERS GQA-packed rows of one sequence and KV head (the rows and
 * tiles of rpa_kernel.cuh, the same tile slots, splits and merge) and walks its keys BN tokens a
 * step. Warpgroup 0 is the producer: its first warp reads the page table (a lane a piece of a
 * step) and issues TMA copies of the step's keys and values straight from their pages (a piece
 * is min(page_size, BN) tokens of one page: a box of a 3-dimensional map of the cache, tokens x
 * KV heads x head_dim) into a STAGES-deep ring, in 128-byte swizzled panels of 64 channels; the
 * pieces past the tile's last key are not read. Each consumer warpgroup owns 64 rows, its
 * queries loaded once into shared memory; for each step of keys its rows see, it runs S = Q K^T
 * on wgmma (m64 x BN, both operands K-major in shared memory) and the online softmax and
 * O += P V of attention_wgmma.cuh (V N-major in shared memory: the cache's own layout), whose
 * order overlaps a step's softmax with the previous step's P V. Two consumers take turns at the
 * tensor cores. On the tail step (keys past the tile's last key), the consumers zero those value
 * rows before multiplying: their weights are 0, but memory of a page past a sequence's length may
 * hold anything, NaN included.
 *
 * Constraints (else the launcher runs the mma default): a piece must be whole in a step
 * (page_size a multiple of BN or BN a multiple of page_size) and the cache's tokens addressable
 * by TMA (num_pages x page_size < 2^31). */
#pragma once

#include "../common/attention_wgmma.cuh"
#include "../matmul/matmul_wgmma.cuh"
#include "rpa_common.cuh"

namespace ktune_rpa_impl {

/* The shared memory of a block: each consumer's queries, the ring of key and value tiles, two
 * barriers a stage, and slack to align the tiles to 1024 bytes. */
template <int D, int CONSUMERS, int BN, int STAGES> constexpr size_t wgmma_smem_bytes()
{
    return (size_t)CONSUMERS * 64 * D * 2 + (size_t)STAGES * 2 * BN * D * 2 +
           (size_t)STAGES * 2 * 8 + 1024;
}

template <typename T, int D, int CONSUMERS, int BN, int STAGES>
__global__ void __launch_bounds__((CONSUMERS + 1) * 128, 1)
    attend_wgmma(const __grid_constant__ CUtensorMap map_k,
                 const __grid_constant__ CUtensorMap map_v, const args a)
{
    static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
    static_assert(BN % 16 == 0 && BN <= 256 && D % 64 == 0 && STAGES >= 2,
                  "whole k16 steps of keys, panels of 64 channels, a ring of two or more");
#ifdef KTUNE_WGMMA_DEVICE
    using namespace ktune_matmul_impl;
    using namespace ktune_attention_wgmma;
    constexpr int BM = 64 * CONSUMERS, PANELS = D / 64;
    constexpr uint32_t Q_BYTES = 64 * D * 2, TILE_BYTES = BN * D * 2, PANEL_BYTES = BN * 128;
    extern __shared__ __align__(128) unsigned char smem_raw[]; /* as the mma kernel declares it */
    unsigned char *const smem = smem_raw + (1024 - smem_addr(smem_raw) % 1024) % 1024;
    unsigned char *const ring = smem + CONSUMERS * Q_BYTES; /* a stage: K tile, then V tile */
    uint64_t *const full = reinterpret_cast<uint64_t *>(ring + STAGES * 2 * TILE_BYTES);
    uint64_t *const empty = full + STAGES;
    __shared__ int found[2];

    const int warpgroup = threadIdx.x / 128, tid = threadIdx.x % 128, lane = threadIdx.x % 32;
    if (threadIdx.x < 32) {
        int seq, tile;
        find_tile<BM>(a, blockIdx.x, seq, tile);
        if (lane == 0) {
            found[0] = seq;
            found[1] = tile;
        }
    }
    ring_barriers_setup<STAGES>(full, empty, 1, CONSUMERS);
    __syncthreads();
    const int seq = found[0], tile = found[1];
    if (seq < 0)
        return;
    const int kvh = blockIdx.y, split = blockIdx.z, G = a.group;
    const tile_span span = span_of<BM, BN>(a, seq, tile, split);

    if (warpgroup == 0) {
        if constexpr (CONSUMERS > 1)
            registers_lower<40>();
        if (threadIdx.x >= 32)
            return;
        /* a piece: R tokens of one page; lane p issues piece p of a step */
        const int R = min(a.page_size, BN);
        const int32_t *const pages = a.table + (int64_t)seq * a.max_pages;
        int s = 0, phase = 0;
        for (int st = span.st0; st < span.st1; st++) {
            const int key0 = st * BN, pieces = (min(BN, span.kv_end - key0) + R - 1) / R;
            barrier_wait(&empty[s], phase ^ 1); /* the consumers are done with the stage */
            if (lane == 0)
                barrier_expect(&full[s], (uint32_t)(pieces * R * 128 * PANELS * 2));
            __syncwarp();
            unsigned char *const k_s = ring + s * 2 * TILE_BYTES, *const v_s = k_s + TILE_BYTES;
            for (int piece = lane; piece < pieces; piece += 32) {
                const int tok = key0 + piece * R;
                const int page = min(max(__ldg(pages + tok / a.page_size), 0), a.num_pages - 1);
                const int row = page * a.page_size + tok % a.page_size;
#pragma unroll
                for (int p = 0; p < PANELS; p++) {
                    const uint32_t at = p * PANEL_BYTES + piece * R * 128;
                    tma_load_3d(k_s + at, &map_k, p * 64, kvh, row, &full[s]);
                    tma_load_3d(v_s + at, &map_v, p * 64, kvh, row, &full[s]);
                }
            }
            ring_next<STAGES>(s, phase);
        }
        return; /* the consumers wait for every copy the warp issued */
    }

    if constexpr (CONSUMERS > 1)
        registers_raise<232>();
    const int consumer = warpgroup - 1, warp = tid / 32;
    const int rc0 = span.r0 + consumer * 64; /* this warpgroup's first row */
    const bool busy = rc0 < span.r_end;
    const int rc_end = min(span.r_end, rc0 + 64);
    /* the keys this warpgroup's last row sees, and those every one of its rows sees */
    const int my_end = busy ? max(0, min(span.kv_len, span.shift + (rc_end - 1) / G + 1)) : 0;
    const int unmasked = span.shift + rc0 / G + 1;

    /* the queries: 64 rows in panels of 64 channels, 128-byte swizzled (rows past the sequence:
     * zeros) */
    unsigned char *const q_s = smem + consumer * Q_BYTES;
    const T *const q = static_cast<const T *>(a.q);
    for (int i = tid; i < 64 * D / 8; i += 128) {
        const int row = i / (D / 8), ch = i % (D / 8), r = rc0 + row;
        const T *src = q;
        if (r < span.rows)
            src = q + row_of(a, span.q0, kvh, r) * D + ch * 8;
        const int at = (ch / 8) * 64 * 128 + row * 128 + ((ch % 8) ^ (row & 7)) * 16;
        ktune_common::cp_async16(q_s + at, src, r < span.rows ? 16 : 0);
    }
    ktune_common::cp_async_commit();
    ktune_common::cp_async_wait<0>();
    fence_proxy_async(); /* the copies' writes, visible to the multiplies (the async proxy) */
    warpgroup_sync(consumer);

    /* this thread's rows: ra and ra + 8 */
    const int ra = rc0 + warp * 16 + lane / 4;
    int pos[2];
    float m[2], l[2] = {0.f, 0.f}, o[D / 8][4] = {};
#pragma unroll
    for (int i = 0; i < 2; i++) {
        m[i] = -INFINITY;
        pos[i] = span.shift + (ra + 8 * i) / G;
    }
    const uint32_t q_addr = smem_addr(q_s);
    float sc[BN / 8][4]; /* S, as the multiplies leave it */
    float(&sc_flat)[BN / 2] = *reinterpret_cast<float(*)[BN / 2]>(&sc[0][0]);
    auto issue_s = [&](int, int stage) {
        const uint32_t k_addr = smem_addr(ring + stage * 2 * TILE_BYTES);
        wgmma_fence_registers(sc_flat);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            const uint64_t da = wgmma_desc(q_addr + (kk / 4) * 64 * 128 + (kk % 4) * 32);
            const uint64_t db = wgmma_desc(k_addr + (kk / 4) * PANEL_BYTES + (kk % 4) * 32);
            if (kk == 0)
                wgmma_m64k16<T, BN, 0>(sc_flat, da, db);
            else
                wgmma_m64k16<T, BN>(sc_flat, da, db);
        }
        wgmma_commit();
        wgmma_fence_registers(sc_flat);
    };
    /* scores masked past each row's position on the steps that need it, in log2 units by
     * scale * log2 e */
    auto scores = [&](int st, float(&x)[BN / 8][4], float(&mul)[1][2], float(&add)[1][2]) {
        wgmma_fence_registers(sc_flat);
        const int key0 = st * BN;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            mul[0][i] = a.scale_log2;
            add[0][i] = 0.f;
        }
#pragma unroll
        for (int nb = 0; nb < BN / 8; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int j = key0 + nb * 8 + (lane % 4) * 2 + (e & 1);
                x[nb][e] = key0 + BN > unmasked && j > pos[e / 2] ? -INFINITY : sc[nb][e];
            }
    };
    const ring_view rv = {ring, 2 * TILE_BYTES, TILE_BYTES, full, empty};
    ring_place at;
    consume<T, D, BN, 1, PANELS, CONSUMERS, STAGES, false, false>(
        rv, span.st0, span.st1, span.kv_end, my_end, 0, m, l, o, issue_s, scores, at);
    if (!busy)
        return;

    /* the rows' sums over their quads; then the output, or this split's share */
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const float sum = ktune_attention_mma::quad_sum(l[i]);
        const int r = ra + 8 * i;
        if (r < span.r_end)
            store_row<T, D>(a, row_of(a, span.q0, kvh, r), split, sum, m[i],
                            [&](int dn, int e) { return o[dn][2 * i + e]; }, lane);
    }
#else
    (void)map_k, (void)map_v, (void)a;
#endif
}

/* A TMA map of a cache (tokens x kv_heads x D of T), boxes of rows tokens of one head in panels
 * of 64 channels, 128-byte swizzled. False where TMA cannot address it. */
template <typename T, int D>
inline bool cache_map(CUtensorMap *map, const void *base, int64_t tokens, int64_t kv_heads,
                      int rows)
{
    if ((uintptr_t)base % 16 != 0 || tokens > INT32_MAX)
        return false;
    const cuuint64_t dims[3] = {(cuuint64_t)D, (cuuint64_t)kv_heads, (cuuint64_t)tokens};
    const cuuint64_t strides[2] = {(cuuint64_t)D * 2, (cuuint64_t)kv_heads * D * 2};
    const cuuint32_t box[3] = {64, 1, (cuuint32_t)rows};
    return ktune_matmul_impl::encode_map<T>(map, 3, base, dims, strides, box);
}

/* The family's mma default for prefill (spaces/rpa.yaml), for what TMA cannot load. */
using wgmma_fallback = launcher<4, 1, 1, 64, 2, 8>;

template <int CONSUMERS, int BN, int STAGES, int SPLITS> struct wgmma_launcher {
    /* Configurations past the registers (O, S and P a thread) or the shared memory a block can
     * have (the space's constraints keep them out) are not compiled for that head_dim. */
    template <int D>
    static constexpr bool fits = D / 2 + 3 * BN / 4 <= 176 &&
                                 wgmma_smem_bytes<D, CONSUMERS, BN, STAGES>() <= 232448;

    template <typename T, int D> static cudaError_t run(const ktune_rpa_problem &p, cudaStream_t s)
    {
        if constexpr (!fits<D>)
            return cudaErrorNotSupported;
        else
            return run_fitting<T, D>(p, s);
    }

    template <typename T, int D>
    static cudaError_t run_fitting(const ktune_rpa_problem &p, cudaStream_t s)
    {
        if (!KTUNE_SM90A) /* the kernel has no code in this build */
            return cudaErrorNotSupported;
        constexpr int BM = 64 * CONSUMERS, THREADS = (CONSUMERS + 1) * 128;
        constexpr size_t smem = wgmma_smem_bytes<D, CONSUMERS, BN, STAGES>();
        const int64_t tokens = p.num_pages * p.page_size;
        const int rows = p.page_size < BN ? (int)p.page_size : BN;
        CUtensorMap map_k, map_v;
        if ((p.page_size % BN != 0 && BN % p.page_size != 0) ||
            !cache_map<T, D>(&map_k, p.k_cache, tokens, p.kv_heads, rows) ||
            !cache_map<T, D>(&map_v, p.v_cache, tokens, p.kv_heads, rows))
            return wgmma_fallback::run<T, D>(p, s);
        auto *const kernel = attend_wgmma<T, D, CONSUMERS, BN, STAGES>;
        static const int64_t resident = resident_blocks(kernel, THREADS, smem);
        args a;
        dim3 grid;
        if (!args_of<D>(p, BM, BN, SPLITS, resident, false, &a, &grid))
            return cudaErrorInvalidValue;
        const cudaError_t e = ktune_launch::launch(kernel, grid, dim3(THREADS), dim3(1, 1, 1),
                                                   smem, s, map_k, map_v, a);
        return e == cudaSuccess ? merge_splits<T, D>(a, s) : e;
    }
};

} // namespace ktune_rpa_impl
