/* The qkattn stream variant's schedule (kernels/qkattn/qkattn_stream.cuh), on the host, against
 * counting done the plain way: for tiles of 64 and 128 queries, steps of 64 and 128 keys, causal
 * and not, odd and round sequence lengths, 1 to 7 (batch, head)s and 1 to 160 blocks:
 *   - a tile's steps, the steps before it and the tile holding each step;
 *   - the blocks' runs, walked segment by segment as the kernel walks them, cover every step of
 *     the call exactly once, each segment within one tile;
 *   - block_of finds the run that holds a step;
 *   - a cut tile's blocks each get a share of their own (no two segments of the call write the
 *     same share), two a block at most (with two consumers, four of the workspace's shares: the
 *     launcher takes no more blocks than a quarter of what stream_shares holds);
 * and the step count past which a launch falls back to a block a tile. */
#include <cuda_runtime.h> /* __host__, __device__, __forceinline__ for the host compiler */

#include <stdint.h>
#include <stdio.h>

#include <set>
#include <utility>
#include <vector>

#include "check.h"
#include "qkattn_stream.cuh"

using ktune_qkattn_impl::segment;
using ktune_qkattn_impl::stream_schedule;

/* The steps of tile t, counted from the keys it sees. */
static int plain_steps(int t, int seq, int bm, int bn, bool causal)
{
    const int64_t end = causal ? ((int64_t)(t + 1) * bm < seq ? (int64_t)(t + 1) * bm : seq) : seq;
    return (int)((end + bn - 1) / bn);
}

template <int BM, int BN, bool CAUSAL> static void check_schedule(int seq, int n, int blocks)
{
    stream_schedule<BM, BN, CAUSAL> s = stream_schedule<BM, BN, CAUSAL>::of(seq, n);
    const int tiles = (seq + BM - 1) / BM;
    CHECK(s.tiles == tiles);
    std::vector<int64_t> before(tiles + 1, 0);
    for (int t = 0; t < tiles; t++) {
        CHECK(s.steps_of(t) == plain_steps(t, seq, BM, BN, CAUSAL));
        before[t + 1] = before[t] + plain_steps(t, seq, BM, BN, CAUSAL);
    }
    for (int t = 0; t <= tiles; t++)
        CHECK(s.steps_before(t) == before[t]);
    CHECK(s.per_head == before[tiles]);
    CHECK(s.total == (int64_t)n * s.per_head);
    for (int t = 0; t < tiles; t++)
        for (int64_t w = before[t]; w < before[t + 1]; w++)
            CHECK(s.tile_of(w) == t);
    s.blocks = blocks < s.total ? blocks : (int)s.total; /* the launcher's cap: no empty runs */
    std::vector<int> seen((size_t)s.total, 0);
    std::set<int64_t> shares;
    for (int b = 0; b < s.blocks; b++) {
        const int64_t run0 = s.start_of(b), run1 = s.start_of(b + 1);
        CHECK(run0 < run1);
        for (int64_t g = run0; g < run1; g++)
            CHECK(s.block_of(g) == b);
        for (int64_t g = run0; g < run1;) {
            const segment sg = s.segment_at(g, run1);
            CHECK(sg.head >= 0 && sg.head < n && sg.tile >= 0 && sg.tile < tiles);
            CHECK(sg.steps == plain_steps(sg.tile, seq, BM, BN, CAUSAL));
            CHECK(sg.first == (int64_t)sg.head * s.per_head + before[sg.tile]);
            CHECK(sg.first + sg.st0 == g && sg.st0 < sg.st1 && sg.st1 <= sg.steps);
            for (int st = sg.st0; st < sg.st1; st++)
                seen[(size_t)(sg.first + st)]++;
            const int c0 = s.block_of(sg.first), c1 = s.block_of(sg.first + sg.steps - 1);
            CHECK(c0 <= b && b <= c1);
            CHECK((sg.st1 - sg.st0 < sg.steps) == (c0 < c1)); /* cut: more than one block */
            if (c0 < c1) {
                const int64_t share = s.share_of(b, sg.first);
                CHECK(share >= 0 && share < 2 * (int64_t)s.blocks);
                CHECK(shares.insert(share).second);
            }
            g += sg.st1 - sg.st0;
        }
    }
    for (int64_t i = 0; i < s.total; i++)
        CHECK(seen[(size_t)i] == 1);
}

template <int BM, int BN, bool CAUSAL> static void check_all()
{
    const int seqs[] = {1, 37, 63, 64, 65, 127, 128, 129, 200, 517, 1000, 1500, 4096, 5000};
    const int heads[] = {1, 3, 7};
    const int blocks[] = {1, 2, 5, 33, 132, 160};
    for (int seq : seqs)
        for (int n : heads)
            for (int b : blocks) /* the launcher's cap: the shares the workspace holds, 4 a block */
                if (b <= ktune_qkattn_impl::stream_shares(n, seq) / 4)
                    check_schedule<BM, BN, CAUSAL>(seq, n, b);
}

int main()
{
    check_all<64, 64, false>();
    check_all<64, 64, true>();
    check_all<64, 128, false>();
    check_all<64, 128, true>();
    check_all<128, 64, false>();
    check_all<128, 64, true>();
    check_all<128, 128, false>();
    check_all<128, 128, true>();
    /* more steps than a launch counts: total 0, the launcher's cue to run a block a tile */
    CHECK((stream_schedule<64, 64, false>::of((1 << 30) - 1, 65535).total == 0));
    CHECK((stream_schedule<128, 64, true>::of((1 << 30) - 1, 65535).total == 0));
    CHECK((stream_schedule<128, 64, true>::of(1 << 20, 1).total > 0));
    /* the shares a problem's workspace holds: 4 a block, for at most STREAM_BLOCKS blocks and no
     * more blocks than steps of 64 x 64 */
    CHECK(ktune_qkattn_impl::stream_shares(1, 1) == 4);
    CHECK(ktune_qkattn_impl::stream_shares(2, 200) == 4 * 32);
    CHECK(ktune_qkattn_impl::stream_shares(5, 4096) == 4 * ktune_qkattn_impl::STREAM_BLOCKS);
    return check_report("test_qkattn_schedule");
}
