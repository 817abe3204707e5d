/* What the attention kernels on wgmma share (rpa, qkattn; sm_90a): a consumer warpgroup's walk
 * over a block's steps of keys, fed by a producer's ring: its scores S (64 x BN, the accumulator
 * fragments of wgmma, laid out as mma.sync's m16n8 accumulators: thread t of warp w holds rows
 * 16 w + t / 4 and + 8, columns 8 nb + 2 (t % 4) and the next in x[nb][0..1] and x[nb][2..3]),
 * the online softmax on them, P rounded to 16 bits in registers, and O += P V on wgmma with V
 * N-major in shared memory (the value rows as stored: 128-byte swizzled panels of 64 channels,
 * BN rows each). */
#pragma once

#include "../matmul/matmul_wgmma.cuh"
#include "attention_mma.cuh"

#include <type_traits>

namespace ktune_attention_wgmma {

#ifdef KTUNE_WGMMA_DEVICE
/* A barrier of the consumers' threads, warpgroups 1 .. CONSUMERS (named barrier 3; 1 and 2 are
 * each consumer warpgroup's own, ktune_matmul_impl::warpgroup_sync). */
template <int CONSUMERS> __device__ __forceinline__ void consumers_sync()
{
    asm volatile("bar.sync 3, %0;\n" ::"n"(CONSUMERS * 128) : "memory");
}

/* Keeps the compiler from reusing P's registers before the multiplies that read them retire. */
template <int R> __device__ __forceinline__ void hold_fragments(uint32_t (&p)[R][4])
{
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            asm volatile("" : "+r"(p[i][j])::"memory");
}

/* Zeros value rows valid .. BN - 1 of a stage (panels of BN rows of 128 bytes at v_s), thread
 * `thread` of `threads`; then makes the writes visible to the multiplies (the async proxy). Keys
 * past a tile's last are masked, their weights 0, but 0 times a NaN that memory beyond the
 * keys may hold is NaN. */
template <int PANELS, int BN>
__device__ __forceinline__ void zero_value_rows(unsigned char *v_s, int valid, int thread,
                                                int threads)
{
    for (int i = thread; i < (BN - valid) * PANELS * 8; i += threads) {
        const int row = valid + i / (PANELS * 8), rest = i % (PANELS * 8);
        *reinterpret_cast<uint4 *>(v_s + (rest / 8) * BN * 128 + row * 128 + (rest % 8) * 16) =
            make_uint4(0, 0, 0, 0);
    }
    ktune_matmul_impl::fence_proxy_async();
}

/* Where a ring lies: STAGES stages of stage_bytes from base, each a key tile and then, v_offset
 * bytes in, the value tile; each stage's full and empty barriers. */
struct ring_view {
    unsigned char *base;
    uint32_t stage_bytes, v_offset;
    uint64_t *full, *empty;
};

/* The online softmax's step for a thread's two rows, with slack: mx, the step's largest score of
 * each row on this lane (log2 units; -inf for none), taken over the row's quad; the running max m
 * moves to it only where it passes m by more than SLACK, so that the step's weights against base
 * (m, or 0 while a row has seen no score) are at most 2^SLACK and most steps of a long walk leave
 * the row's sum and output as they are (corr 1). Where m moves, corr brings l (here) and the
 * output (the caller) to it. The result is the same: l and the output are both taken against m. */
template <typename Exp2>
__device__ __forceinline__ void softmax_step_slack(float (&mx)[2], float (&m)[2], float (&l)[2],
                                                   float (&base)[2], float (&corr)[2], Exp2 exp2)
{
    constexpr float SLACK = 8.f;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(~0u, mx[i], 1));
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(~0u, mx[i], 2));
        const bool move = mx[i] > m[i] + SLACK; /* any score, while m is -inf */
        corr[i] = move ? exp2(m[i] - mx[i]) : 1.f;
        m[i] = move ? mx[i] : m[i];
        base[i] = m[i] == -INFINITY ? 0.f : m[i];
        l[i] *= corr[i];
    }
}

/* Where a consumer is in its ring: the stage it takes next and the phase of that stage's
 * barriers (a walk starts where the previous one of the block left the ring). */
struct ring_place {
    int s = 0, phase = 0;
};

