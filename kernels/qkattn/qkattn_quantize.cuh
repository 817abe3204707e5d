/* The quantization of Q and K (include/ktune/qkattn.h's steps 1 to 3), in one of two forms.
 *
 * Three launches, for any sequence: channel_stats sums K's tokens channel by channel and takes
 * each channel's least and largest key and largest |q|, in STAT_PARTS slices of a (batch, head)
 * (a block a slice: a slice's figures are a block's, so the result does not depend on the order
 * blocks run in); channel_balance joins the slices into K's channel means and the channels'
 * balancing factors a (the square root of K's range about its mean over Q's largest |q|:
 * SmoothQuant's migration at strength 1/2, q_c a_c and k_c / a_c keep q . k while a channel of
 * large keys shares its range with the queries' channel); quantize turns a block of q_gran
 * queries or k_gran keys into int8 with one scale (max |x| / 127, x = q a or (k - mean) / a),
 * folding the softmax's scale * log2 e into the queries' scales, so that a score is
 * int32 * q_scale * k_scale in log2 units.
 *
 * One launch, quantize_clustered, for sequences short enough that the chain of three dependent
 * launches and their memory round trips is most of the quantization's time: a cluster of blocks
 * a (batch, head), each block a span of its tokens made of whole quantization blocks. A block
 * gathers its span's statistics; the cluster meets and every block joins all the blocks'
 * figures from their shared memory, in rank order (so each computes the same means and factors);
 * then each quantizes its span, reading it a second time (from L2). The same figures as the
 * three launches but for the order of the channel sums' additions. */
#pragma once

#include <math.h>
#include <stdint.h>

#include "../common/convert.cuh"
#include "cluster.cuh"
#include "ktune/qkattn.h"
#include "launch.cuh"
#include "qkattn_stream.cuh"

namespace ktune_qkattn_impl {

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
                       by the quantization */
    float *shares;  /* stream_shares x share_floats: the stream variant's shares of cut tiles */
};

/* 8 elements of type T, as they lie in 16 bytes, as floats. */
template <typename T> __device__ __forceinline__ void unpack8(const uint4 &raw, float (&x)[8])
{
    const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
    for (int i = 0; i < 8; i++)
        x[i] = ktune_common::to_float(e[i]);
}

/* 8 consecutive elements of a 16-byte-aligned row, as floats. */
template <typename T> __device__ __forceinline__ void load8(const T *p, float (&x)[8])
{
    unpack8<T>(*reinterpret_cast<const uint4 *>(p), x);
}

/* Threads of every quantization kernel. */
constexpr int QUANT_THREADS = 256;

/* A thread's running statistics of 8 channels: K's sums, least and largest keys, Q's largest
 * |q|. */
struct channel_figures {
    float sum[8], lo[8], hi[8], qmax[8];

    __device__ __forceinline__ void clear()
    {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            sum[i] = qmax[i] = 0.f;
            lo[i] = INFINITY;
            hi[i] = -INFINITY;
        }
    }

    /* a token's keys x and queries y of the 8 channels */
    __device__ __forceinline__ void take(const float (&x)[8], const float (&y)[8])
    {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            sum[i] += x[i];
            lo[i] = fminf(lo[i], x[i]);
            hi[i] = fmaxf(hi[i], x[i]);
            qmax[i] = fmaxf(qmax[i], fabsf(y[i]));
        }
    }
};

/* The statistics of tokens t0 + r, t0 + r + ROWS, ... below t1 of q and k, 8 channels of each
 * from q + at and k + at (at: the (batch, head)'s first element and the thread's channels). */
template <typename T, int D, int ROWS>
__device__ __forceinline__ void stats_gather(const T *q, const T *k, int64_t at, int t0, int t1,
                                             int r, channel_figures &f)
{
    f.clear();
    for (int t = t0 + r; t < t1; t += 4 * ROWS) { /* four tokens a thread, loads in flight */
        float x[4][8], y[4][8];
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (t + u * ROWS < t1) {
                load8(k + at + (int64_t)(t + u * ROWS) * D, x[u]);
                load8(q + at + (int64_t)(t + u * ROWS) * D, y[u]);
            }
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (t + u * ROWS < t1)
                f.take(x[u], y[u]);
    }
}

/* The block's statistics (each thread's, channels ch * 8 .. ch * 8 + 7 of row r) joined channel
 * by channel in part; then put(c, figures) for every channel c, by the threads below D. */
