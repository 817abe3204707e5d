/* INT8-QK attention on wgmma (sm_90a): the attention launch of the wgmma variant; the
 * quantization before it is the mma variant's (qkattn_kernel.cuh).
 *
 * A block takes BM = 64 * QT queries of a (batch, head) (blockIdx.y; causal blocks last tile
 * first, as mma's) and walks the keys BN a step. Warpgroup 0 is the producer: one thread copies
 * the block's int8 queries once and each step's int8 keys and 16-bit values by TMA into a
 * STAGES-deep ring (int8 rows of 128 bytes, head_dim 64 filled to 128 with zeros by TMA; values
 * in 128-byte swizzled panels of 64 channels). Each consumer warpgroup owns 64 queries (SPLIT 1)
 * or, with SPLIT 2, the two consumers share 64 queries and each walks half of their keys from a
 * ring of its own (filled by a producer thread of its own), the second handing its running max,
 * sum and output to the first at the end:
 *   S = Q K^T on wgmma's k32 int8 multiplies (exact int32), scaled by the queries' and keys'
 *   block scales into log2 units (scale x log2 e folded into Q's), masked; then the online
 *   softmax and O += P V of attention_wgmma.cuh (P in the values' type from registers, V
 *   N-major where TMA put it), whose order overlaps a step's softmax with the previous step's
 *   P V.
 * Two consumers take turns at the tensor cores. Keys past seq_len are the next head's (or TMA's
 * zeros): masked, and their value rows zeroed on the tail step.
 *
 * STREAM (variant `stream`, SPLIT 1): a persistent block walks its run of the stream-K schedule
 * (qkattn_stream.cuh), a segment of a tile at a time; the producer finds the segments, hands each
 * to the consumers in shared memory beside its query tiles (two sets: the next tile's queries load
 * while this one's are multiplied) and keeps one ring across them; the consumers keep their ring
 * place and turns across segments and write a whole tile's rows, or join a cut one. */
#pragma once

#include "../common/attention_wgmma.cuh"
#include "../qmatmul/qmatmul_wgmma.cuh"
#include "qkattn_common.cuh"