/* TURNS (consume): consumer 1 hands the first turn to consumer 0, once before a block's first
 * walk; each walk ends with consumer 1 handing the turn back. */
template <bool TURNS> __device__ __forceinline__ void turns_open()
{
    if (TURNS && threadIdx.x / 128 == 2)
        asm volatile("bar.arrive 4, 256;\n" ::: "memory");
}

/* A consumer warpgroup's walk over steps st0 .. st1 - 1 of BN keys (the ring's stages in turn
 * from `at`, as the producer fills them; `at` is left where the walk ends): the block's ring,
 * which every consumer walks, or with OWN_RING one of this warpgroup's own. The keys end at
 * kv_end (the tail step's value rows past it are zeroed by the ring's consumers together), this
 * warpgroup's at my_end: it multiplies the steps below my_end and frees the others as they
 * arrive.
 *
 * Per step: issue_s(st, stage) issues and commits S = Q K^T of the stage's keys into storage of
 * the caller's; scores(st, x, mul, add) reads it (the multiplies done) into x, masked keys -inf,
 * in the fragment layout of attention_mma.cuh, and gives for each of the step's G groups of BN /
 * G keys and this thread's row i the map into log2 units: score = x mul[g][i] + add[g][i], mul >
 * 0. Then the online softmax (m, l: this thread's two rows' running max and sum; the max with
 * slack, softmax_step_slack), O (o) rescaled on the steps where a row of the warp needs it, and
 * O += P V issued with P in registers. The order overlaps each step's softmax with the previous
 * step's P V on the tensor cores: only S is waited for.
 *
 * TURNS (two consumers): the consumers take turns to issue their multiplies (named barriers 4 and
 * 5, one a consumer: each waits for its turn, issues a step's S and P V and hands the turn to the
 * other; consumer 0 has the first, turns_open), so that one's softmax runs while the other's
 * multiplies do, rather than both softmaxes at once on the special function units with the
 * tensor cores idle (FlashAttention-3's ping-pong). Both must take as many turns: turn_steps, the
 * most steps either multiplies; one that multiplies fewer takes the rest of its turns empty at
 * the end. */
template <typename T, int D, int BN, int G, int PANELS, int CONSUMERS, int STAGES, bool OWN_RING,
          bool TURNS, typename IssueS, typename Scores>
