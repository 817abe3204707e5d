/* INT8-QK attention on mma.sync: the quantization of Q and K, then the attention.
 *
 * Quantization (three launches, include/ktune/qkattn.h's steps 1 to 3): channel_stats sums K's
 * tokens channel by channel and takes each channel's least and largest key and largest |q|, in
 * STAT_PARTS slices of a (batch, head) (a block a slice: a slice's figures are a block's, so the
 * result does not depend on the order blocks run in); channel_balance joins the slices into K's
 * channel means and the channels' balancing factors a (the square root of K's range about its
 * mean over Q's largest |q|: SmoothQuant's migration at strength 1/2, q_c a_c and k_c / a_c
 * keep q . k while a channel of large keys shares its range with the queries' channel);
 * quantize turns a block of q_gran queries or k_gran keys into int8 with one scale (max |x| /
 * 127, x = q a or (k - mean) / a), folding the softmax's scale * log2 e into the queries'
 * scales, so that a score is int32 * q_scale * k_scale in log2 units.
 *
 * Attention: a block takes BM = 16 * MT * WARPS queries of a (batch, head) (blockIdx.y) and walks
 * the keys BN a step: the int8 keys and the 16-bit values of a step come by cp.async into a
 * STAGES-deep ring of swizzled shared memory, S = Q K^T on m16n8k32 (int8 into exact int32, a
 * warp of one row tile holding its Q fragments in registers for the whole walk), scaled by the
 * row's and the key's scales; an online softmax in fp32 (exp2 on the special function unit); P
 * rounded to the values' type and O += P V on m16n8k16 with fp32 accumulators
 * (attention_mma.cuh). Each warp owns MT row tiles of 16 and every key of a step.
 * Causal blocks stop at their last query's key and run last tile first (the longest walks start
 * first, the short ones fill the tail). Keys past seq_len load zeros and are masked. */
#pragma once

#include <math.h>

#include "../common/attention_mma.cuh"
#include "../qmatmul/qmatmul_common.cuh"
#include "ktune/qkattn.h"
#include "launch.cuh"
#include "qkattn_stream.cuh"