namespace ktune_qkattn_impl {

/* The shared memory of a block: its query tiles (two sets with STREAM: the next segment's load
 * while this one's are multiplied), SPLIT rings of int8 keys (rows of 128 bytes) and 16-bit
 * values, two barriers a stage and one (STREAM: four) for the queries, STREAM's two segments
 * (one a set of query tiles) and two counts, and slack to align the tiles to 1024 bytes. */
template <int D, int QT, int SPLIT, int BN, int STAGES, bool STREAM>
constexpr size_t wgmma_smem_bytes()
{
    return (size_t)(STREAM ? 2 : 1) * QT * 64 * 128 + (size_t)SPLIT * STAGES * BN * (128 + D * 2) +
           (size_t)(2 * SPLIT * STAGES + (STREAM ? 4 : 1)) * 8 +
           (STREAM ? 2 * sizeof(segment) + 8 : 0) + 1024;
}

/* A segment as the producer left it in shared memory (volatile: read again where needed, not kept
 * in registers across a walk). */
__device__ __forceinline__ segment segment_read(const segment *slot)
{
    const volatile segment *v = slot;
    segment sg;
    sg.head = v->head;
    sg.tile = v->tile;
    sg.st0 = v->st0;
    sg.st1 = v->st1;
    sg.steps = v->steps;
    sg.first = v->first;
    return sg;
}

/* A walk's state as a hand-off or a share holds it: a consumer thread's two rows' running max and
 * sum, then its output fragments, each value 128 floats after the previous (the warpgroup's 128
 * threads side by side). */
template <int D>
__device__ __forceinline__ void walk_store(float *at, const float (&m)[2], const float (&l)[2],
                                           const float (&o)[D / 8][4])
{
#pragma unroll
    for (int i = 0; i < 2; i++) {
        at[i * 128] = m[i];
        at[(2 + i) * 128] = l[i];
    }
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            at[(4 + dn * 4 + e) * 128] = o[dn][e];
}

/* Joins another walk over other keys of the same rows, stored at `at` (walk_store; each value
 * read by load(pointer)), into this thread's m, l and o: each against its own max (0 for none),
 * the result against the larger. */
template <int D, typename Load>
__device__ __forceinline__ void walk_join(float (&m)[2], float (&l)[2], float (&o)[D / 8][4],
                                          const float *at, Load load)
{
    float w[2], w1[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const float m1 = load(at + i * 128), l1 = load(at + (2 + i) * 128);
        const float top = fmaxf(m[i], m1), ref = top == -INFINITY ? 0.f : top;
        w[i] = exp2f(m[i] - ref);
        w1[i] = exp2f(m1 - ref);
        l[i] = l[i] * w[i] + l1 * w1[i];
        m[i] = top;
    }
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            o[dn][e] = o[dn][e] * w[e / 2] + load(at + (4 + dn * 4 + e) * 128) * w1[e / 2];
}

template <typename T, int D, int QT, int SPLIT, int BN, int STAGES, bool CAUSAL, bool STREAM>
__global__ void __launch_bounds__((QT * SPLIT + 1) * 128, 1)
    attend_wgmma(const __grid_constant__ CUtensorMap map_q,
                 const __grid_constant__ CUtensorMap map_k,
                 const __grid_constant__ CUtensorMap map_v, const attend_args a,
                 const stream_schedule<64 * QT, BN, CAUSAL> sched)
{
    static_assert(QT * SPLIT == 1 || QT * SPLIT == 2, "one or two consumer warpgroups");
    static_assert((BN == 64 || BN == 128) && (D == 64 || D == 128) && STAGES >= 2,
                  "k32 steps of 128-byte int8 rows, panels of 64 channels, a ring of two or more");
    static_assert(!STREAM || SPLIT == 1, "a stream block's consumers walk one ring");
#ifdef KTUNE_WGMMA_DEVICE
    using namespace ktune_matmul_impl;
    using namespace ktune_attention_wgmma;
    constexpr int CONSUMERS = QT * SPLIT, BM = 64 * QT, PANELS = D / 64, QB = STREAM ? 2 : 1;
    constexpr bool TURNS = CONSUMERS == 2; /* the consumers take turns at the tensor cores */
    constexpr uint32_t Q_BYTES = 64 * 128, K_BYTES = BN * 128, V_BYTES = BN * D * 2;
    constexpr uint32_t STAGE_BYTES = K_BYTES + V_BYTES, RING_BYTES = STAGES * STAGE_BYTES;
    extern __shared__ __align__(128) unsigned char smem_raw[]; /* as the mma kernel declares it */
    unsigned char *const smem = smem_raw + (1024 - smem_addr(smem_raw) % 1024) % 1024;
    unsigned char *const rings = smem + QB * QT * Q_BYTES; /* a stage: K tile, then V tile */
    uint64_t *const full = reinterpret_cast<uint64_t *>(rings + SPLIT * RING_BYTES);
    uint64_t *const empty = full + SPLIT * STAGES, *const q_full = empty + SPLIT * STAGES;
    /* STREAM: the query sets' free barriers, the segments they hold (head -1: the run's end) and
     * each consumer's count of a cut tile */
    uint64_t *const q_empty = q_full + QB;
    segment *const slots = reinterpret_cast<segment *>(q_empty + QB);
    int *const counted = reinterpret_cast<int *>(slots + QB);

    const int warpgroup = threadIdx.x / 128, tid = threadIdx.x % 128, lane = threadIdx.x % 32;
    const int seq = a.seq;
    /* the block's work: one tile whole (blockIdx.y's, causal last tile first), or its run of the
     * stream schedule, a segment at a time (the producer finds them and hands each to the
     * consumers with its queries) */
    const int64_t run1 = STREAM ? sched.start_of(blockIdx.x + 1) : 1;
    auto segment_at = [&](int64_t g) {
        if constexpr (STREAM)
            return sched.segment_at(g, run1);
        segment sg;
        sg.head = (int)blockIdx.y;
        sg.tile = CAUSAL ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
        sg.steps = sched.steps_of(sg.tile);
        sg.st0 = 0;
        sg.st1 = sg.steps;
        sg.first = 0;
        return sg;
    };
    /* this part's steps of a segment: with SPLIT 2, part 0 walks the first half of the tile (the
     * larger), part 1 the rest */
    auto part_steps = [&](const segment &sg, int part, int &st0, int &st1) {
        const int half = (sg.steps + 1) / 2;
        st0 = SPLIT == 1 ? sg.st0 : part == 0 ? 0 : half;
        st1 = SPLIT == 1 ? sg.st1 : part == 0 ? half : sg.steps;
    };
    ring_barriers_setup<SPLIT * STAGES>(full, empty, 1, QT);
    if (threadIdx.x == 0) {
        for (int b = 0; b < QB; b++) {
            barrier_init(&q_full[b], 1);
            if (STREAM)
                barrier_init(&q_empty[b], CONSUMERS);
        }
        barrier_init_fence();
    }
    __syncthreads();
    ktune_launch::wait_previous(); /* launched overlapped: the quantization's results */

    if (warpgroup == 0) {
        if constexpr (CONSUMERS > 1)
            registers_lower<40>();
        const int part = tid / 32; /* lane 0 of warp p fills ring p */
        if (lane == 0 && part < SPLIT) {
            unsigned char *const ring = rings + part * RING_BYTES;
            uint64_t *const p_full = full + part * STAGES, *const p_empty = empty + part * STAGES;
            ring_place at, qat;
            for (int64_t g = STREAM ? sched.start_of(blockIdx.x) : 0; g < run1;) {
                const segment sg = segment_at(g);
                g += STREAM ? sg.st1 - sg.st0 : 1;
                const int first = sg.head * seq, r0 = sg.tile * BM; /* the head's row 0 */
                if (part == 0) {
                    if constexpr (STREAM) { /* the consumers are done with the set */
                        ktune_common::barrier_wait_idle(&q_empty[qat.s], qat.phase ^ 1);
                        slots[qat.s] = sg;
                    }
                    barrier_expect(&q_full[qat.s], QT * Q_BYTES);
                    for (int t = 0; t < QT; t++)
                        tma_load(smem + (qat.s * QT + t) * Q_BYTES, &map_q, 0,
                                 first + r0 + t * 64, &q_full[qat.s]);
                    ring_next<QB>(qat.s, qat.phase);
                }
                int st0, st1;
                part_steps(sg, part, st0, st1);
                for (int st = st0; st < st1; st++) {
                    /* the stage is free */
                    ktune_common::barrier_wait_idle(&p_empty[at.s], at.phase ^ 1);
                    barrier_expect(&p_full[at.s], STAGE_BYTES);
                    unsigned char *const k_s = ring + at.s * STAGE_BYTES;
                    unsigned char *const v_s = k_s + K_BYTES;
                    tma_load(k_s, &map_k, 0, first + st * BN, &p_full[at.s]);
#pragma unroll
                    for (int p = 0; p < PANELS; p++)
                        tma_load(v_s + p * BN * 128, &map_v, p * 64, first + st * BN,
                                 &p_full[at.s]);
                    ring_next<STAGES>(at.s, at.phase);
                }
            }
            if (STREAM && part == 0) { /* the end of the run */
                ktune_common::barrier_wait_idle(&q_empty[qat.s], qat.phase ^ 1);
                slots[qat.s].head = -1;
                barrier_arrive(&q_full[qat.s]);
            }
        }
        return; /* the consumers wait for every copy this thread issued */
    }

    if constexpr (CONSUMERS > 1)
        registers_raise<232>();
    const int consumer = warpgroup - 1, warp = tid / 32;
    const int qt = SPLIT == 1 ? consumer : 0, part = SPLIT == 1 ? 0 : consumer;
    unsigned char *const ring = rings + part * RING_BYTES;
    const ring_view rv = {ring, STAGE_BYTES, K_BYTES, full + part * STAGES, empty + part * STAGES};
    ring_place at, qat;
    turns_open<TURNS>();
    for (int64_t g = 0;; g++) {
        segment sg;
        if constexpr (STREAM) {
            barrier_wait(&q_full[qat.s], qat.phase);
            sg = segment_read(&slots[qat.s]);
            if (sg.head < 0)
                break;
        } else {
            if (g == run1)
                break;
            sg = segment_at(g);
            barrier_wait(&q_full[qat.s], qat.phase);
        }
        const int r0 = sg.tile * BM;
        const int kv_end = CAUSAL ? min(seq, r0 + BM) : seq;
        const int rc0 = r0 + qt * 64; /* this warpgroup's first query */
        const bool busy = rc0 < seq;
        /* the keys this warpgroup multiplies (consumers that take turns: the tile's, each its
         * part) and those every one of its queries sees */
        const int my_end = TURNS ? kv_end : !busy ? 0 : CAUSAL ? min(seq, rc0 + 64) : seq;
        const int unmasked = CAUSAL ? min(seq, rc0 + 1) : seq;
        const int ra = rc0 + warp * 16 + lane / 4; /* this thread's rows: ra and ra + 8 */
        const float *const ks = a.k_scale + sg.head * a.scale_stride;
        float qs[2], m[2], l[2] = {0.f, 0.f}, o[D / 8][4] = {};
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int r = ra + 8 * i;
            qs[i] = r < seq ? __ldg(a.q_scale + sg.head * a.scale_stride + (r >> a.q_shift))
                            : 1.f; /* rows past seq_len: not stored */
            m[i] = -INFINITY;
        }
        const uint64_t q_desc = wgmma_desc(smem_addr(smem + (qat.s * QT + qt) * Q_BYTES));
        int32_t sc[BN / 8][4]; /* S, as the multiplies leave it */
        int32_t(&sc_flat)[BN / 2] = *reinterpret_cast<int32_t(*)[BN / 2]>(&sc[0][0]);
        /* the step's keys' scales, a block of 64 keys each (k_gran is a multiple of 64); keys
         * past seq_len take 1 (they are masked); loaded as the multiplies are issued, to arrive
         * meanwhile */
        float kscale[BN / 64];
        auto issue_s = [&](int st, int stage) {
#pragma unroll
            for (int g = 0; g < BN / 64; g++) {
                const int j = st * BN + g * 64;
                kscale[g] = j < seq ? __ldg(ks + (j >> a.k_shift)) : 1.f;
            }
            const uint64_t k_desc = wgmma_desc(smem_addr(ring + stage * STAGE_BYTES));
            wgmma_fence_registers(sc_flat);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < D / 32; kk++)
                ktune_qmatmul_impl::wgmma_m64k32<int8_t, BN>(
                    sc_flat, wgmma_desc_plus(q_desc, kk * 32), wgmma_desc_plus(k_desc, kk * 32),
                    kk > 0);
            wgmma_commit();
            wgmma_fence_registers(sc_flat);
        };
        /* S as floats: the int32 sum x read as the float 1.5 * 2^23 + x (|x| < 2^22: exact, one
         * integer add, where cvt runs at a quarter of the rate), -inf past seq_len and, causal,
         * past the row's own position (only on the steps that hold such keys); into log2 units
         * by the row's and the 64 keys' scales (scale x log2 e folded into the queries'), less
         * the offset */
        auto scores = [&](int st, float(&x)[BN / 8][4], float(&mul)[BN / 64][2],
                          float(&add)[BN / 64][2]) {
            wgmma_fence_registers(sc_flat);
            const int key0 = st * BN;
#pragma unroll
            for (int g = 0; g < BN / 64; g++)
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    mul[g][i] = qs[i] * kscale[g];
                    add[g][i] = -12582912.f * mul[g][i];
                }
            if (key0 + BN > unmasked) {
#pragma unroll
                for (int nb = 0; nb < BN / 8; nb++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int j = key0 + nb * 8 + (lane % 4) * 2 + (e & 1);
                        x[nb][e] = j >= seq || (CAUSAL && j > ra + 8 * (e / 2))
                                       ? -INFINITY
                                       : __int_as_float(sc[nb][e] + 0x4B400000);
                    }
            } else {
#pragma unroll
                for (int nb = 0; nb < BN / 8; nb++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        x[nb][e] = __int_as_float(sc[nb][e] + 0x4B400000);
            }
        };
        int st0, st1;
        part_steps(sg, part, st0, st1);
        /* value rows past seq_len zeroed (the next head's, or TMA's zeros); those of this head
         * past a causal tile's last query are masked, as in the mma kernel */
        consume<T, D, BN, BN / 64, PANELS, CONSUMERS, STAGES, SPLIT == 2, TURNS>(
            rv, st0, st1, seq, my_end, SPLIT == 1 ? st1 - st0 : (sg.steps + 1) / 2, m, l, o,
            issue_s, scores, at);
        if constexpr (STREAM) { /* the segment again; the set's queries are done with */
            sg = segment_read(&slots[qat.s]);
            warpgroup_sync(consumer);
            if (tid == 0)
                barrier_arrive(&q_empty[qat.s]);
        }
        ring_next<QB>(qat.s, qat.phase);
        const int first = sg.head * seq; /* the head's row 0 */
#pragma unroll
        for (int i = 0; i < 2; i++)
            l[i] = ktune_attention_mma::quad_sum(l[i]); /* the rows' sums over their quads */
        if constexpr (SPLIT == 2) {
            /* part 1 hands its rows' running max, sum and output to part 0 (through its ring,
             * whose copies and multiplies are done), which joins them to its own */
            float *const hand = reinterpret_cast<float *>(rings + RING_BYTES) + tid;
            if (part == 1)
                walk_store<D>(hand, m, l, o);
            consumers_sync<CONSUMERS>();
            if (part == 1)
                return;
            walk_join<D>(m, l, o, hand, [](const float *p) { return *p; });
        }
        if (STREAM && sg.st1 - sg.st0 < sg.steps) {
            /* a cut tile: this warpgroup's share to the workspace and its count; the last of the
             * tile's blocks to count joins the others' shares to its own and writes the rows */
            const int c0 = sched.block_of(sg.first), c1 = sched.block_of(sg.first + sg.steps - 1);
            auto share = [&](int b) {
                return a.shares + (sched.share_of(b, sg.first) * QT + qt) * share_floats<D>() + tid;
            };
            walk_store<D>(share((int)blockIdx.x), m, l, o);
            __threadfence();
            warpgroup_sync(consumer);
            if (tid == 0)
                counted[consumer] = atomicAdd(
                    a.counters + sg.head * counter_stride(seq) + sg.tile * QT + qt, 1);
            warpgroup_sync(consumer);
            if (counted[consumer] != c1 - c0)
                continue;
            __threadfence();
            for (int b = c0; b <= c1; b++) {
                if (b == (int)blockIdx.x)
                    continue;
                walk_join<D>(m, l, o, share(b), [](const float *p) { return __ldcg(p); });
            }
        }
        if (!busy)
            continue;