template <int D, int ROWS, typename Put>
__device__ __forceinline__ void stats_join(float (&part)[4][ROWS][D], const channel_figures &f,
                                           int r, int ch, Put put)
{
#pragma unroll
    for (int i = 0; i < 8; i++) {
        part[0][r][ch * 8 + i] = f.sum[i];
        part[1][r][ch * 8 + i] = f.lo[i];
        part[2][r][ch * 8 + i] = f.hi[i];
        part[3][r][ch * 8 + i] = f.qmax[i];
    }
    __syncthreads();
    for (int c = threadIdx.x; c < D; c += QUANT_THREADS) {
        float g[4] = {0.f, INFINITY, -INFINITY, 0.f};
        for (int i = 0; i < ROWS; i++) {
            g[0] += part[0][i][c];
            g[1] = fminf(g[1], part[1][i][c]);
            g[2] = fmaxf(g[2], part[2][i][c]);
            g[3] = fmaxf(g[3], part[3][i][c]);
        }
        put(c, g);
    }
}

/* Figures g (a channel's sum, least and largest key, largest |q|) joined with another set. */
__device__ __forceinline__ void figures_add(float (&g)[4], float sum, float lo, float hi,
                                            float qmax)
{
    g[0] += sum;
    g[1] = fminf(g[1], lo);
    g[2] = fmaxf(g[2], hi);
    g[3] = fmaxf(g[3], qmax);
}

/* K's mean in a channel over seq tokens (x) and the channel's balancing factor (y) from its
 * joined figures: 1 where either range is 0, and within [2^-10, 2^10]. */
__device__ __forceinline__ float2 balance_of(const float (&g)[4], int seq)
{
    const float mean = g[0] / (float)seq, range = fmaxf(g[2] - mean, mean - g[1]);
    const float balance = range > 0.f && g[3] > 0.f ? sqrtf(range / g[3]) : 1.f;
    return make_float2(mean, fminf(fmaxf(balance, 0x1p-10f), 0x1p10f));
}

/* The channel statistics of slice blockIdx.x of (batch, head) blockIdx.y's tokens; a thread
 * 8 channels of every (QUANT_THREADS / (D / 8))-th token of the slice. */
template <typename T, int D>
__global__ void __launch_bounds__(QUANT_THREADS)
    channel_stats(const T *q, const T *k, float *stats, int seq)
{
    constexpr int CPR = D / 8, ROWS = QUANT_THREADS / CPR;
    __shared__ float part[4][ROWS][D];
    ktune_launch::wait_previous(); /* launched overlapped (quantize_all) */
    ktune_launch::release_next();
    const int bh = blockIdx.y, ch = threadIdx.x % CPR, r = threadIdx.x / CPR;
    const int t0 = (int)((int64_t)seq * blockIdx.x / STAT_PARTS);
    const int t1 = (int)((int64_t)seq * (blockIdx.x + 1) / STAT_PARTS);
    channel_figures f;
    stats_gather<T, D, ROWS>(q, k, (int64_t)bh * seq * D + ch * 8, t0, t1, r, f);
    float *const out = stats + ((int64_t)bh * STAT_PARTS + blockIdx.x) * 4 * D;
    stats_join<D, ROWS>(part, f, r, ch, [&](int c, const float (&g)[4]) {
        for (int j = 0; j < 4; j++)
            out[j * D + c] = g[j];
    });
}

/* K's channel means and the balancing factors of (batch, head) blockIdx.x from the slices'
 * statistics; D threads. */
template <int D> __global__ void channel_balance(const float *stats, float *channel, int seq)
{
    ktune_launch::wait_previous();
    ktune_launch::release_next();
    const int bh = blockIdx.x, c = threadIdx.x;
    float g[4] = {0.f, INFINITY, -INFINITY, 0.f};
#pragma unroll /* every slice's loads in flight at once */
    for (int p = 0; p < STAT_PARTS; p++) {
        const float *in = stats + ((int64_t)bh * STAT_PARTS + p) * 4 * D + c;
        figures_add(g, in[0], in[D], in[2 * D], in[3 * D]);
    }
    const float2 mb = balance_of(g, seq);
    channel[(int64_t)bh * 2 * D + c] = mb.x;
    channel[(int64_t)bh * 2 * D + D + c] = mb.y;
}

struct quantize_args {
    const void *q, *k;
    workspace w;
    int seq, q_gran, k_gran;
    float q_mul; /* the softmax's scale x log2 e */
};

/* The most tokens a quantization block may have (quantize holds a block's values in registers). */
constexpr int MAX_QUANT_BLOCK = 128;

/* Zeroes (batch, head) bh's tile counters (the stream variant's), the block's threads in turn. */
__device__ __forceinline__ void counters_zero(const quantize_args &a, int bh)
{
    const int64_t stride = counter_stride(a.seq);
    for (int64_t i = threadIdx.x; i < stride; i += QUANT_THREADS)
        a.w.counters[bh * stride + i] = 0;
}

