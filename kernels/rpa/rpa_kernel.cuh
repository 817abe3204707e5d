/* Ragged paged attention on mma.sync: prefill and decode sequences of a batch in one launch.
 *
 * Rows: the queries of a sequence that share a KV head, GQA-packed: row r of sequence s and KV
 * head h is query token r / G of s under q head h * G + r % G (G = q_heads / kv_heads), so that a
 * decode step's G heads form the M of the tensor-core tiles and every KV page a block reads
 * serves all G of them. A block takes BM = 16 * MT * WM rows of one sequence and KV head
 * (blockIdx.y) and walks its keys BN tokens a step: K and V tiles gathered from the pages by
 * cp.async into a STAGES-deep ring of swizzled shared memory (no gathered copy of the cache), S =
 * Q K^T and O += P V on m16n8k16 with fp32 accumulators, an online softmax in fp32 between them
 * (exp2 of scores pre-scaled by scale * log2 e), the causal mask only on the steps that reach past
 * the warp's first query. WM x WN warps: WM along the rows (16 MT each: MT row tiles share
 * each K and V fragment a warp reads from shared memory), WN splitting each step's
 * keys (a decode tile has one row tile: its other warps share the keys instead of idling), each
 * with its own softmax state until they merge through shared memory at the end; every thread of
 * the block loads. blockIdx.x counts the batch's tiles: the block finds its sequence and
 * tile by a warp's scan of cu_q_lens (no host-side plan, so a call can be captured in a graph);
 * slots past the batch's tiles exit. Query rows count from cu_q_lens[0] (0 for a batch; a part
 * of one starts where its first sequence's queries do). The kernel is launched overlapped with
 * the stream's previous one (ktune_launch::launch_overlapped): its threads wait for that
 * kernel's memory before their first load.
 *
 * Split KV (flash-decoding): with splits > 1, the keys are cut in chunks of max_len / splits
 * (whole steps) and blockIdx.z takes chunk z of the tile's keys, so that a long sequence takes
 * more blocks than a short one and the blocks' work stays even; it writes its normalized partial
 * output and log-sum-exp (base 2) in fp32 to the workspace (a chunk past the tile's keys: no
 * key, lse -inf), and merge() combines a row's shares. A batch of decoding sequences with a
 * workspace is split evenly instead (walk_of): a 1-dimensional grid of the blocks the device
 * holds at once, each a run of the same number of steps, with the same shares and merge. */
#pragma once

#include <math.h>

#include "../common/attention_mma.cuh"
#include "../matmul/matmul_common.cuh"
#include "ktune/rpa.h"
#include "launch.cuh"