        /* the output */
        T *const out = static_cast<T *>(a.out) + (int64_t)first * D + (lane % 4) * 2;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int r = ra + 8 * i;
            if (r >= seq)
                continue;
            const float inv = l[i] > 0.f ? 1.f / l[i] : 0.f;
#pragma unroll
            for (int dn = 0; dn < D / 8; dn++)
                *reinterpret_cast<uint32_t *>(out + (int64_t)r * D + dn * 8) =
                    pack2<T>(o[dn][2 * i] * inv, o[dn][2 * i + 1] * inv);
        }
    }
#else
    (void)map_q, (void)map_k, (void)map_v, (void)a, (void)sched;
#endif
}

/* The family's mma default (spaces/qkattn.yaml), for what TMA cannot address. */
using wgmma_fallback = launcher<128, 8, 64, 2, 32, 64>;

/* A config of the wgmma kernel: BM queries a block (64 a consumer, or SPLIT 2 consumers on the
 * two halves of 64 queries' keys), BN keys a step, a ring of STAGES, Q and K scaled in blocks of
 * QG and KG tokens; STREAM: the stream-K schedule (qkattn_stream.cuh), persistent blocks, as
 * many as the device holds at once (at most STREAM_BLOCKS and the call's steps), each an equal
 * run of the call's steps. */
