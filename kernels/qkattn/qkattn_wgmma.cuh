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
 * zeros): masked, and their value rows zeroed on the tail step. */
#pragma once

#include "../common/attention_wgmma.cuh"
#include "../qmatmul/qmatmul_wgmma.cuh"
#include "qkattn_common.cuh"

namespace ktune_qkattn_impl {

/* The shared memory of a block: its query tiles, SPLIT rings of int8 keys (rows of 128 bytes)
 * and 16-bit values, two barriers a stage and the queries' one, and slack to align the tiles to
 * 1024 bytes. */
template <int D, int QT, int SPLIT, int BN, int STAGES> constexpr size_t wgmma_smem_bytes()
{
    return (size_t)QT * 64 * 128 + (size_t)SPLIT * STAGES * BN * (128 + D * 2) +
           (size_t)(2 * SPLIT * STAGES + 1) * 8 + 1024;
}

template <typename T, int D, int QT, int SPLIT, int BN, int STAGES, bool CAUSAL>
__global__ void __launch_bounds__((QT * SPLIT + 1) * 128, 1)
    attend_wgmma(const __grid_constant__ CUtensorMap map_q,
                 const __grid_constant__ CUtensorMap map_k,
                 const __grid_constant__ CUtensorMap map_v, const attend_args a)
{
    static_assert(QT * SPLIT == 1 || QT * SPLIT == 2, "one or two consumer warpgroups");
    static_assert((BN == 64 || BN == 128) && (D == 64 || D == 128) && STAGES >= 2,
                  "k32 steps of 128-byte int8 rows, panels of 64 channels, a ring of two or more");
#ifdef KTUNE_WGMMA_DEVICE
    using namespace ktune_matmul_impl;
    using namespace ktune_attention_wgmma;
    constexpr int CONSUMERS = QT * SPLIT, BM = 64 * QT, PANELS = D / 64;
    constexpr bool TURNS = CONSUMERS == 2; /* the consumers take turns at the tensor cores */
    constexpr uint32_t Q_BYTES = 64 * 128, K_BYTES = BN * 128, V_BYTES = BN * D * 2;
    constexpr uint32_t STAGE_BYTES = K_BYTES + V_BYTES, RING_BYTES = STAGES * STAGE_BYTES;
    extern __shared__ __align__(128) unsigned char smem_raw[]; /* as the mma kernel declares it */
    unsigned char *const smem = smem_raw + (1024 - smem_addr(smem_raw) % 1024) % 1024;
    unsigned char *const rings = smem + QT * Q_BYTES; /* a stage: K tile, then V tile */
    uint64_t *const full = reinterpret_cast<uint64_t *>(rings + SPLIT * RING_BYTES);
    uint64_t *const empty = full + SPLIT * STAGES, *const q_full = empty + SPLIT * STAGES;

    const int warpgroup = threadIdx.x / 128, tid = threadIdx.x % 128, lane = threadIdx.x % 32;
    const int tile = CAUSAL ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int r0 = tile * BM, seq = a.seq, first = (int)blockIdx.y * seq; /* the head's row 0 */
    const int kv_end = CAUSAL ? min(seq, r0 + BM) : seq;
    /* the block's steps of keys; with SPLIT 2, part 0 walks the first half (the larger), part 1
     * the rest */
    const int steps = (kv_end + BN - 1) / BN, half = SPLIT == 1 ? steps : (steps + 1) / 2;
    auto part_steps = [&](int part, int &st0, int &st1) {
        st0 = part == 0 ? 0 : half;
        st1 = part == 0 ? half : steps;
    };
    ring_barriers_setup<SPLIT * STAGES>(full, empty, 1, QT);
    if (threadIdx.x == 0) {
        barrier_init(q_full, 1);
        barrier_init_fence();
    }
    __syncthreads();
    ktune_launch::wait_previous(); /* launched overlapped: the quantization's results */

    if (warpgroup == 0) {
        if constexpr (CONSUMERS > 1)
            registers_lower<40>();
        const int part = tid / 32; /* lane 0 of warp p fills ring p */
        if (lane == 0 && part < SPLIT) {
            if (part == 0) {
                barrier_expect(q_full, QT * Q_BYTES);
                for (int t = 0; t < QT; t++)
                    tma_load(smem + t * Q_BYTES, &map_q, 0, first + r0 + t * 64, q_full);
            }
            unsigned char *const ring = rings + part * RING_BYTES;
            uint64_t *const p_full = full + part * STAGES, *const p_empty = empty + part * STAGES;
            int st0, st1, s = 0, phase = 0;
            part_steps(part, st0, st1);
            for (int st = st0; st < st1; st++) {
                ktune_common::barrier_wait_idle(&p_empty[s], phase ^ 1); /* the stage is free */
                barrier_expect(&p_full[s], STAGE_BYTES);
                unsigned char *const k_s = ring + s * STAGE_BYTES, *const v_s = k_s + K_BYTES;
                tma_load(k_s, &map_k, 0, first + st * BN, &p_full[s]);
#pragma unroll
                for (int p = 0; p < PANELS; p++)
                    tma_load(v_s + p * BN * 128, &map_v, p * 64, first + st * BN, &p_full[s]);
                ring_next<STAGES>(s, phase);
            }
        }
        return; /* the consumers wait for every copy this thread issued */
    }

    if constexpr (CONSUMERS > 1)
        registers_raise<232>();
    const int consumer = warpgroup - 1, warp = tid / 32;
    const int qt = SPLIT == 1 ? consumer : 0, part = SPLIT == 1 ? 0 : consumer;
    const int rc0 = r0 + qt * 64; /* this warpgroup's first query */
    const bool busy = rc0 < seq;
    /* the keys this warpgroup multiplies (consumers that take turns: the block's, each its part)
     * and those every one of its queries sees */
    const int my_end = TURNS ? kv_end : !busy ? 0 : CAUSAL ? min(seq, rc0 + 64) : seq;
    const int unmasked = CAUSAL ? min(seq, rc0 + 1) : seq;
    const int ra = rc0 + warp * 16 + lane / 4; /* this thread's rows: ra and ra + 8 */
    const float *const ks = a.k_scale + blockIdx.y * a.scale_stride;
    float qs[2], m[2], l[2] = {0.f, 0.f}, o[D / 8][4] = {};
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int r = ra + 8 * i;
        qs[i] = r < seq ? __ldg(a.q_scale + blockIdx.y * a.scale_stride + (r >> a.q_shift))
                        : 1.f; /* rows past seq_len: not stored */
        m[i] = -INFINITY;
    }
    unsigned char *const ring = rings + part * RING_BYTES;
    const uint64_t q_desc = wgmma_desc(smem_addr(smem + qt * Q_BYTES));
    int32_t sc[BN / 8][4]; /* S, as the multiplies leave it */
    int32_t(&sc_flat)[BN / 2] = *reinterpret_cast<int32_t(*)[BN / 2]>(&sc[0][0]);
    /* the step's keys' scales, a block of 64 keys each (k_gran is a multiple of 64); keys past
     * seq_len take 1 (they are masked); loaded as the multiplies are issued, to arrive meanwhile */
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
            ktune_qmatmul_impl::wgmma_m64k32<int8_t, BN>(sc_flat, wgmma_desc_plus(q_desc, kk * 32),
                                                         wgmma_desc_plus(k_desc, kk * 32), kk > 0);
        wgmma_commit();
        wgmma_fence_registers(sc_flat);
    };
    /* S as floats: the int32 sum x read as the float 1.5 * 2^23 + x (|x| < 2^22: exact, one
     * integer add, where cvt runs at a quarter of the rate), -inf past seq_len and, causal, past
     * the row's own position (only on the steps that hold such keys); into log2 units by the
     * row's and the 64 keys' scales (scale x log2 e folded into the queries'), less the offset */
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
    const ring_view rv = {ring, STAGE_BYTES, K_BYTES, full + part * STAGES, empty + part * STAGES};
    int st0, st1;
    part_steps(part, st0, st1);
    barrier_wait(q_full, 0);
    /* value rows past seq_len zeroed (the next head's, or TMA's zeros); those of this head past a
     * causal block's last query are masked, as in the mma kernel */
    consume<T, D, BN, BN / 64, PANELS, CONSUMERS, STAGES, SPLIT == 2, TURNS>(
        rv, st0, st1, seq, my_end, half, m, l, o, issue_s, scores);