namespace ktune_rpa_impl {

using ktune_common::cp_async16;
using ktune_common::cp_async_commit;
using ktune_common::cp_async_wait;
using ktune_matmul_impl::ldmatrix_x4;
using ktune_matmul_impl::mma_16816;
using ktune_matmul_impl::pack2;
using ktune_attention_mma::tile_at;

/* A launch's arguments, validated and clamped by the host (rpa_common.cuh). */
struct args {
    const void *q, *k, *v;
    const int32_t *table, *cu_q, *kv_lens;
    void *out;
    float *part_o;   /* splits x rows_total x D: a share's normalized output */
    float *part_lse; /* splits x rows_total: its log2-sum-exp2, -inf where it saw no key */
    int seqs, q_heads, kv_heads, group, page_size, max_pages, num_pages, total_q;
    int splits;      /* blocks along blockIdx.z; balanced: the most shares of an item */
    int chunk_steps; /* steps of keys a split takes: split z takes keys from z * chunk_steps * BN */
    int balanced;    /* 1: a decode batch's balanced split (walk_of), a 1-dimensional grid */
    float scale_log2;
};

template <int BM> __host__ __device__ constexpr int tiles_of(int q_len, int group)
{
    return (q_len * group + BM - 1) / BM;
}

/* A block's shared memory: the queries and the ring of keys and values; after the last step,
 * the warps that split the keys hand their partial rows (m, l and O, lane by lane) over in it. */
template <int D, int WM, int WN, int MT, int BN, int STAGES>
__host__ __device__ constexpr size_t smem_bytes()
{
    constexpr size_t tiles = ((size_t)16 * MT * WM * D + (size_t)2 * STAGES * BN * D) * 2;
    constexpr size_t handover = (size_t)(WN - 1) * WM * 32 * MT * (D / 2 + 4) * 4;
    return tiles > handover ? tiles : handover;
}

/* Sequence s's query rows: from *q0, *q_len of them, counted from cu_q_lens[0] (base) and
 * clamped to the batch's total_q. */
__device__ __forceinline__ void queries_of(const args &a, int s, int base, int *q0, int *q_len)
{
    *q0 = min(max(__ldg(a.cu_q + s) - base, 0), a.total_q);
    *q_len = min(max(__ldg(a.cu_q + s + 1) - base, *q0), a.total_q) - *q0;
}

/* The sequence and tile of tile slot `slot` (a warp's scan of cu_q_lens, 32 sequences a round);
 * seq -1 past the batch's tiles. The lanes agree on the result. */
template <int BM>
__device__ __forceinline__ void find_tile(const args &a, int slot, int &seq, int &tile)
{
    const int lane = threadIdx.x % 32, base = __ldg(a.cu_q);
    int before = 0;
    seq = -1;
    tile = 0;
    for (int s0 = 0; s0 < a.seqs; s0 += 32) {
        const int s = s0 + lane;
        int tiles = 0;
        if (s < a.seqs) {
            int q0, q_len;
            queries_of(a, s, base, &q0, &q_len);
            tiles = tiles_of<BM>(q_len, a.group);
        }
        int inclusive = tiles;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int v = __shfl_up_sync(~0u, inclusive, o);
            if (lane >= o)
                inclusive += v;
        }
        const int total = __shfl_sync(~0u, inclusive, 31);
        if (slot < before + total) {
            const int first = __ffs(__ballot_sync(~0u, before + inclusive > slot)) - 1;
            seq = s0 + first;
            tile = slot - before - __shfl_sync(~0u, inclusive - tiles, first);
            return;
        }
        before += total;
    }
}

/* What a block's tile covers: the sequence's queries from q0 (counted from cu_q_lens[0]: 0 but in
 * a part of a batch, rpa_common.cuh) and its GQA-packed rows; the tile's rows r0 .. r_end - 1;
 * shift, so that query j sits at position shift + j; the keys the tile's last row sees (kv_end)
 * and the steps of BN keys this split walks, st0 .. st1 - 1. */
struct tile_span {
    int q0, rows, r0, r_end, shift, kv_len, kv_end, st0, st1;
};

template <int BM, int BN>
__device__ __forceinline__ tile_span span_whole(const args &a, int seq, int tile)
{
    tile_span t;
    int q_len;
    queries_of(a, seq, __ldg(a.cu_q), &t.q0, &q_len);
    t.kv_len = min(max(__ldg(a.kv_lens + seq), 0), a.max_pages * a.page_size);
    t.rows = q_len * a.group;
    t.r0 = tile * BM;
    t.r_end = min(t.rows, t.r0 + BM);
    t.shift = t.kv_len - q_len;
    t.kv_end = max(0, min(t.kv_len, t.shift + (t.r_end - 1) / a.group + 1));
    t.st0 = 0;
    t.st1 = (t.kv_end + BN - 1) / BN;
    return t;
}

/* The span of split `split` of a tile: its chunk of chunk_steps steps. */
template <int BM, int BN>
__device__ __forceinline__ tile_span span_of(const args &a, int seq, int tile, int split)
{
    tile_span t = span_whole<BM, BN>(a, seq, tile);
    const int steps = t.st1;
    t.st0 = min(steps, split * a.chunk_steps);
    t.st1 = min(steps, t.st0 + a.chunk_steps);
    return t;
}