/* A quantization block's scale as the workspace holds it (> 0: the attention multiplies by it),
 * from its largest |x|. */
__device__ __forceinline__ float scale_of(float top, bool keys, float q_mul)
{
    const float s = top > 0.f ? top / 127.f : 1.f;
    return keys ? s : s * q_mul;
}

/* 8 values into int8 at dst, each x * inv rounded to nearest within [-127, 127]. */
__device__ __forceinline__ void store8_int8(int8_t *dst, const float (&x)[8], float inv)
{
    uint32_t packed[2] = {0, 0};
#pragma unroll
    for (int e = 0; e < 8; e++) {
        const int v = max(-127, min(127, __float2int_rn(x[e] * inv)));
        packed[e / 4] |= (uint32_t)(v & 0xff) << (8 * (e % 4));
    }
    *reinterpret_cast<uint2 *>(dst) = make_uint2(packed[0], packed[1]);
}

/* Block blockIdx.x of q_gran queries (blockIdx.z 0) or k_gran keys (1) of (batch, head)
 * blockIdx.y into int8 with one scale; each thread holds its elements (8 a chunk of 16 bytes,
 * HELD chunks at most) between the block's max and the values' writes. The first block of each
 * (batch, head)'s queries also zeroes its tile counters. */
template <typename T, int D>
__global__ void __launch_bounds__(QUANT_THREADS) quantize(const quantize_args a)
{
    constexpr int CPR = D / 8, THREADS = QUANT_THREADS, HELD = MAX_QUANT_BLOCK * CPR / THREADS;
    __shared__ float mean[D], mul[D], warp_max[THREADS / 32];
    ktune_launch::wait_previous();
    ktune_launch::release_next();
    const bool keys = blockIdx.z == 1;
    const int gran = keys ? a.k_gran : a.q_gran, bh = blockIdx.y;
    if (blockIdx.x == 0 && !keys)
        counters_zero(a, bh);
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
        store8_int8(dst + (int64_t)i * 8, x[j], inv);
    }
    if (threadIdx.x == 0) {
        float *scales = keys ? a.w.k_scale : a.w.q_scale;
        scales[(int64_t)bh * scale_stride(a.seq) + blockIdx.x] = scale_of(top, keys, a.q_mul);
    }
}

/* The chunks of 8 values of each of Q and K that a thread of quantize_clustered holds, and so the
 * most tokens a block of it takes: SPAN_HELD * QUANT_THREADS / (D / 8). */
constexpr int SPAN_HELD = 8;
template <int D> __host__ __device__ constexpr int span_most()
{
    return SPAN_HELD * QUANT_THREADS / (D / 8);
}

/* The one-launch form: block blockIdx.x (its rank in a cluster of gridDim.x blocks) of (batch,
 * head) blockIdx.y takes tokens blockIdx.x * span .. + span - 1 (span: whole blocks of q_gran and
 * of k_gran tokens, at most span_most<D>()). Each thread loads its chunks of the span's K and Q
 * once, all in flight together, and holds them as they came (16-bit) to the end: the statistics,
 * then the values' largest |x| a quantization block, then the int8 values (x computed twice
 * rather than held as floats). The chunks one warp holds at once (32 / (D / 8) tokens) lie in one
 * quantization block (of at least KTUNE_QKATTN_MIN_QUANT_BLOCK tokens), so a warp's largest |x|
 * goes to its block's in one shared-memory max. Block 0 writes the channels' figures to the
 * workspace and zeroes the tile counters. */