template <int BM, int BN, int STAGES, int QG, int KG, int SPLIT, bool STREAM = false>
struct wgmma_launcher {
    static constexpr int QT = BM / 64, CONSUMERS = QT * SPLIT;
    static_assert((BM == 64 || BM == 128) && (SPLIT == 1 || SPLIT == 2) && CONSUMERS <= 2,
                  "one or two consumers: of 64 queries each, or two halves of 64 queries' keys");
    static_assert(QG >= KTUNE_QKATTN_MIN_QUANT_BLOCK && KG >= 64 && (QG & (QG - 1)) == 0 &&
                      (KG & (KG - 1)) == 0,
                  "blocks of at least the workspace's finest, powers of two (found by a shift); "
                  "a key scale for 64 keys or more (one load for each 64 keys of a step)");
    static_assert(!STREAM || SPLIT == 1, "stream blocks of one ring");
    /* Configurations past the registers (O, S and P a thread; a stream walk's state besides,
     * with steps of 64 keys) or the shared memory a block can have (the space's constraints keep
     * them out) are not compiled for that head_dim. */
    template <int D>
    static constexpr bool fits = D / 2 + 3 * BN / 4 <= 176 && (!STREAM || BN == 64) &&
                                 wgmma_smem_bytes<D, QT, SPLIT, BN, STAGES, STREAM>() <= 232448;