/* Decode's balanced split (args::balanced: a batch of one query a sequence, with a workspace).
 * The batch's work is its items, (sequence, KV head, row tile), laid end to end (a sequence's
 * items in a row, its KV heads outer), each START units for its start and then a unit for each
 * of its sequence's steps of BN keys (at least one, so that a sequence without keys still writes
 * its zeros). Block b takes units b * per .. (b + 1) * per - 1 of that line, where per = the line
 * over the grid, but at least the longest item over splits - 1: every block the same bytes to
 * read (a tile's split into chunks of max_len / splits leaves most blocks of a batch of random
 * lengths idle or short, and few long ones to finish alone), and an item in at most `splits`
 * pieces. A piece's start (the page table, then its first keys, before anything streams) is
 * time a block reads nothing, so an item's start takes units of the line too: a block holding
 * more starts gets fewer steps and finishes with the others. A piece of an item is a share of
 * its rows: share b - (the block of the item's first step); the block holding an item's last
 * step marks its shares past the last empty for the merge. The plan's scans run in the block's
 * first warp (a lane a sequence), the walk in its first thread, which hands each piece to the
 * block through shared memory. */
struct piece {
    tile_span span;
    int seq, kvh, share;
    int shares; /* the item's shares where this piece is its last, else 0 */
};

template <int BM, int BN> struct walk_of {
    static constexpr int START = 1; /* units an item's start takes on the line */
    int64_t g, g_end, first; /* the block's next and end unit; the first unit of seq's items */
    int seq, steps, tiles;   /* the sequence walked, its items' steps and its row tiles */
    int64_t per;

    /* A sequence's items' steps and its row tiles (0 for none) */
    __device__ __forceinline__ static int steps_of(const args &a, int s, int base, int *tiles)
    {
        int q0, q_len;
        queries_of(a, s, base, &q0, &q_len);
        *tiles = tiles_of<BM>(q_len, a.group);
        const int kv = min(max(__ldg(a.kv_lens + s), 0), a.max_pages * a.page_size);
        return max(1, (kv + BN - 1) / BN);
    }

    /* Sequence s's units on the line (0 past the batch), and in *item the units of each of its
     * items (0 where it has none) */
    __device__ __forceinline__ static int64_t line_of(const args &a, int s, int base, int *item)
    {
        int64_t work = 0;
        int units = 0, tiles = 0;
        if (s < a.seqs) {
            units = steps_of(a, s, base, &tiles) + START;
            work = (int64_t)tiles * a.kv_heads * units;
        }
        *item = tiles ? units : 0;
        return work;
    }

    /* The plan and the block's first piece; g == g_end where the block has none. */
    __device__ __forceinline__ void start(const args &a)
    {
        const int lane = threadIdx.x % 32, base = __ldg(a.cu_q);
        int64_t total = 0;
        int longest = 0;
        for (int s0 = 0; s0 < a.seqs; s0 += 32) {
            int item;
            int64_t work = line_of(a, s0 + lane, base, &item);
            longest = max(longest, item);
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) {
                work += __shfl_xor_sync(~0u, work, o);
                longest = max(longest, __shfl_xor_sync(~0u, longest, o));
            }
            total += work;
        }
        per = (total + gridDim.x - 1) / gridDim.x;
        per = max(per, (int64_t)((longest + a.splits - 2) / (a.splits - 1)));
        per = max(per, (int64_t)1);
        g = (int64_t)blockIdx.x * per;
        g_end = min(total, g + per);
        seq = -1;
        if (g >= g_end)
            return;
        /* the sequence whose items hold unit g */
        int64_t before = 0;
        for (int s0 = 0; s0 < a.seqs; s0 += 32) {
            int item;
            const int64_t work = line_of(a, s0 + lane, base, &item);
            int64_t inclusive = work;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const int64_t v = __shfl_up_sync(~0u, inclusive, o);
                if (lane >= o)
                    inclusive += v;
            }
            const int64_t all = __shfl_sync(~0u, inclusive, 31);
            if (g < before + all) {
                const int hit = __ffs(__ballot_sync(~0u, before + inclusive > g)) - 1;
                seq = s0 + hit;
                first = before + __shfl_sync(~0u, inclusive - work, hit);
                steps = steps_of(a, seq, base, &tiles);
                return;
            }
            before += all;
        }
        g = g_end; /* not reached: the scans agree */
    }

    /* The next piece; false after the block's last. A block's units that hold only an item's
     * start are no piece of it. */
    __device__ __forceinline__ bool next(const args &a, piece *p)
    {
        for (;;) {
            if (g >= g_end)
                return false;
            const int units = steps + START; /* an item's units on the line */
            /* past this sequence's items: the next with any */
            if (g >= first + (int64_t)tiles * a.kv_heads * units && seq + 1 < a.seqs) {
                first += (int64_t)tiles * a.kv_heads * units;
                steps = steps_of(a, ++seq, __ldg(a.cu_q), &tiles);
                continue;
            }
            const int item = (int)((g - first) / units), at = (int)((g - first) % units);
            const int len = (int)min((int64_t)(units - at), g_end - g);
            g += len;
            if (at + len <= START)
                continue;
            /* the item's steps from its first unit after the start's */
            const int64_t step0 = first + (int64_t)item * units + START;
            p->seq = seq;
            p->kvh = item / tiles;
            p->span = span_whole<BM, BN>(a, seq, item % tiles);
            const int real = p->span.st1;
            p->span.st0 = min(real, max(at - START, 0));
            p->span.st1 = min(real, at + len - START);
            p->share = (int)(blockIdx.x - step0 / per);
            p->shares =
                at + len == units ? (int)((step0 + steps - 1) / per - step0 / per + 1) : 0;
            return true;
        }
    }
};

