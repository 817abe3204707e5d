/* What the attention kernels on wgmma share (rpa, qkattn; sm_90a): a consumer warpgroup's step
 * after its scores S (64 x BN, the accumulator fragments of wgmma, laid out as mma.sync's m16n8
 * accumulators: thread t of warp w holds rows 16 w + t / 4 and + 8, columns 8 nb + 2 (t % 4) and
 * the next in x[nb][0..1] and x[nb][2..3]): the online softmax on them, P rounded to 16 bits in
 * registers, and O += P V issued on wgmma with V N-major in shared memory (the value rows as
 * stored: 128-byte swizzled panels of 64 channels, BN rows each). */
#pragma once

#include "../matmul/matmul_wgmma_ops.cuh"
#include "attention_mma.cuh"

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
    ktune_matmul_impl::tma_store_fence();
}

/* The step after the scores x (log2 units, masked keys -inf; this thread's two rows' running max
 * m and sum l move on): the weights, O (o, D / 8 blocks of 8 channels) rescaled, P packed into
 * pa, and O += P V issued on the stage's values at shared address v_addr and committed (not
 * waited for: pa must stay untouched, hold_fragments, until a wgmma_wait retires it). */
template <typename T, int D, int BN>
__device__ __forceinline__ void softmax_pv(float (&x)[BN / 8][4], float (&m)[2], float (&l)[2],
                                           float (&o)[D / 8][4], uint32_t (&pa)[BN / 16][4],
                                           uint32_t v_addr)
{
    using namespace ktune_matmul_impl;
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int nb = 0; nb < BN / 8; nb++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            mx[e / 2] = fmaxf(mx[e / 2], x[nb][e]);
    const ktune_attention_mma::exp2_fast exp2;
    float corr[2], base[2];
    ktune_attention_mma::softmax_step(mx, m, l, base, corr, exp2);
#pragma unroll
    for (int nb = 0; nb < BN / 8; nb++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            x[nb][e] = exp2(x[nb][e] - base[e / 2]);
            l[e / 2] += x[nb][e];
        }
    ktune_attention_mma::rescale(o, corr);
    ktune_attention_mma::pack_p<T>(x, pa);

    float(&o_flat)[D / 2] = *reinterpret_cast<float(*)[D / 2]>(&o[0][0]);
    wgmma_fence_registers(o_flat);
    wgmma_fence();
#pragma unroll
    for (int kb = 0; kb < BN / 16; kb++) /* 16 value rows: two 8-row atoms of 1024 bytes */
        wgmma_m64k16_ra<T, D, 1>(o_flat, pa[kb], wgmma_desc_n_major(v_addr + kb * 2048, BN * 128));
    wgmma_commit();
    wgmma_fence_registers(o_flat);
}
#endif

} // namespace ktune_attention_wgmma
