/* What the qkattn configurations share on the host: the problem's rules, the workspace's layout,
 * and the launches of a config (the channels' statistics, the quantization, the attention). */
#pragma once

#include "launch.cuh"
#include "qkattn_kernel.cuh"

namespace ktune_qkattn_impl {

/* Whether the problem keeps the rules of include/ktune/qkattn.h (the workspace aside). */
inline bool shape_ok(const ktune_qkattn_problem &p)
{
    return p.batch >= 1 && p.heads >= 1 && p.batch <= 65535 && p.heads <= 65535 &&
           p.batch * p.heads <= 65535 && p.seq_len >= 1 && p.seq_len < (1 << 30) &&
           (p.head_dim == 64 || p.head_dim == 128) && (p.causal == 0 || p.causal == 1) &&
           isfinite(p.scale) && p.scale > 0.f && (p.dtype == KTUNE_BF16 || p.dtype == KTUNE_F16);
}

inline size_t round256(size_t bytes) { return (bytes + 255) / 256 * 256; }

/* include/ktune/qkattn.h's ktune_qkattn_workspace_bytes; 0 for sizes out of range. */
inline size_t workspace_bytes(int64_t batch, int64_t heads, int64_t seq, int64_t head_dim)
{
    if (batch < 1 || heads < 1 || seq < 1 || head_dim < 1 || batch > INT32_MAX ||
        heads > INT32_MAX || seq > INT64_MAX / 4 || head_dim > 4096)
        return 0;
    const double bh = (double)batch * (double)heads;
    const double total = 2.0 * bh * (double)seq * (double)head_dim +
                         8.0 * bh * (double)scale_stride(seq) +
                         (16.0 * STAT_PARTS + 8) * bh * (double)head_dim +
                         4.0 * bh * (double)counter_stride(seq) +
                         2048.0 * STREAM_BLOCKS * (double)(head_dim + 8) + 8 * 256.0;
    if (total > (double)SIZE_MAX / 2)
        return 0;
    const size_t n = (size_t)(batch * heads), elems = n * (size_t)seq * (size_t)head_dim;
    return round256(elems) * 2 + round256(n * (size_t)scale_stride(seq) * 4) * 2 +
           round256(n * (size_t)head_dim * STAT_PARTS * 16) + round256(n * (size_t)head_dim * 8) +
           round256(n * (size_t)counter_stride(seq) * 4) +
           round256((size_t)stream_shares((int64_t)n, seq) * (size_t)(head_dim / 2 + 4) * 512);
}

/* The workspace's parts at base (workspace_bytes' layout, in its order). */
inline workspace workspace_of(const ktune_qkattn_problem &p)
{
    const size_t n = (size_t)(p.batch * p.heads), elems = n * (size_t)p.seq_len * p.head_dim;
    const size_t scales = round256(n * (size_t)scale_stride(p.seq_len) * 4);
    char *at = static_cast<char *>(p.workspace);
    workspace w;
    w.q = reinterpret_cast<int8_t *>(at);
    w.k = reinterpret_cast<int8_t *>(at += round256(elems));
    w.q_scale = reinterpret_cast<float *>(at += round256(elems));
    w.k_scale = reinterpret_cast<float *>(at += scales);
    w.stats = reinterpret_cast<float *>(at += scales);
    w.channel =
        reinterpret_cast<float *>(at += round256(n * (size_t)p.head_dim * STAT_PARTS * 16));
    w.counters = reinterpret_cast<int *>(at += round256(n * (size_t)p.head_dim * 8));
    w.shares = reinterpret_cast<float *>(at += round256(n * (size_t)counter_stride(p.seq_len) * 4));
    return w;
}

/* Whether the problem keeps every rule, its workspace included. */
inline bool problem_ok(const ktune_qkattn_problem &p)
{
    if (!shape_ok(p))
        return false;
    const size_t need = workspace_bytes(p.batch, p.heads, p.seq_len, p.head_dim);
    return need > 0 && p.workspace_bytes >= need && p.workspace &&
           (uintptr_t)p.workspace % 256 == 0 && p.q && p.k && p.v && p.out &&
           (uintptr_t)p.q % 16 == 0 && (uintptr_t)p.k % 16 == 0 && (uintptr_t)p.v % 16 == 0 &&
           (uintptr_t)p.out % 16 == 0;
}

/* The channels' statistics, then the int8 Q and K of a problem in blocks of q_gran and k_gran
 * tokens (at most MAX_QUANT_BLOCK). Each launch of a call (these three and the attention's)
 * overlaps the stream's previous kernel (ktune_launch::launch_overlapped): every kernel waits for
 * it before touching memory, and the quantization's kernels let the next one in at once (its
 * blocks come in once every block of theirs has started: during their last wave). */
template <typename T, int D>
cudaError_t quantize_all(const ktune_qkattn_problem &p, const workspace &w, int q_gran,
                         int k_gran, cudaStream_t s)
{
    if (q_gran > MAX_QUANT_BLOCK || k_gran > MAX_QUANT_BLOCK)
        return cudaErrorInvalidValue;
    const unsigned bh = (unsigned)(p.batch * p.heads), seq = (unsigned)p.seq_len;
    const T *q = static_cast<const T *>(p.q), *k = static_cast<const T *>(p.k);
    cudaError_t e =
        ktune_launch::launch_overlapped(channel_stats<T, D>, dim3(STAT_PARTS, bh), dim3(256),
                                        dim3(1, 1, 1), 0, s, q, k, w.stats, (int)seq);
    if (e == cudaSuccess)
        e = ktune_launch::launch_overlapped(channel_balance<D>, dim3(D / 32, bh),
                                            dim3(BALANCE_WARPS * 32), dim3(1, 1, 1), 0, s,
                                            (const float *)w.stats, w.channel, (int)seq);
    if (e != cudaSuccess)
        return e;
    quantize_args a;
    a.q = p.q;
    a.k = p.k;
    a.w = w;
    a.seq = (int)seq;
    a.q_gran = q_gran;
    a.k_gran = k_gran;
    a.q_mul = p.scale * 1.4426950408889634f;
    const int gran = q_gran < k_gran ? q_gran : k_gran;
    const unsigned blocks = (unsigned)((seq + gran - 1) / gran);
    return ktune_launch::launch_overlapped(quantize<T, D>, dim3(blocks, bh, 2),
                                           dim3(QUANT_THREADS), dim3(1, 1, 1), 0, s, a);
}

/* The attention's arguments: the quantized Q and K in w and their scales in blocks of q_gran and
 * k_gran tokens (powers of two), v, out. */
inline attend_args attend_args_of(const ktune_qkattn_problem &p, const workspace &w, int q_gran,
                                  int k_gran)
{
    attend_args a;
    a.q = w.q;
    a.k = w.k;
    a.q_scale = w.q_scale;
    a.k_scale = w.k_scale;
    a.v = p.v;
    a.out = p.out;
    a.seq = (int)p.seq_len;
    a.q_shift = __builtin_ctz(q_gran);
    a.k_shift = __builtin_ctz(k_gran);
    a.scale_stride = scale_stride(p.seq_len);
    a.counters = w.counters;
    a.shares = w.shares;
    return a;
}

template <int BM, int WARPS, int BN, int STAGES, int QG, int KG> struct launcher {
    static_assert(QG >= KTUNE_QKATTN_MIN_QUANT_BLOCK && KG >= KTUNE_QKATTN_MIN_QUANT_BLOCK &&
                      (QG & (QG - 1)) == 0 && (KG & (KG - 1)) == 0,
                  "blocks of at least the workspace's finest, powers of two (found by a shift)");
    /* Configurations past the registers or the shared memory a block can have (the space's
     * constraints keep them out) are not compiled for that head_dim. */
    static constexpr int MT = BM / (16 * WARPS);
    template <int D>
    static constexpr bool fits = MT * (D / 2 + BN / 2) + (2 - MT) * (D / 8) <= 192 &&
                                 smem_bytes<D, BM, BN, STAGES>() <= 232448;

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
        const workspace w = workspace_of(p);
        cudaError_t e = quantize_all<T, D>(p, w, QG, KG, s);
        if (e != cudaSuccess)
            return e;
        const attend_args a = attend_args_of(p, w, QG, KG);
        constexpr size_t smem = smem_bytes<D, BM, BN, STAGES>();
        const dim3 grid((unsigned)((p.seq_len + BM - 1) / BM), (unsigned)(p.batch * p.heads));
        return p.causal
                   ? ktune_launch::launch_overlapped(attend<T, D, BM, WARPS, BN, STAGES, true>,
                                                     grid, dim3(WARPS * 32), dim3(1, 1, 1), smem,
                                                     s, a)
                   : ktune_launch::launch_overlapped(attend<T, D, BM, WARPS, BN, STAGES, false>,
                                                     grid, dim3(WARPS * 32), dim3(1, 1, 1), smem,
                                                     s, a);
    }
};

/* Runs Launcher::run<T, D> for the problem's dtype and head_dim. */
template <typename Launcher> cudaError_t dispatch(const ktune_qkattn_problem *p, cudaStream_t s)
{
    if (!p || !problem_ok(*p))
        return cudaErrorInvalidValue;
    const bool bf16 = p->dtype == KTUNE_BF16;
    if (p->head_dim == 64)
        return bf16 ? Launcher::template run<__nv_bfloat16, 64>(*p, s)
                    : Launcher::template run<__half, 64>(*p, s);
    return bf16 ? Launcher::template run<__nv_bfloat16, 128>(*p, s)
                : Launcher::template run<__half, 128>(*p, s);
}

} // namespace ktune_qkattn_impl