/* Packed row r of a tile's sequence (queries from q0) under KV head kvh: its row of q and out. */
__device__ __forceinline__ int64_t row_of(const args &a, int q0, int kvh, int r)
{
    return (int64_t)(q0 + r / a.group) * a.q_heads + kvh * a.group + r % a.group;
}

/* After the last piece of an item: its rows' shares from p.shares on hold nothing. */
__device__ __forceinline__ void mark_empty_shares(const args &a, const piece &p)
{
    if (p.shares == 0)
        return;
    const int rows = p.span.r_end - p.span.r0, empty = a.splits - p.shares;
    const int64_t rows_total = (int64_t)a.total_q * a.q_heads;
    for (int i = threadIdx.x; i < rows * empty; i += blockDim.x)
        a.part_lse[(int64_t)(p.shares + i / rows) * rows_total +
                   row_of(a, p.span.q0, p.kvh, p.span.r0 + i % rows)] = -INFINITY;
}

/* A lane's share of output row `row` (of rows_total): its columns 8 dn + 2 (lane % 4) and the
 * next, value(dn, 0) and value(dn, 1), over the row's sum (over its quad: sum) of weights whose
 * largest score was m; the output itself, or with splits this split's normalized share and its
 * log2-sum-exp2. */
template <typename T, int D, typename Value>
__device__ __forceinline__ void store_row(const args &a, int64_t row, int split, float sum, float m,
                                          Value value, int lane)
{
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    if (a.splits == 1) {
        T *const out = static_cast<T *>(a.out) + row * D + (lane % 4) * 2;
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++)
            *reinterpret_cast<uint32_t *>(out + dn * 8) =
                pack2<T>(value(dn, 0) * inv, value(dn, 1) * inv);
    } else {
        const int64_t at = (int64_t)split * a.total_q * a.q_heads + row;
        float *const out = a.part_o + at * D + (lane % 4) * 2;
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++)
            *reinterpret_cast<float2 *>(out + dn * 8) =
                make_float2(value(dn, 0) * inv, value(dn, 1) * inv);
        if (lane % 4 == 0)
            a.part_lse[at] = sum > 0.f ? m + log2f(sum) : -INFINITY;
    }
}

/* One piece of a block's work (a tile's split, or a piece of a balanced walk): its keys, the
 * online softmax, the output or its share. Every thread of the block calls it. */