    template <typename T, int D>
    static cudaError_t run(const ktune_qkattn_problem &p, cudaStream_t s)
    {
        if constexpr (!fits<D>)
            return cudaErrorNotSupported;
        else
            return p.causal ? run_fitting<T, D, true>(p, s) : run_fitting<T, D, false>(p, s);
    }

    template <typename T, int D, bool CAUSAL>
    static cudaError_t run_fitting(const ktune_qkattn_problem &p, cudaStream_t s)
    {
        using namespace ktune_matmul_impl;
        if (!KTUNE_SM90A) /* the kernel has no code in this build */
            return cudaErrorNotSupported;
        const workspace w = workspace_of(p);
        const int64_t n = p.batch * p.heads, rows = n * p.seq_len;
        stream_schedule<BM, BN, CAUSAL> sched = stream_schedule<BM, BN, CAUSAL>::of(
            (int)p.seq_len, n);
        if (STREAM && sched.total == 0) /* more steps than a stream launch counts */
            return wgmma_launcher<BM, BN, STAGES, QG, KG, SPLIT>::template run<T, D>(p, s);
        CUtensorMap map_q, map_k, map_v;
        if (rows + BM > INT32_MAX ||
            !ktune_qmatmul_impl::byte_tensor_map(&map_q, w.q, rows, D, 64) ||
            !ktune_qmatmul_impl::byte_tensor_map(&map_k, w.k, rows, D, BN) ||
            !tensor_map<T>(&map_v, p.v, rows, D, BN))
            return wgmma_fallback::run<T, D>(p, s);
        constexpr auto kernel = attend_wgmma<T, D, QT, SPLIT, BN, STAGES, CAUSAL, STREAM>;
        constexpr size_t smem = wgmma_smem_bytes<D, QT, SPLIT, BN, STAGES, STREAM>();
        static_assert(smem == (size_t)(STREAM ? 2 : 1) * QT * 8192 +
                                  (size_t)SPLIT * STAGES * (BN * (128 + 2 * D) + 16) +
                                  (STREAM ? 1128 : 1032),
                      "the shared memory spaces/qkattn.yaml's constraints count");
        const dim3 block((CONSUMERS + 1) * 128);
        dim3 grid((unsigned)sched.tiles, (unsigned)n);
        if (STREAM) {
            const int64_t most = stream_shares(n, p.seq_len) / 4; /* blocks the shares allow */
            unsigned blocks = 0;
            const cudaError_t e = ktune_launch::persistent_grid<kernel>(
                block, dim3(1, 1, 1), smem, sched.total < most ? sched.total : most, &blocks);
            if (e != cudaSuccess)
                return e;
            sched.blocks = (int)blocks;
            grid = dim3(blocks);
        }
        cudaError_t e = quantize_all<T, D>(p, w, QG, KG, s);
        if (e != cudaSuccess)
            return e;
        const attend_args a = attend_args_of(p, w, QG, KG);
        return ktune_launch::launch_overlapped(kernel, grid, block, dim3(1, 1, 1), smem, s, map_q,
                                               map_k, map_v, a, sched);
    }
};

} // namespace ktune_qkattn_impl