#pragma unroll
    for (int i = 0; i < 2; i++)
        l[i] = ktune_attention_mma::quad_sum(l[i]); /* the rows' sums over their quads */
    if constexpr (SPLIT == 2) {
        /* part 1 hands its rows' running max, sum and output to part 0 (through its ring, whose
         * copies and multiplies are done), which joins them to its own */
        float *const hand = reinterpret_cast<float *>(rings + RING_BYTES) + tid;
        if (part == 1) {
#pragma unroll
            for (int i = 0; i < 2; i++) {
                hand[i * 128] = m[i];
                hand[(2 + i) * 128] = l[i];
            }
#pragma unroll
            for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    hand[(4 + dn * 4 + e) * 128] = o[dn][e];
        }
        consumers_sync<CONSUMERS>();
        if (part == 1)
            return;
        float w[2], w1[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const float m1 = hand[i * 128], top = fmaxf(m[i], m1);
            const float ref = top == -INFINITY ? 0.f : top;
            w[i] = exp2f(m[i] - ref);
            w1[i] = exp2f(m1 - ref);
            l[i] = l[i] * w[i] + hand[(2 + i) * 128] * w1[i];
        }
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                o[dn][e] = o[dn][e] * w[e / 2] + hand[(4 + dn * 4 + e) * 128] * w1[e / 2];
    }
    if (!busy)
        return;

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
#else
    (void)map_q, (void)map_k, (void)map_v, (void)a;