template <typename T, int D, int WM, int WN, int MT, int BN, int STAGES>
__device__ __forceinline__ void attend_piece(const args &a, const piece &pc,
                                             unsigned char *smem_raw)
{
    constexpr int BM = 16 * MT * WM, THREADS = WM * WN * 32, CPR = D / 8, KW = BN / WN;
    T *const sq = reinterpret_cast<T *>(smem_raw);
    T *const sk = sq + BM * D;
    T *const sv = sk + STAGES * BN * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = warp / WN, wn = warp % WN; /* the warp's rows, and its share of a step's keys */
    const int kvh = pc.kvh, split = pc.share, G = a.group;
    const tile_span &span = pc.span;
    const int q0 = span.q0, rows = span.rows, r0 = span.r0, r_end = span.r_end;
    const int shift = span.shift, kv_end = span.kv_end, st0 = span.st0, st1 = span.st1;
    const T *const q = static_cast<const T *>(a.q);
    const T *const kc = static_cast<const T *>(a.k);
    const T *const vc = static_cast<const T *>(a.v);
    const int32_t *const pages = a.table + (int64_t)pc.seq * a.max_pages;

    /* the queries (rows past the sequence's load zeros) */
    for (int i = threadIdx.x; i < BM * CPR; i += THREADS) {
        const int row = i / CPR, ch = i % CPR, r = r0 + row;
        const T *src = q;
        if (r < rows)
            src = q + row_of(a, q0, kvh, r) * D + ch * 8;
        cp_async16(sq + tile_at<D>(row, ch), src, r < rows ? 16 : 0);
    }
    /* a step's keys and values, read in place from their pages (tokens past kv_end: zeros) */
    auto load = [&](int st, int buf) {
        T *const k_s = sk + buf * BN * D, *const v_s = sv + buf * BN * D;
        for (int i = threadIdx.x; i < BN * CPR; i += THREADS) {
            const int row = i / CPR, ch = i % CPR, tok = st * BN + row;
            int64_t at = 0;
            if (tok < kv_end) {
                const int page = min(max(__ldg(pages + tok / a.page_size), 0), a.num_pages - 1);
                at = (((int64_t)page * a.page_size + tok % a.page_size) * a.kv_heads + kvh) * D +
                     ch * 8;
            }
            cp_async16(k_s + tile_at<D>(row, ch), kc + at, tok < kv_end ? 16 : 0);
            cp_async16(v_s + tile_at<D>(row, ch), vc + at, tok < kv_end ? 16 : 0);
        }
    };
#pragma unroll
    for (int i = 0; i < STAGES - 1; i++) {
        if (st0 + i < st1)
            load(st0 + i, i);
        cp_async_commit();
    }

    /* the warp's MT row tiles of 16; this lane's rows in tile t: ra + 16 t and ra + 16 t + 8 */
    float o[MT][D / 8][4] = {};
    float m[MT][2], l[MT][2] = {};
    int pos[MT][2];
    const int wr = wm * 16 * MT;
    const bool busy = r0 + wr < r_end;
    const int ra = r0 + wr + lane / 4;
    const int unmasked = shift + (r0 + wr) / G + 1; /* keys every row of the warp sees */
#pragma unroll
    for (int t = 0; t < MT; t++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            m[t][i] = -INFINITY;
            pos[t][i] = shift + (ra + 16 * t + 8 * i) / G;
        }
    for (int st = st0; st < st1; st++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (st + STAGES - 1 < st1)
            load(st + STAGES - 1, (st + STAGES - 1 - st0) % STAGES);
        cp_async_commit();
        if (!busy)
            continue;
        const int buf = (st - st0) % STAGES;
        const T *const k_s = sk + buf * BN * D + wn * KW * D, *const v_s = sv + buf * BN * D;
        const int key0 = st * BN + wn * KW; /* the warp's first key of the step */

        float s[MT][KW / 8][4] = {};
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            uint32_t qa[MT][4];
#pragma unroll
            for (int t = 0; t < MT; t++)
                ldmatrix_x4(qa[t], sq + tile_at<D>(wr + 16 * t + lane % 16, kk * 2 + lane / 16));
#pragma unroll
            for (int nb = 0; nb < KW / 8; nb += 2) {
                uint32_t kb[4];
                /* rows of k_s count from the warp's first key: wn * KW is a multiple of 8, so the
                 * swizzle (row & 7) is the same as the ring's */
                ldmatrix_x4(kb, k_s + tile_at<D>(nb * 8 + (lane / 16) * 8 + lane % 8,
                                                 kk * 2 + (lane / 8) % 2));
                const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
#pragma unroll
                for (int t = 0; t < MT; t++) {
                    mma_16816<T>(s[t][nb], qa[t], b0);
                    mma_16816<T>(s[t][nb + 1], qa[t], b1);
                }
            }
        }
        /* scores in log2 units, masked past each row's position on the steps that need it */
        const bool mask = key0 + KW > unmasked;
        uint32_t pa[MT][KW / 16][4];
#pragma unroll
        for (int t = 0; t < MT; t++) {
            float mx[2] = {m[t][0], m[t][1]};
#pragma unroll
            for (int nb = 0; nb < KW / 8; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int j = key0 + nb * 8 + (lane % 4) * 2 + (e & 1);
                    float x = s[t][nb][e] * a.scale_log2;
                    if (mask && j > pos[t][e / 2])
                        x = -INFINITY;
                    s[t][nb][e] = x;
                    mx[e / 2] = fmaxf(mx[e / 2], x);
                }
            float corr[2], base[2];
            ktune_attention_mma::softmax_step(mx, m[t], l[t], base, corr,
                                              ktune_attention_mma::exp2_exact());
#pragma unroll
            for (int nb = 0; nb < KW / 8; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    s[t][nb][e] = exp2f(s[t][nb][e] - base[e / 2]);
                    l[t][e / 2] += s[t][nb][e];
                }
            ktune_attention_mma::rescale(o[t], corr);
            ktune_attention_mma::pack_p<T>(s[t], pa[t]);
        }
        ktune_attention_mma::accumulate_pv<T, D, KW, MT>(o, pa, v_s, wn * KW, lane);
    }
    cp_async_wait<0>();

    if constexpr (WN > 1) {
        /* the warps that split the keys hand (m, l, O) to the first of their rows' warps, lane
         * by lane (the same rows and columns in every warp), through the ring's memory */
        __syncthreads();
        float *const hand = reinterpret_cast<float *>(smem_raw);
        constexpr int PER = MT * (D / 2 + 4); /* floats a lane hands over */
        if (busy && wn > 0) {
            float *h = hand + ((size_t)(wm * (WN - 1) + wn - 1) * 32 + lane) * PER;
#pragma unroll
            for (int t = 0; t < MT; t++, h += D / 2 + 4) {
                h[0] = m[t][0];
                h[1] = m[t][1];
                h[2] = l[t][0];
                h[3] = l[t][1];
#pragma unroll
                for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        h[4 + dn * 4 + e] = o[t][dn][e];
            }
        }
        __syncthreads();
        if (!busy || wn > 0)
            return;
#pragma unroll
        for (int w = 1; w < WN; w++) {
            const float *h = hand + ((size_t)(wm * (WN - 1) + w - 1) * 32 + lane) * PER;
#pragma unroll
            for (int t = 0; t < MT; t++, h += D / 2 + 4) {
                float ca[2], cb[2];
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    const float top = fmaxf(m[t][i], h[i]);
                    const float b = top == -INFINITY ? 0.f : top;
                    ca[i] = exp2f(m[t][i] - b);
                    cb[i] = exp2f(h[i] - b);
                    m[t][i] = top;
                    l[t][i] = l[t][i] * ca[i] + h[2 + i] * cb[i];
                }
#pragma unroll
                for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        o[t][dn][e] = o[t][dn][e] * ca[e / 2] + h[4 + dn * 4 + e] * cb[e / 2];
            }
        }
    }
    if (!busy)
        return;

    /* the rows' sums over their quads; then the output, or this split's share */