namespace ktune_qkattn_impl {

using ktune_common::cp_async16;
using ktune_common::cp_async_commit;
using ktune_common::cp_async_wait;
using ktune_attention_mma::tile_at;
using ktune_matmul_impl::ldmatrix_x4;
using ktune_matmul_impl::pack2;
using ktune_qmatmul_impl::mma_16832;

/* Slices of a (batch, head)'s tokens whose channel statistics channel_stats writes. */
constexpr int STAT_PARTS = 32;

/* The scales a (batch, head) has room for in the workspace: enough for blocks of
 * KTUNE_QKATTN_MIN_QUANT_BLOCK tokens. */
__host__ __device__ inline int64_t scale_stride(int64_t seq)
{
    return seq / KTUNE_QKATTN_MIN_QUANT_BLOCK + 1;
}

/* The workspace's parts (include/ktune/qkattn.h), set by the host. */
struct workspace {
    int8_t *q, *k;  /* batch x heads x seq x D, int8 */
    float *q_scale; /* batch x heads x scale_stride: a block of q_gran queries' scale x softmax
                       scale x log2 e */
    float *k_scale; /* the same for blocks of k_gran keys */
    float *stats;   /* batch x heads x STAT_PARTS x 4 x D: a slice's channel sums, least and
                       largest keys, largest |q| */
    float *channel; /* batch x heads x 2 x D: K's channel means, the balancing factors */
    int *counters;  /* batch x heads x counter_stride: the stream variant's tile counters, zeroed
                       by quantize */
    float *shares;  /* stream_shares x share_floats: the stream variant's shares of cut tiles */
};

/* 8 consecutive elements of a 16-byte-aligned row, as floats. */
template <typename T> __device__ __forceinline__ void load8(const T *p, float (&x)[8])
{
    const uint4 raw = *reinterpret_cast<const uint4 *>(p);
    const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
    for (int i = 0; i < 8; i++)
        x[i] = ktune_common::to_float(e[i]);
}

/* A channel's figures f (K's sum, least and largest key, Q's largest |q|) joined with another
 * set's, g[0], g[stride], g[2 stride] and g[3 stride]. */
__device__ __forceinline__ void figures_join(float (&f)[4], const float *g, int64_t stride)
{
    f[0] += g[0];
    f[1] = fminf(f[1], g[stride]);
    f[2] = fmaxf(f[2], g[2 * stride]);
    f[3] = fmaxf(f[3], g[3 * stride]);
}

/* The channel statistics of slice blockIdx.x of (batch, head) blockIdx.y's tokens; 256 threads,
 * a thread 8 channels of every (256 / (D / 8))-th token of the slice. */
template <typename T, int D>
__global__ void __launch_bounds__(256)
    channel_stats(const T *q, const T *k, float *stats, int seq)
{
    constexpr int CPR = D / 8, ROWS = 256 / CPR;
    __shared__ float part[4][ROWS][D];
    ktune_launch::wait_previous(); /* launched overlapped (quantize_all) */
    ktune_launch::release_next();
    const int bh = blockIdx.y, ch = threadIdx.x % CPR, r = threadIdx.x / CPR;
    const int t0 = (int)((int64_t)seq * blockIdx.x / STAT_PARTS);
    const int t1 = (int)((int64_t)seq * (blockIdx.x + 1) / STAT_PARTS);
    const int64_t head = (int64_t)bh * seq * D + ch * 8;
    float sum[8] = {}, lo[8], hi[8], qmax[8] = {};
#pragma unroll
    for (int i = 0; i < 8; i++) {
        lo[i] = INFINITY;
        hi[i] = -INFINITY;
    }
    for (int t = t0 + r; t < t1; t += 4 * ROWS) { /* four tokens a thread, loads in flight */
        float x[4][8], y[4][8];
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (t + u * ROWS < t1) {
                load8(k + head + (int64_t)(t + u * ROWS) * D, x[u]);
                load8(q + head + (int64_t)(t + u * ROWS) * D, y[u]);
            }
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (t + u * ROWS < t1)
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    sum[i] += x[u][i];
                    lo[i] = fminf(lo[i], x[u][i]);
                    hi[i] = fmaxf(hi[i], x[u][i]);
                    qmax[i] = fmaxf(qmax[i], fabsf(y[u][i]));
                }
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        part[0][r][ch * 8 + i] = sum[i];
        part[1][r][ch * 8 + i] = lo[i];
        part[2][r][ch * 8 + i] = hi[i];
        part[3][r][ch * 8 + i] = qmax[i];
    }
    __syncthreads();
    float *const out = stats + ((int64_t)bh * STAT_PARTS + blockIdx.x) * 4 * D;
    for (int c = threadIdx.x; c < D; c += 256) {
        float f[4] = {0.f, INFINITY, -INFINITY, 0.f};
        for (int i = 0; i < ROWS; i++)
            figures_join(f, &part[0][i][c], ROWS * D);
        for (int j = 0; j < 4; j++)
            out[j * D + c] = f[j];
    }
}

/* K's channel means and the balancing factors of channels 32 blockIdx.x .. 32 blockIdx.x + 31
 * of (batch, head) blockIdx.y from the slices' statistics; BALANCE_WARPS warps, a lane a channel:
 * warp w joins an equal share of the slices, in order, then warp 0 joins the warps' figures (a
 * thread's loads few and all in flight at once). A factor is 1 where either range is 0, and
 * within [2^-10, 2^10]. */
constexpr int BALANCE_WARPS = 8;