__device__ __forceinline__ void consume(const ring_view &r, int st0, int st1, int kv_end,
                                        int my_end, int turn_steps, float (&m)[2],
                                        float (&l)[2], float (&o)[D / 8][4], IssueS issue_s,
                                        Scores scores, ring_place &at)
{
    using namespace ktune_matmul_impl;
    static_assert(BN % (8 * G) == 0, "groups of whole n8 blocks");
    constexpr int NG = BN / 8 / G; /* n8 blocks a group */
    const int tid = threadIdx.x % 128;
    int &s = at.s, &phase = at.phase;
    const int consumer = threadIdx.x / 128 - 1;
    /* step st's stage (s) filled; on the tail step, its value rows past kv_end zeroed */
    auto acquire = [&](int st) {
        barrier_wait(&r.full[s], phase);
        if (st * BN + BN > kv_end) {
            zero_value_rows<PANELS, BN>(r.base + s * r.stage_bytes + r.v_offset, kv_end - st * BN,
                                        OWN_RING ? tid : threadIdx.x - 128,
                                        OWN_RING ? 128 : CONSUMERS * 128);
            if constexpr (OWN_RING)
                warpgroup_sync(consumer);
            else
                consumers_sync<CONSUMERS>();
        }
    };
    float(&o_flat)[D / 2] = *reinterpret_cast<float(*)[D / 2]>(&o[0][0]);
    const int last = min(st1, (my_end + BN - 1) / BN); /* steps st0 .. last - 1 multiplied */
    uint32_t pa[BN / 16][4] = {};
    int held = -1; /* the stage whose P V is in flight */
    static_assert(!TURNS || CONSUMERS == 2, "turns between two consumers");
    auto take_turn = [&] {
        if constexpr (TURNS) {
            if (consumer == 0)
                asm volatile("bar.sync 4, 256;\n" ::: "memory");
            else
                asm volatile("bar.sync 5, 256;\n" ::: "memory");
        }
    };
    auto pass_turn = [&] {
        if constexpr (TURNS) {
            if (consumer == 0)
                asm volatile("bar.arrive 5, 256;\n" ::: "memory");
            else
                asm volatile("bar.arrive 4, 256;\n" ::: "memory");
        }
    };
    if (st0 < last) {
        acquire(st0);
        take_turn();
        issue_s(st0, s);
        pass_turn();
        wgmma_wait<0>();
    }
    /* one step; NEXT: the next step's S issued in it (static, so that the waits are too and the
     * compiler can see which multiplies are in flight) */
    auto step = [&](int st, auto next) {
        constexpr bool NEXT = decltype(next)::value;
        float x[BN / 8][4], mul[G][2], add[G][2];
        scores(st, x, mul, add);
        /* the weights, while the previous step's P V runs: each group's largest x, mapped */
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int g = 0; g < G; g++)
#pragma unroll
            for (int i = 0; i < 2; i++) {
                float top = fmaxf(x[g * NG][2 * i], x[g * NG][2 * i + 1]);
#pragma unroll
                for (int nb = g * NG + 1; nb < g * NG + NG; nb++)
                    top = fmaxf(top, fmaxf(x[nb][2 * i], x[nb][2 * i + 1]));
                mx[i] = fmaxf(mx[i], fmaf(top, mul[g][i], add[g][i]));
            }
        const ktune_attention_mma::exp2_fast exp2;
        float corr[2], base[2];
        softmax_step_slack(mx, m, l, base, corr, exp2);
#pragma unroll
        for (int g = 0; g < G; g++)
#pragma unroll
            for (int i = 0; i < 2; i++)
                add[g][i] -= base[i];
#pragma unroll
        for (int nb = 0; nb < BN / 8; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                x[nb][e] = exp2(fmaf(x[nb][e], mul[nb / NG][e / 2], add[nb / NG][e / 2]));
                l[e / 2] += x[nb][e];
            }
        wgmma_wait<0>(); /* the previous step's P V: its stage is free, O and P are ours */
        wgmma_fence_registers(o_flat);
        hold_fragments(pa);
        if (held >= 0 && tid == 0)
            barrier_arrive(&r.empty[held]);
        if (__any_sync(~0u, corr[0] != 1.f || corr[1] != 1.f))
            ktune_attention_mma::rescale(o, corr);
        ktune_attention_mma::pack_p<T>(x, pa);
        const int cur = s;
        ring_next<STAGES>(s, phase);
        if constexpr (NEXT)
            acquire(st + 1);
        take_turn();
        if constexpr (NEXT) /* the next step's S goes first: the softmax waits for it */
            issue_s(st + 1, s);
        wgmma_fence_registers(o_flat);
        wgmma_fence();
        const uint64_t v_desc = wgmma_desc_n_major(
            smem_addr(r.base + cur * r.stage_bytes + r.v_offset), BN * 128);
#pragma unroll
        for (int kb = 0; kb < BN / 16; kb++) /* 16 value rows: two 8-row atoms of 1024 bytes */
            wgmma_m64k16_ra<T, D, 1>(o_flat, pa[kb], wgmma_desc_plus(v_desc, kb * 2048));
        wgmma_commit();
        pass_turn();
        wgmma_fence_registers(o_flat);
        held = cur;
        if constexpr (NEXT)
            wgmma_wait<1>(); /* the next step's S (this step's P V may run on) */
    };
    int st = st0;
    for (; st + 1 < last; st++)
        step(st, std::true_type());
    if (st < last)
        step(st, std::false_type());
    wgmma_wait<0>();
    wgmma_fence_registers(o_flat);
    hold_fragments(pa);
    if (held >= 0 && tid == 0)
        barrier_arrive(&r.empty[held]);
    /* the turns of a walk of n steps: its first S, then a step's S and P V each */
    auto turns_of = [](int n) { return n > 0 ? n + 1 : 0; };
    if constexpr (TURNS)
        for (int t = turns_of(max(0, last - st0)); t < turns_of(turn_steps); t++) {
            take_turn();
            pass_turn();
        }
    for (st = max(st0, last); st < st1; st++) { /* steps past this warpgroup's keys */
        acquire(st);
        if (tid == 0)
            barrier_arrive(&r.empty[s]);
        ring_next<STAGES>(s, phase);
    }
}
#endif

} // namespace ktune_attention_wgmma
