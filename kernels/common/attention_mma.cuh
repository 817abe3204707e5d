/* What the attention kernels on mma.sync share (rpa, qkattn): the swizzled 16-bit tiles of keys
 * and values in shared memory, the online softmax's step on a warp's S fragments, and O += P V
 * from a value tile. Fragments as PTX's m16n8k16: a lane holds rows lane / 4 and lane / 4 + 8 of
 * a row tile (index 0 and 1 of the [2] arrays below) and columns 2 (lane % 4), + 1 of each n8
 * block. */
#pragma once

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "../matmul/matmul_common.cuh"

namespace ktune_attention_mma {

/* Four 8x8 matrices of 16-bit elements from shared memory, transposed: a lane receives a column
 * pair of each (the B fragments of a row-major K x N tile). */
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(ktune_common::smem_addr(p))
                 : "memory");
}

/* The element offset of 16-byte chunk `chunk` of row `row` in a tile of rows of D 16-bit
 * elements: the chunks XOR-swizzled by the row, so that ldmatrix's 8 rows at one column hit 8
 * bank groups. */
template <int D> __device__ __forceinline__ int tile_at(int row, int chunk)
{
    static_assert(D % 64 == 0, "rows of at least 8 chunks");
    return row * D + ((chunk ^ (row & 7)) * 8);
}

/* 2^x as exp2f computes it, and by the special function unit alone (ex2.approx.ftz: relative
 * error 2^-22, subnormal results flushed to 0, which a softmax weight below 2^-126 of its row's
 * largest may be; exp2f adds a range reduction around it, a third more instructions a score). */
struct exp2_exact {
    __device__ __forceinline__ float operator()(float x) const { return exp2f(x); }
};
struct exp2_fast {
    __device__ __forceinline__ float operator()(float x) const
    {
        float y;
        asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
        return y;
    }
};

/* A row's value summed over the quad of lanes that hold its columns (a running sum's total). */
__device__ __forceinline__ float quad_sum(float x)
{
    x += __shfl_xor_sync(~0u, x, 1);
    return x + __shfl_xor_sync(~0u, x, 2);
}

/* The online softmax's step for a lane's two rows of a row tile: mx, the step's largest score of
 * each row on this lane (log2 units; -inf for none), taken over the row's quad; base, what the
 * step's scores are to be exponentiated against (the new running max, 0 while a row has seen no
 * score); corr, the factor that brings the row's running sum and output to it. m (the running
 * max) and l (the running sum) move to the step's. */
template <typename Exp2>
__device__ __forceinline__ void softmax_step(float (&mx)[2], float (&m)[2], float (&l)[2],
                                             float (&base)[2], float (&corr)[2], Exp2 exp2)
{
#pragma unroll
    for (int i = 0; i < 2; i++) {
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(~0u, mx[i], 1));
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(~0u, mx[i], 2));
        base[i] = mx[i] == -INFINITY ? 0.f : mx[i];
        corr[i] = exp2(m[i] - base[i]);
        m[i] = mx[i];
        l[i] *= corr[i];
    }
}

/* A row tile's output accumulators times its rows' factors. */
template <int DN>
__device__ __forceinline__ void rescale(float (&o)[DN][4], const float (&corr)[2])
{
#pragma unroll
    for (int dn = 0; dn < DN; dn++) {
        o[dn][0] *= corr[0];
        o[dn][1] *= corr[0];
        o[dn][2] *= corr[1];
        o[dn][3] *= corr[1];
    }
}

/* A row tile's weights (NB n8 blocks of S fragments) rounded to T as the A fragments of P V's
 * k16 steps. */
template <typename T, int NB>
__device__ __forceinline__ void pack_p(const float (&x)[NB][4], uint32_t (&pa)[NB / 2][4])
{
    using ktune_matmul_impl::pack2;
#pragma unroll
    for (int kb = 0; kb < NB / 2; kb++) {
        pa[kb][0] = pack2<T>(x[2 * kb][0], x[2 * kb][1]);
        pa[kb][1] = pack2<T>(x[2 * kb][2], x[2 * kb][3]);
        pa[kb][2] = pack2<T>(x[2 * kb + 1][0], x[2 * kb + 1][1]);
        pa[kb][3] = pack2<T>(x[2 * kb + 1][2], x[2 * kb + 1][3]);
    }
}

/* O += P V for the warp's MT row tiles over KW keys: the values from rows row0 .. row0 + KW - 1
 * of the swizzled tile v_s (tile_at<D>), each fragment read once for all row tiles. */
template <typename T, int D, int KW, int MT>
__device__ __forceinline__ void accumulate_pv(float (&o)[MT][D / 8][4],
                                              const uint32_t (&pa)[MT][KW / 16][4], const T *v_s,
                                              int row0, int lane)
{
    using ktune_matmul_impl::mma_16816;
#pragma unroll
    for (int kb = 0; kb < KW / 16; kb++) {
        const int vr = row0 + kb * 16 + ((lane / 8) % 2) * 8 + lane % 8;
#pragma unroll
        for (int dn = 0; dn < D / 8; dn += 2) {
            uint32_t vb[4];
            ldmatrix_x4_trans(vb, v_s + tile_at<D>(vr, dn + lane / 16));
            const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
#pragma unroll
            for (int t = 0; t < MT; t++) {
                mma_16816<T>(o[t][dn], pa[t][kb], b0);
                mma_16816<T>(o[t][dn + 1], pa[t][kb], b1);
            }
        }
    }
}

} // namespace ktune_attention_mma