template <int D>
__global__ void __launch_bounds__(BALANCE_WARPS * 32)
    channel_balance(const float *stats, float *channel, int seq)
{
    constexpr int SHARE = STAT_PARTS / BALANCE_WARPS;
    static_assert(STAT_PARTS % BALANCE_WARPS == 0 && D % 32 == 0, "whole shares, whole warps");
    __shared__ float part[BALANCE_WARPS][4][32];
    ktune_launch::wait_previous();
    ktune_launch::release_next();
    const int bh = blockIdx.y, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int c = blockIdx.x * 32 + lane;
    float f[4] = {0.f, INFINITY, -INFINITY, 0.f};
#pragma unroll
    for (int p = warp * SHARE; p < (warp + 1) * SHARE; p++)
        figures_join(f, stats + ((int64_t)bh * STAT_PARTS + p) * 4 * D + c, D);
#pragma unroll
    for (int j = 0; j < 4; j++)
        part[warp][j][lane] = f[j];
    __syncthreads();
    if (warp != 0)
        return;
#pragma unroll
    for (int w = 1; w < BALANCE_WARPS; w++)
        figures_join(f, &part[w][0][lane], 32);
    const float mean = f[0] / (float)seq, range = fmaxf(f[2] - mean, mean - f[1]);
    const float balance = range > 0.f && f[3] > 0.f ? sqrtf(range / f[3]) : 1.f;
    channel[(int64_t)bh * 2 * D + c] = mean;
    channel[(int64_t)bh * 2 * D + D + c] = fminf(fmaxf(balance, 0x1p-10f), 0x1p10f);
}

struct quantize_args {
    const void *q, *k;
    workspace w;
    int seq, q_gran, k_gran;
    float q_mul; /* the softmax's scale x log2 e */
};

/* The most tokens a quantization block may have (quantize holds a block's values in registers). */
constexpr int MAX_QUANT_BLOCK = 128;

/* Block blockIdx.x of q_gran queries (blockIdx.z 0) or k_gran keys (1) of (batch, head)
 * blockIdx.y into int8 with one scale; QUANT_THREADS threads, each holding its elements (8 a
 * chunk of 16 bytes, HELD chunks at most) between the block's max and the values' writes. The
 * first block of each (batch, head)'s queries also zeroes its tile counters (the stream
 * variant's). */
constexpr int QUANT_THREADS = 256;

template <typename T, int D>
__global__ void __launch_bounds__(QUANT_THREADS) quantize(const quantize_args a)
{
    constexpr int CPR = D / 8, THREADS = QUANT_THREADS, HELD = MAX_QUANT_BLOCK * CPR / THREADS;
    __shared__ float mean[D], mul[D], warp_max[THREADS / 32];
    ktune_launch::wait_previous();
    ktune_launch::release_next();
    const bool keys = blockIdx.z == 1;
    const int gran = keys ? a.k_gran : a.q_gran, bh = blockIdx.y;
    if (blockIdx.x == 0 && !keys) { /* the (batch, head)'s tile counters, for a stream launch */
        const int64_t stride = counter_stride(a.seq);
        for (int64_t i = threadIdx.x; i < stride; i += THREADS)
            a.w.counters[bh * stride + i] = 0;
    }
    const int t0 = blockIdx.x * gran;
    if (t0 >= a.seq)
        return;
    const int rows = min(gran, a.seq - t0), n = rows * CPR;
    const int64_t first = ((int64_t)bh * a.seq + t0) * D;
    const T *src = static_cast<const T *>(keys ? a.k : a.q) + first;
    int8_t *dst = (keys ? a.w.k : a.w.q) + first;
    const float *const channel = a.w.channel + (int64_t)bh * 2 * D;
    float x[HELD][8];
#pragma unroll /* the block's values, their loads in flight together */
    for (int j = 0; j < HELD; j++)
        if (threadIdx.x + j * THREADS < n)
            load8(src + (int64_t)(threadIdx.x + j * THREADS) * 8, x[j]);
    for (int c = threadIdx.x; c < D; c += THREADS) { /* x = (v - mean) * mul */
        mean[c] = keys ? channel[c] : 0.f;
        mul[c] = keys ? 1.f / channel[D + c] : channel[D + c];
    }
    __syncthreads();
    float top = 0.f;
#pragma unroll
    for (int j = 0; j < HELD; j++) {
        const int i = threadIdx.x + j * THREADS;
        if (i < n)
#pragma unroll
            for (int e = 0; e < 8; e++) {
                x[j][e] = (x[j][e] - mean[(i % CPR) * 8 + e]) * mul[(i % CPR) * 8 + e];
                top = fmaxf(top, fabsf(x[j][e]));
            }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        top = fmaxf(top, __shfl_xor_sync(~0u, top, o));
    if (threadIdx.x % 32 == 0)
        warp_max[threadIdx.x / 32] = top;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < THREADS / 32; w++)
        top = fmaxf(top, warp_max[w]);
    const float inv = top > 0.f ? 127.f / top : 0.f;
#pragma unroll
    for (int j = 0; j < HELD; j++) {
        const int i = threadIdx.x + j * THREADS;
        if (i >= n)
            break;
        uint32_t packed[2] = {0, 0};
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const int v = max(-127, min(127, __float2int_rn(x[j][e] * inv)));
            packed[e / 4] |= (uint32_t)(v & 0xff) << (8 * (e % 4));
        }
        *reinterpret_cast<uint2 *>(dst + (int64_t)i * 8) = make_uint2(packed[0], packed[1]);
    }
    if (threadIdx.x == 0) {
        const float s = top > 0.f ? top / 127.f : 1.f; /* > 0: the attention multiplies by it */
        float *scales = keys ? a.w.k_scale : a.w.q_scale;
        scales[(int64_t)bh * scale_stride(a.seq) + blockIdx.x] = keys ? s : s * a.q_mul;
    }
}

