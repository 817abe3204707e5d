/* The stream-K schedule of the wgmma attention (variant `stream`). The work of a call, every
 * (batch, head)'s tiles of BM queries and each tile's steps of BN keys (a causal tile's keys end
 * at its last query), is laid end to end, head by head, tile by tile, step by step, and cut into
 * `blocks` runs of equal length to a step: a persistent block a run, so that every block has the
 * same number of steps however few tiles the call has. A run crosses tiles; its piece of a tile
 * is a segment. A tile within one run is computed whole by that block. A tile cut between runs is
 * joined: each of its blocks writes its rows' running max, sum and output (a share) to the
 * workspace and counts itself in the tile's counter, and the last to count joins the others'
 * shares to its own and writes the rows; no block waits for another. */
#pragma once

#include <stdint.h>

namespace ktune_qkattn_impl {

/* The most blocks a stream launch takes (the workspace holds two shares of each). */
constexpr int STREAM_BLOCKS = 160;

/* The steps a stream launch may have: beyond, the launcher runs a block a tile instead. */
constexpr int64_t STREAM_MAX_STEPS = (int64_t)1 << 40;

/* The shares the workspace holds for a problem of n (batch, head)s of seq tokens: two a block
 * of two consumers, for as many blocks as steps of the finest tiles (64 x 64), at most
 * STREAM_BLOCKS. */
__host__ __device__ inline int64_t stream_shares(int64_t n, int64_t seq)
{
    const double c = (double)((seq + 63) / 64), steps = (double)n * c * c;
    return 4 * (steps < STREAM_BLOCKS ? (int64_t)steps : STREAM_BLOCKS);
}

/* The floats of one share: a consumer's 128 threads' two rows' max and sum, then their output
 * fragments (D / 2 a thread), a thread's values 128 floats apart. */
template <int D> __host__ __device__ constexpr int64_t share_floats() { return (D / 2 + 4) * 128; }

/* A (batch, head)'s tile counters: one a consumer's 64 queries of a tile, for every tile. */
__host__ __device__ inline int64_t counter_stride(int64_t seq) { return seq / 64 + 2; }

/* A segment: steps st0 .. st1 - 1 of tile `tile` of (batch, head) `head`, whose `steps` steps
 * start at step `first` of the call. */
struct segment {
    int head, tile, st0, st1, steps;
    int64_t first;
};

template <int BM, int BN, bool CAUSAL> struct stream_schedule {
    int seq, tiles, blocks;
    int64_t per_head, total; /* steps of a (batch, head), of the call */

    /* The schedule of n (batch, head)s of seq tokens; blocks set by the launcher. */
    __host__ __device__ __forceinline__ static stream_schedule of(int seq, int64_t n)
    {
        stream_schedule s;
        s.seq = seq;
        s.tiles = (seq + BM - 1) / BM;
        s.blocks = 1;
        s.per_head = s.steps_before(s.tiles);
        s.total = (double)n * (double)s.per_head < (double)STREAM_MAX_STEPS ? n * s.per_head : 0;
        return s;
    }

    /* The steps of tile t. */
    __host__ __device__ __forceinline__ int steps_of(int t) const
    {
        const int64_t end = CAUSAL ? (int64_t)(t + 1) * BM : seq;
        return (int)(((end < seq ? end : seq) + BN - 1) / BN);
    }

    /* The steps of a (batch, head)'s tiles before tile t (0 <= t <= tiles). Causal: every tile
     * but the last ends at (t + 1) BM, within seq, and has ceil((t + 1) BM / BN) steps. */
    __host__ __device__ __forceinline__ int64_t steps_before(int t) const
    {
        if (!CAUSAL)
            return (int64_t)t * steps_of(0);
        const int whole = t < tiles ? t : tiles - 1; /* tiles before t but the last */
        int64_t sum;
        if (BM >= BN) {
            sum = (int64_t)(BM / BN) * whole * (whole + 1) / 2;
        } else {
            constexpr int64_t d = BM >= BN ? 1 : BN / BM;
            const int64_t q = whole / d, rem = whole % d;
            sum = d * q * (q + 1) / 2 + rem * (q + 1);
        }
        return t < tiles ? sum : sum + steps_of(tiles - 1);
    }

    /* The tile holding step w of a (batch, head) (0 <= w < per_head). */
    __host__ __device__ __forceinline__ int tile_of(int64_t w) const
    {
        if (!CAUSAL)
            return (int)(w / steps_of(0));
        int lo = 0, hi = tiles - 1; /* the last t with steps_before(t) <= w */
        while (lo < hi) {
            const int mid = lo + (hi - lo + 1) / 2;
            if (steps_before(mid) <= w)
                lo = mid;
            else
                hi = mid - 1;
        }
        return lo;
    }

    /* The first step of block b's run (b <= blocks: blocks gives the end). */
    __host__ __device__ __forceinline__ int64_t start_of(int b) const
    {
        return (int64_t)b * total / blocks;
    }

    /* The block whose run holds step g of the call. */
    __host__ __device__ __forceinline__ int block_of(int64_t g) const
    {
        return (int)(((g + 1) * blocks - 1) / total);
    }

    /* The segment starting at step g of the call, within a run ending at `end`. */
    __host__ __device__ __forceinline__ segment segment_at(int64_t g, int64_t end) const
    {
        segment sg;
        sg.head = (int)(g / per_head);
        const int64_t w = g - (int64_t)sg.head * per_head;
        sg.tile = tile_of(w);
        sg.first = (int64_t)sg.head * per_head + steps_before(sg.tile);
        sg.steps = steps_of(sg.tile);
        sg.st0 = (int)(g - sg.first);
        sg.st1 = (int)(end - sg.first < sg.steps ? end - sg.first : sg.steps);
        return sg;
    }

    /* The share of block b's segment of the tile whose steps start at `first`: its run's first
     * segment (0) or, where the run starts before the tile, its last (1). */
    __host__ __device__ __forceinline__ int64_t share_of(int b, int64_t first) const
    {
        return (int64_t)b * 2 + (start_of(b) < first ? 1 : 0);
    }
};

} // namespace ktune_qkattn_impl