template <typename T, int D>
__global__ void __launch_bounds__(QUANT_THREADS) quantize_clustered(const quantize_args a, int span)
{
    constexpr int CPR = D / 8, THREADS = QUANT_THREADS, ROWS = THREADS / CPR;
    constexpr int BLOCKS = span_most<D>() / KTUNE_QKATTN_MIN_QUANT_BLOCK;
    static_assert(32 % CPR == 0 && 32 / CPR <= KTUNE_QKATTN_MIN_QUANT_BLOCK,
                  "a warp's chunks within one quantization block");
    __shared__ float part[4][ROWS][D];
    __shared__ float total[4][D]; /* this block's figures, which the cluster reads */
    __shared__ float mean[D], zero[D], mul[2][D];
    __shared__ unsigned block_top[2][BLOCKS]; /* keys', queries' largest |x|, as bits (>= 0) */
    ktune_launch::wait_previous();
    ktune_launch::release_next();
    const int bh = blockIdx.y, rank = blockIdx.x, seq = a.seq, lane = threadIdx.x % 32;
    const int ch = threadIdx.x % CPR, r = threadIdx.x / CPR;
    const int t0 = rank * span, n = (min(seq, t0 + span) - t0) * CPR;
    const int64_t first = ((int64_t)bh * seq + t0) * D;
    const T *const src[2] = {static_cast<const T *>(a.k) + first,
                             static_cast<const T *>(a.q) + first};
    uint4 held[2][SPAN_HELD] = {};
#pragma unroll /* the span's values, their loads in flight together */
    for (int j = 0; j < SPAN_HELD; j++)
        if (threadIdx.x + j * THREADS < n)
#pragma unroll
            for (int t = 0; t < 2; t++)
                held[t][j] = *reinterpret_cast<const uint4 *>(
                    src[t] + (int64_t)(threadIdx.x + j * THREADS) * 8);
    if (threadIdx.x < 2 * BLOCKS)
        block_top[threadIdx.x / BLOCKS][threadIdx.x % BLOCKS] = 0;
    if (rank == 0)
        counters_zero(a, bh);

    channel_figures f;
    f.clear();
#pragma unroll
    for (int j = 0; j < SPAN_HELD; j++)
        if (threadIdx.x + j * THREADS < n) {
            float x[8], y[8];
            unpack8<T>(held[0][j], x);
            unpack8<T>(held[1][j], y);
            f.take(x, y);
        }
    stats_join<D, ROWS>(part, f, r, ch, [&](int c, const float (&g)[4]) {
        for (int j = 0; j < 4; j++)
            total[j][c] = g[j];
    });
    ktune_cluster::sync();
    for (int c = threadIdx.x; c < D; c += THREADS) {
        float g[4] = {0.f, INFINITY, -INFINITY, 0.f};
        for (unsigned b = 0; b < gridDim.x; b++) {
            const float *o = ktune_cluster::map(&total[0][0], b);
            figures_add(g, o[c], o[D + c], o[2 * D + c], o[3 * D + c]);
        }
        const float2 mb = balance_of(g, seq);
        mean[c] = mb.x;
        zero[c] = 0.f; /* the queries' */
        mul[0][c] = 1.f / mb.y; /* keys: (k - mean) / a */
        mul[1][c] = mb.y;       /* queries: q a */
        if (rank == 0) {
            a.w.channel[(int64_t)bh * 2 * D + c] = mb.x;
            a.w.channel[(int64_t)bh * 2 * D + D + c] = mb.y;
        }
    }
    __syncthreads();

    /* x of chunk j of tensor t (0 keys, 1 queries) */
    auto values = [&](int t, int j, float (&x)[8]) {
        const float *const m = t == 0 ? mean : zero, *const s = mul[t];
        unpack8<T>(held[t][j], x);
#pragma unroll
        for (int e = 0; e < 8; e++)
            x[e] = (x[e] - m[ch * 8 + e]) * s[ch * 8 + e];
    };
    const int gran[2] = {a.k_gran, a.q_gran};
#pragma unroll
    for (int t = 0; t < 2; t++)
#pragma unroll
        for (int j = 0; j < SPAN_HELD; j++) {
            const int i = threadIdx.x + j * THREADS;
            float x[8], top = 0.f;
            values(t, j, x);
            if (i < n)
#pragma unroll
                for (int e = 0; e < 8; e++)
                    top = fmaxf(top, fabsf(x[e]));
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                top = fmaxf(top, __shfl_xor_sync(~0u, top, o));
            if (lane == 0 && i < n)
                atomicMax(&block_top[t][i / CPR / gran[t]], __float_as_uint(top));
        }
    __syncthreads();
#pragma unroll
    for (int t = 0; t < 2; t++) {
        int8_t *const dst = (t == 0 ? a.w.k : a.w.q) + first;
#pragma unroll
        for (int j = 0; j < SPAN_HELD; j++) {
            const int i = threadIdx.x + j * THREADS;
            if (i < n) {
                float x[8];
                values(t, j, x);
                const float top = __uint_as_float(block_top[t][i / CPR / gran[t]]);
                store8_int8(dst + (int64_t)i * 8, x, top > 0.f ? 127.f / top : 0.f);
            }
        }
        if (threadIdx.x * gran[t] < n / CPR) {
            float *const scales = (t == 0 ? a.w.k_scale : a.w.q_scale) + bh * scale_stride(seq);
            scales[t0 / gran[t] + threadIdx.x] =
                scale_of(__uint_as_float(block_top[t][threadIdx.x]), t == 0, a.q_mul);
        }
    }
    ktune_cluster::sync(); /* no block leaves while another may read its figures */
}

} // namespace ktune_qkattn_impl