/* The byte offset of 16-byte chunk `chunk` of row `row` in a tile of int8 rows of D bytes, XOR-
 * swizzled so that ldmatrix's 8 rows at one chunk hit 8 different 16-byte bank groups (rows of 8
 * chunks: by row; rows of 4, two to 128 bytes: by row pair). */
template <int D> __device__ __forceinline__ int tile8_at(int row, int chunk)
{
    static_assert(D == 64 || D == 128, "int8 rows of 4 or 8 chunks");
    return row * D + (chunk ^ (D == 128 ? row & 7 : (row >> 1) & 3)) * 16;
}

struct attend_args {
    const int8_t *q, *k;
    const float *q_scale, *k_scale;
    const void *v;
    void *out;
    int seq;
    int q_shift, k_shift; /* log2 of q_gran and k_gran: a block's scale is row >> shift's */
    int64_t scale_stride;
    int *counters; /* the stream variant's (workspace) */
    float *shares;
};

/* A block's shared memory: the int8 queries, then the ring of int8 keys and 16-bit values. */
template <int D, int BM, int BN, int STAGES> __host__ __device__ constexpr size_t smem_bytes()
{
    return (size_t)BM * D + (size_t)STAGES * BN * D * 3;
}

template <typename T, int D, int BM, int WARPS, int BN, int STAGES, bool CAUSAL>
__global__ void __launch_bounds__(WARPS * 32) attend(const attend_args a)
{
    constexpr int MT = BM / (16 * WARPS), THREADS = WARPS * 32, C8 = D / 16, C16 = D / 8;
    static_assert(MT >= 1 && BM % (16 * WARPS) == 0 && BN % 16 == 0 && STAGES >= 2,
                  "row tiles of 16 a warp, whole k16 steps of keys, a ring of two or more");
    extern __shared__ __align__(128) unsigned char smem_raw[];
    int8_t *const sq = reinterpret_cast<int8_t *>(smem_raw);
    int8_t *const sk = sq + BM * D;
    T *const sv = reinterpret_cast<T *>(sk + STAGES * BN * D);
    ktune_launch::wait_previous(); /* launched overlapped (qkattn_common.cuh) */

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tile = CAUSAL ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int r0 = tile * BM, seq = a.seq;
    const int64_t head = (int64_t)blockIdx.y * seq;
    const int kv_end = CAUSAL ? min(seq, r0 + BM) : seq;
    const int steps = (kv_end + BN - 1) / BN;
    const T *const v = static_cast<const T *>(a.v) + head * D;
    const int8_t *const kq = a.k + head * D;

    for (int i = threadIdx.x; i < BM * C8; i += THREADS) {
        const int row = i / C8, ch = i % C8, r = r0 + row;
        cp_async16(sq + tile8_at<D>(row, ch), a.q + (head + min(r, seq - 1)) * D + ch * 16,
                   r < seq ? 16 : 0);
    }
    /* a step's keys and values (tokens past seq_len: zeros) */
    auto load = [&](int st, int buf) {
        int8_t *const k_s = sk + buf * BN * D;
        T *const v_s = sv + buf * BN * D;
        for (int i = threadIdx.x; i < BN * C8; i += THREADS) {
            const int row = i / C8, ch = i % C8, tok = st * BN + row;
            cp_async16(k_s + tile8_at<D>(row, ch), kq + (int64_t)min(tok, seq - 1) * D + ch * 16,
                       tok < seq ? 16 : 0);
        }
        for (int i = threadIdx.x; i < BN * C16; i += THREADS) {
            const int row = i / C16, ch = i % C16, tok = st * BN + row;
            cp_async16(v_s + tile_at<D>(row, ch), v + (int64_t)min(tok, seq - 1) * D + ch * 8,
                       tok < seq ? 16 : 0);
        }
    };
#pragma unroll
    for (int i = 0; i < STAGES - 1; i++) {
        if (i < steps)
            load(i, i);
        cp_async_commit();
    }

    /* the warp's MT row tiles of 16 (this lane's rows ra + 16 t and ra + 16 t + 8), their Q
     * fragments (held in registers for the walk with one row tile; read from shared memory each
     * step with two, whose accumulators take the registers) and scales */
    constexpr bool HOLD_Q = MT == 1;
    const int wr = warp * 16 * MT, ra = r0 + wr + lane / 4;
    auto q_fragment = [&](uint32_t(&f)[4], int t, int kk) {
        ldmatrix_x4(f, sq + tile8_at<D>(wr + 16 * t + lane % 16, kk * 2 + lane / 16));
    };
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    uint32_t qa[HOLD_Q ? MT : 1][D / 32][4];
    float qs[MT][2], o[MT][D / 8][4] = {}, m[MT][2], l[MT][2] = {};
#pragma unroll
    for (int t = 0; t < MT; t++) {
#pragma unroll
        for (int kk = 0; kk < D / 32 && HOLD_Q; kk++)
            q_fragment(qa[t][kk], t, kk);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int r = ra + 16 * t + 8 * i;
            qs[t][i] = r < seq ? __ldg(a.q_scale + blockIdx.y * a.scale_stride + (r >> a.q_shift))
                               : 1.f; /* rows past seq_len: zeros, not stored */
            m[t][i] = -INFINITY;
        }
    }
    const float *const ks = a.k_scale + blockIdx.y * a.scale_stride;
    /* keys every row of the warp sees without a mask */
    const int unmasked = CAUSAL ? min(seq, r0 + wr + 1) : seq;

    for (int st = 0; st < steps; st++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (st + STAGES - 1 < steps)
            load(st + STAGES - 1, (st + STAGES - 1) % STAGES);
        cp_async_commit();
        const int buf = st % STAGES, key0 = st * BN;
        const int8_t *const k_s = sk + buf * BN * D;
        const T *const v_s = sv + buf * BN * D;

        /* a lane's two keys of each n8 block share a scale (k_gran is even); keys past seq_len
         * take 1 (they are masked); loaded first, to arrive while the tensor cores run */
        float kscale[BN / 8];
#pragma unroll
        for (int nb = 0; nb < BN / 8; nb++) {
            const int j = key0 + nb * 8 + (lane % 4) * 2;
            kscale[nb] = j < seq ? __ldg(ks + (j >> a.k_shift)) : 1.f;
        }
        int32_t s[MT][BN / 8][4] = {};
#pragma unroll
        for (int kk = 0; kk < D / 32; kk++) {
            uint32_t qf[MT][4];
#pragma unroll
            for (int t = 0; t < MT; t++) {
                if constexpr (HOLD_Q) {
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        qf[t][i] = qa[t][kk][i];
                } else {
                    q_fragment(qf[t], t, kk);
                }
            }
#pragma unroll
            for (int nb = 0; nb < BN / 8; nb += 2) {
                uint32_t kb[4];
                ldmatrix_x4(kb, k_s + tile8_at<D>(nb * 8 + (lane / 16) * 8 + lane % 8,
                                                  kk * 2 + (lane / 8) % 2));
                const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
#pragma unroll
                for (int t = 0; t < MT; t++) {
                    mma_16832(s[t][nb], qf[t], b0);
                    mma_16832(s[t][nb + 1], qf[t], b1);
                }
            }
        }
        const bool mask = key0 + BN > unmasked;
        uint32_t pa[MT][BN / 16][4];
#pragma unroll
        for (int t = 0; t < MT; t++) {
            /* a score in log2 units is x c: x the int32 sum as a float (|x| < 2^22: exact by the
             * magic-number conversion, an integer and a float add, where cvt runs at a quarter
             * of their rate), c = the row's and the n8 block's scales (both > 0, their product
             * taken where it is used rather than held); the max is taken over each block's
             * largest x times c, the weights are exp2(x c - max): one fma and one exp2 a score */
            float x[BN / 8][4], mx[2] = {m[t][0], m[t][1]};
#pragma unroll
            for (int nb = 0; nb < BN / 8; nb++) {
                float top[2] = {-INFINITY, -INFINITY};
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int j = key0 + nb * 8 + (lane % 4) * 2 + (e & 1);
                    float y = __int_as_float(s[t][nb][e] + 0x4B400000) - 12582912.f;
                    if (mask && (j >= seq || (CAUSAL && j > ra + 16 * t + 8 * (e / 2))))
                        y = -INFINITY;
                    x[nb][e] = y;
                    top[e / 2] = fmaxf(top[e / 2], y);
                }
                mx[0] = fmaxf(mx[0], top[0] * (qs[t][0] * kscale[nb]));
                mx[1] = fmaxf(mx[1], top[1] * (qs[t][1] * kscale[nb]));
            }
            const ktune_attention_mma::exp2_fast exp2;
            float corr[2], base[2];
            ktune_attention_mma::softmax_step(mx, m[t], l[t], base, corr, exp2);
#pragma unroll
            for (int nb = 0; nb < BN / 8; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    x[nb][e] = exp2(fmaf(x[nb][e], qs[t][e / 2] * kscale[nb], -base[e / 2]));
                    l[t][e / 2] += x[nb][e];
                }
            ktune_attention_mma::rescale(o[t], corr);
            ktune_attention_mma::pack_p<T>(x, pa[t]);
        }
        ktune_attention_mma::accumulate_pv<T, D, BN, MT>(o, pa, v_s, 0, lane);
    }
    cp_async_wait<0>();

    /* the rows' sums over their quads, then the output */
    T *const out = static_cast<T *>(a.out) + head * D + (lane % 4) * 2;
#pragma unroll
    for (int t = 0; t < MT; t++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const float sum = ktune_attention_mma::quad_sum(l[t][i]);
            const int r = ra + 16 * t + 8 * i;
            if (r >= seq)
                continue;
            const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
            for (int dn = 0; dn < D / 8; dn++)
                *reinterpret_cast<uint32_t *>(out + (int64_t)r * D + dn * 8) =
                    pack2<T>(o[t][dn][2 * i] * inv, o[t][dn][2 * i + 1] * inv);
        }
}

} // namespace ktune_qkattn_impl