#pragma unroll
    for (int t = 0; t < MT; t++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const float sum = ktune_attention_mma::quad_sum(l[t][i]);
            const int r = ra + 16 * t + 8 * i;
            if (r < r_end)
                store_row<T, D>(a, row_of(a, q0, kvh, r), split, sum, m[t][i],
                                [&](int dn, int e) { return o[t][dn][2 * i + e]; }, lane);
        }
}

template <typename T, int D, int WM, int WN, int MT, int BN, int STAGES>
__global__ void __launch_bounds__(WM * WN * 32) attend(const args a)
{
    constexpr int BM = 16 * MT * WM;
    static_assert((BN / WN) % 16 == 0 && STAGES >= 2,
                  "whole k16 steps a warp, a ring of two or more");
    extern __shared__ __align__(128) unsigned char smem_raw[];
    /* the block's piece and walk, kept by its first thread (out of the registers of the body) */
    __shared__ piece next;
    __shared__ walk_of<BM, BN> walk;
    __shared__ int more;
    ktune_launch::wait_previous(); /* launched overlapped (rpa_common.cuh): before any load */
    if (threadIdx.x < 32) {
        if (a.balanced) {
            walk_of<BM, BN> w;
            w.start(a);
            if (threadIdx.x == 0) {
                more = w.next(a, &next);
                walk = w;
            }
        } else {
            int seq, tile;
            find_tile<BM>(a, blockIdx.x, seq, tile);
            if (threadIdx.x == 0)
                more = seq >= 0;
            if (threadIdx.x == 0 && seq >= 0) {
                next.span = span_of<BM, BN>(a, seq, tile, blockIdx.z);
                next.seq = seq;
                next.kvh = blockIdx.y;
                next.share = blockIdx.z;
                next.shares = 0;
            }
        }
    }
    __syncthreads();
    while (more) {
        const piece pc = next;
        attend_piece<T, D, WM, WN, MT, BN, STAGES>(a, pc, smem_raw);
        mark_empty_shares(a, pc);
        if (!a.balanced)
            return;
        __syncthreads(); /* the piece read, the ring and the queries' memory free */
        if (threadIdx.x == 0)
            more = walk.next(a, &next);
        __syncthreads();
    }
}