#endif
}

/* The family's mma default (spaces/qkattn.yaml), for what TMA cannot address. */
using wgmma_fallback = launcher<128, 8, 64, 2, 32, 64>;

template <int BM, int BN, int STAGES, int QG, int KG, int SPLIT> struct wgmma_launcher {
    static constexpr int QT = BM / 64, CONSUMERS = QT * SPLIT;
    static_assert((BM == 64 || BM == 128) && (SPLIT == 1 || SPLIT == 2) && CONSUMERS <= 2,
                  "one or two consumers: of 64 queries each, or two halves of 64 queries' keys");
    static_assert(QG >= KTUNE_QKATTN_MIN_QUANT_BLOCK && KG >= 64 && (QG & (QG - 1)) == 0 &&
                      (KG & (KG - 1)) == 0,
                  "blocks of at least the workspace's finest, powers of two (found by a shift); "
                  "a key scale for 64 keys or more (one load for each 64 keys of a step)");
    /* Configurations past the registers (O, S and P a thread) or the shared memory a block can
     * have (the space's constraints keep them out) are not compiled for that head_dim. */
    template <int D>
    static constexpr bool fits = D / 2 + 3 * BN / 4 <= 176 &&
                                 wgmma_smem_bytes<D, QT, SPLIT, BN, STAGES>() <= 232448;

    template <typename T, int D>
    static cudaError_t run(const ktune_qkattn_problem &p, cudaStream_t s)
    {
        if constexpr (!fits<D>)
            return cudaErrorNotSupported;
        else
            return run_fitting<T, D>(p, s);
    }

    template <typename T, int D>
    static cudaError_t run_fitting(const ktune_qkattn_problem &p, cudaStream_t s)
    {
        using namespace ktune_matmul_impl;
        if (!KTUNE_SM90A) /* the kernel has no code in this build */
            return cudaErrorNotSupported;
        const workspace w = workspace_of(p);
        const int64_t rows = p.batch * p.heads * p.seq_len;
        CUtensorMap map_q, map_k, map_v;
        if (rows + BM > INT32_MAX ||
            !ktune_qmatmul_impl::byte_tensor_map(&map_q, w.q, rows, D, 64) ||
            !ktune_qmatmul_impl::byte_tensor_map(&map_k, w.k, rows, D, BN) ||
            !tensor_map<T>(&map_v, p.v, rows, D, BN))
            return wgmma_fallback::run<T, D>(p, s);
        cudaError_t e = quantize_all<T, D>(p, w, QG, KG, s);
        if (e != cudaSuccess)
            return e;
        const attend_args a = attend_args_of(p, w, QG, KG);
        constexpr size_t smem = wgmma_smem_bytes<D, QT, SPLIT, BN, STAGES>();
        const dim3 grid((unsigned)((p.seq_len + BM - 1) / BM), (unsigned)(p.batch * p.heads));
        const dim3 block((CONSUMERS + 1) * 128);
        auto kernel = p.causal ? attend_wgmma<T, D, QT, SPLIT, BN, STAGES, true>
                               : attend_wgmma<T, D, QT, SPLIT, BN, STAGES, false>;
        return ktune_launch::launch_overlapped(kernel, grid, block, dim3(1, 1, 1), smem, s, map_q,
                                               map_k, map_v, a);
    }
};

} // namespace ktune_qkattn_impl