/* out's row (a query token under a head, of rows_total) from the splits' shares: each weighted
 * by 2^(its lse - the largest); a row no share saw a key of gets zeros. A warp a row. Every load
 * of the row, each share's lse and its output, is issued before the first is used, so that the
 * merge waits for memory once (share by share, a row waited once a share); a share that saw no
 * key is read too but weighs nothing, whatever its memory holds. Launched overlapped with the
 * attention (ktune_launch::launch_overlapped): it waits for that grid's memory before its first
 * load. */
template <typename T, int D>
__global__ void __launch_bounds__(256) merge(const float *part_o, const float *part_lse, T *out,
                                             int rows_total, int splits)
{
    constexpr int PER = D / 32, MAX = KTUNE_RPA_MAX_SPLITS;
    static_assert(PER % 2 == 0, "pairs of columns");
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    ktune_launch::wait_previous();
    if (row >= rows_total)
        return;
    float lse[MAX];
    float2 v[MAX][PER / 2];
#pragma unroll
    for (int z = 0; z < MAX; z++) {
        const float2 *p = reinterpret_cast<const float2 *>(
            part_o + ((int64_t)z * rows_total + row) * D + lane * PER);
        lse[z] = z < splits ? part_lse[(int64_t)z * rows_total + row] : -INFINITY;
#pragma unroll
        for (int i = 0; i < PER / 2; i++)
            v[z][i] = z < splits ? p[i] : make_float2(0.f, 0.f);
    }
    float top = -INFINITY;
#pragma unroll
    for (int z = 0; z < MAX; z++)
        top = fmaxf(top, lse[z]);
    float acc[PER] = {}, sum = 0.f;
#pragma unroll
    for (int z = 0; z < MAX; z++) {
        const bool seen = lse[z] != -INFINITY;
        const float w = seen ? exp2f(lse[z] - top) : 0.f;
        sum += w;
#pragma unroll
        for (int i = 0; i < PER / 2; i++) {
            acc[2 * i] += seen ? w * v[z][i].x : 0.f;
            acc[2 * i + 1] += seen ? w * v[z][i].y : 0.f;
        }
    }
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    T *const o = out + (int64_t)row * D + lane * PER;
#pragma unroll
    for (int i = 0; i < PER; i += 2)
        *reinterpret_cast<uint32_t *>(o + i) = pack2<T>(acc[i] * inv, acc[i + 1] * inv);
}

} // namespace ktune_rpa_impl
