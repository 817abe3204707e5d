/* Row softmax kernels. Each reads its row once (online, split: twice) and writes it once, in fp32
 * arithmetic, for any cols >= 1. Rows need not start at a vector boundary: where x and y lie the
 * same distance past one, every kernel reads a row in aligned vectors and its few elements before
 * the first boundary and after the last whole vector one at a time (the staged kernels and split
 * in the kernel; those that hold rows in registers and online in a shifted instantiation their
 * launcher takes for such rows, see shifted_row); where x and y are at different alignments,
 * element by element. Every kernel keeps the contract of an overlapped launch (overlap_begin);
 * launch_grid says which grids are launched so. */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include <algorithm>
#include <atomic>
#include <type_traits>

#include "async_copy.cuh"
#include "cluster.cuh"
#include "convert.cuh"
#include "ktune/ktune.h"
#include "launch.cuh"
#include "reduce.cuh"

namespace ktune_softmax_impl {

using ktune_common::barrier_expect;
using ktune_common::barrier_init;
using ktune_common::barrier_init_fence;
using ktune_common::barrier_wait;
using ktune_common::block_merge;
using ktune_common::block_reduce;
using ktune_common::bulk_copy_to_shared;
using ktune_common::cp_async16;
using ktune_common::cp_async_commit;
using ktune_common::cp_async_wait;
using ktune_common::cp_async_wait_all;
using ktune_common::fence_proxy_async;
using ktune_common::from_float;
using ktune_common::online_merge;
using ktune_common::to_float;
using ktune_common::warp_reduce;

/* The first statement of every kernel of the family, where it was launched overlapped
 * (`overlapped`, launch_grid's choice): wait for the stream's previous kernel (its memory
 * complete and visible) before any access to global memory, then let the stream's next kernel in
 * at once. That one's blocks take places as this grid's free them: every block of this grid has
 * started by the time the last of them lets it in, so none waits behind it; and it waits for this
 * grid's memory as this one did. A kernel launched the plain way skips both: in grids of many
 * short blocks they cost time even there (README, softmax). */
__device__ __forceinline__ void overlap_begin(bool overlapped)
{
    if (!overlapped)
        return;
    ktune_launch::wait_previous();
    ktune_launch::release_next();
}

/* The element-wise max of two registers of two 16-bit elements (NaN loses, as in fmaxf). */
template <typename T> __device__ __forceinline__ uint32_t max2(uint32_t a, uint32_t b)
{
    using T2 = std::conditional_t<std::is_same<T, __half>::value, __half2, __nv_bfloat162>;
    T2 x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    const T2 r = __hmax2(x, y);
    uint32_t out;
    memcpy(&out, &r, 4);
    return out;
}

/* Two 16-bit elements held in one register, low half first. Volatile, so that the compiler
 * converts again each time rather than keeping the floats of a whole row alive (which would undo
 * the point of holding 16-bit elements). */
template <typename T> __device__ __forceinline__ float2 unpack2(uint32_t w);
template <> __device__ __forceinline__ float2 unpack2<__half>(uint32_t w)
{
    float2 f;
    asm volatile("{\n.reg .f16 lo, hi;\nmov.b32 {lo, hi}, %2;\ncvt.f32.f16 %0, lo;\n"
                 "cvt.f32.f16 %1, hi;\n}\n"
                 : "=f"(f.x), "=f"(f.y)
                 : "r"(w));
    return f;
}
template <> __device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t w)
{
    float2 f;
    asm volatile("shl.b32 %0, %2, 16;\nand.b32 %1, %2, 0xffff0000;\n" : "=f"(f.x), "=f"(f.y) : "r"(w));
    return f;
}

template <typename T, int VEC> struct alignas(sizeof(T) * VEC) pack {
    T v[VEC];
};

/* Packs move to and from memory in accesses of their size (at most 16 bytes each), built from
 * 32-bit words. Copied as a struct (or through memcpy), a pack may be split into narrower
 * accesses: in clustered kernels some 16-byte stores of 16-bit elements became eight 2-byte
 * stores, and the kernels ran at a third of the bandwidth. */
template <typename T> __device__ __forceinline__ uint32_t bits_of(T v)
{
    if constexpr (sizeof(T) == 4) {
        return __float_as_uint(v);
    } else {
        uint16_t b;
        memcpy(&b, &v, sizeof b);
        return b;
    }
}

template <typename T> __device__ __forceinline__ T from_bits(uint32_t w)
{
    if constexpr (sizeof(T) == 4) {
        return __uint_as_float(w);
    } else {
        const uint16_t b = (uint16_t)w;
        T v;
        memcpy(&v, &b, sizeof v);
        return v;
    }
}

template <typename T, int VEC> __device__ __forceinline__ pack<T, VEC> pack_load(const T *src)
{
    constexpr int W = (int)sizeof(pack<T, VEC>) / 4, PER = 4 / (int)sizeof(T);
    pack<T, VEC> p;
    if constexpr (W == 0) {
        p.v[0] = *src;
    } else {
        uint32_t w[W];
        if constexpr (W == 1) {
            w[0] = *reinterpret_cast<const uint32_t *>(src);
        } else if constexpr (W == 2) {
            const uint2 v = *reinterpret_cast<const uint2 *>(src);
            w[0] = v.x, w[1] = v.y;
        } else {
#pragma unroll
            for (int i = 0; i < W; i += 4) {
                const uint4 v = reinterpret_cast<const uint4 *>(src)[i / 4];
                w[i] = v.x, w[i + 1] = v.y, w[i + 2] = v.z, w[i + 3] = v.w;
            }
        }
#pragma unroll
        for (int j = 0; j < VEC; j++)
            p.v[j] = from_bits<T>(w[j / PER] >> (j % PER * 16));
    }
    return p;
}

/* The pack as 32-bit words (16-bit elements two a word, the first in the low half). */
template <typename T, int VEC, int W>
__device__ __forceinline__ void pack_words(const pack<T, VEC> &p, uint32_t (&w)[W])
{
    constexpr int PER = 4 / (int)sizeof(T);
    static_assert(W * PER == VEC, "a pack of whole words");
#pragma unroll
    for (int i = 0; i < W; i++)
        w[i] = 0;
#pragma unroll
    for (int j = 0; j < VEC; j++)
        w[j / PER] |= bits_of(p.v[j]) << (j % PER * 16);
}

/* *p = v: in global memory through the store intrinsic (one instruction of v's width: plain
 * stores of a pack still came out as four 4-byte stores in clustered kernels), in shared memory
 * plainly. */
template <bool GLOBAL, typename V> __device__ __forceinline__ void store_word(V *p, V v)
{
    if constexpr (GLOBAL)
        __stwb(p, v);
    else
        *p = v;
}

/* The pack at dst, in global memory (GLOBAL) or shared memory. */
template <bool GLOBAL, typename T, int VEC>
__device__ __forceinline__ void pack_store(T *dst, const pack<T, VEC> &p)
{
    constexpr int W = (int)sizeof(pack<T, VEC>) / 4;
    if constexpr (W == 0) {
        *dst = p.v[0];
    } else {
        uint32_t w[W];
        pack_words(p, w);
        if constexpr (W == 1) {
            store_word<GLOBAL>(reinterpret_cast<unsigned *>(dst), w[0]);
        } else if constexpr (W == 2) {
            store_word<GLOBAL>(reinterpret_cast<uint2 *>(dst), make_uint2(w[0], w[1]));
        } else {
#pragma unroll
            for (int i = 0; i < W; i += 4)
                store_word<GLOBAL>(reinterpret_cast<uint4 *>(dst) + i / 4,
                                   make_uint4(w[i], w[i + 1], w[i + 2], w[i + 3]));
        }
    }
}

/* VEC elements from idx on, as stored; -inf past the end of the row. */
template <typename T, int VEC>
__device__ __forceinline__ pack<T, VEC> load_raw(const T *row, int64_t idx, int cols, bool aligned)
{
    pack<T, VEC> p;
    if (aligned) {
        if (idx < cols)
            return pack_load<T, VEC>(row + idx);
#pragma unroll
        for (int j = 0; j < VEC; j++)
            p.v[j] = from_float<T>(-INFINITY);
        return p;
    }
#pragma unroll
    for (int j = 0; j < VEC; j++)
        p.v[j] = idx + j < cols ? row[idx + j] : from_float<T>(-INFINITY);
    return p;
}

template <typename T, int VEC>
__device__ __forceinline__ void load(const T *row, int64_t idx, int cols, bool aligned,
                                     float (&out)[VEC])
{
    const pack<T, VEC> p = load_raw<T, VEC>(row, idx, cols, aligned);
#pragma unroll
    for (int j = 0; j < VEC; j++)
        out[j] = to_float(p.v[j]);
}

/* VEC floats times scale, converted; 16-bit types two at a time (the packed conversion keeps the
 * conversion off the pipe the exponentials use). */
template <typename T, int VEC>
__device__ __forceinline__ pack<T, VEC> convert(const float (&in)[VEC], float scale)
{
    pack<T, VEC> p;
    if constexpr (sizeof(T) == 2 && VEC % 2 == 0) {
#pragma unroll
        for (int j = 0; j < VEC; j += 2) {
            if constexpr (std::is_same<T, __half>::value) {
                const __half2 h = __floats2half2_rn(in[j] * scale, in[j + 1] * scale);
                p.v[j] = __low2half(h);
                p.v[j + 1] = __high2half(h);
            } else {
                const __nv_bfloat162 h = __floats2bfloat162_rn(in[j] * scale, in[j + 1] * scale);
                p.v[j] = __low2bfloat16(h);
                p.v[j + 1] = __high2bfloat16(h);
            }
        }
    } else {
#pragma unroll
        for (int j = 0; j < VEC; j++)
            p.v[j] = from_float<T>(in[j] * scale);
    }
    return p;
}

template <typename T, int VEC>
__device__ __forceinline__ void store(T *row, int64_t idx, int cols, bool aligned,
                                      const float (&in)[VEC], float scale)
{
    const pack<T, VEC> p = convert<T, VEC>(in, scale);
    if (aligned) {
        if (idx < cols)
            pack_store<true, T, VEC>(row + idx, p);
        return;
    }
#pragma unroll
    for (int j = 0; j < VEC; j++)
        if (idx + j < cols)
            row[idx + j] = p.v[j];
}

/* A cluster's blocks merge their (m, s) pairs, m a block's max and s the block-wide sum of its
 * exponentials exp(x - m), through distributed shared memory: each block publishes its pair in
 * its slot (a float2 of its shared memory); after a cluster barrier, each collects them all and
 * gets the scale of its exponentials, exp(m - max) / sum. Lanes below CTAS of each warp read one
 * block's pair each. No block writes its slot again, or leaves, before every block has read it
 * (a cluster barrier). */
__device__ __forceinline__ void cluster_publish(float m, float s, float2 *slot)
{
    if (threadIdx.x == 0)
        *slot = make_float2(m, s);
}

template <int CTAS> __device__ __forceinline__ float cluster_collect(float m, float2 *slot)
{
    const int lane = threadIdx.x & 31;
    float cm = -INFINITY, cs = 0.f;
    if (lane < CTAS) {
        const float2 p = *ktune_cluster::map(slot, lane);
        cm = p.x;
        cs = p.y;
    }
#pragma unroll
    for (int o = 1; o < CTAS; o <<= 1)
        online_merge(cm, cs, __shfl_xor_sync(0xffffffffu, cm, o),
                     __shfl_xor_sync(0xffffffffu, cs, o));
    cm = __shfl_sync(0xffffffffu, cm, 0);
    cs = __shfl_sync(0xffffffffu, cs, 0);
    if (m == -INFINITY) /* this block holds only -inf (its exponentials are 0) */
        return cs > 0.f ? 0.f : NAN;
    return __expf(m - cm) / cs;
}

/* The scale of a block's exponentials: 1 / s for a block alone; for a cluster, publish, a
 * cluster barrier, collect. */
template <int CTAS> __device__ __forceinline__ float cluster_scale(float m, float s, float2 *slot)
{
    if constexpr (CTAS == 1) {
        (void)m, (void)slot;
        return 1.f / s;
    } else {
        cluster_publish(m, s, slot);
        ktune_cluster::sync();
        return cluster_collect<CTAS>(m, slot);
    }
}

/* How many elements a row lies past a boundary of VEC elements: row - lead is aligned to them. */
template <typename T, int VEC> __device__ __forceinline__ int lead(const T *row)
{
    return (int)((uintptr_t)row % (sizeof(T) * VEC) / sizeof(T));
}

/* Shifted rows, for the kernels that hold rows in registers and online: a row that starts shift
 * = lead<T, VEC>(row) elements past a boundary of VEC elements is read as slots of VEC elements
 * from the boundary before it (base = row - shift, its elements [shift, end = cols + shift) of
 * base): a slot wholly inside the row is one aligned access; the slots at its two ends are left
 * out, their elements (edge_element, fewer than 2 VEC) taken one a thread. A launch takes a
 * kernel's shifted instantiation where its rows are off a vector boundary but x and y at the same
 * alignment (and the kernel's slots hold cols + VEC - 1 elements), so that the aligned
 * instantiation keeps the code it has alone: a row's mode decided in the kernel cost the aligned
 * path registers. */
template <typename T, int VEC>
__device__ __forceinline__ pack<T, VEC> slot_load(const T *base, int64_t idx, int shift, int end)
{
    if (idx >= shift && idx + VEC <= end)
        return pack_load<T, VEC>(base + idx);
    pack<T, VEC> p;
#pragma unroll
    for (int j = 0; j < VEC; j++)
        p.v[j] = from_float<T>(-INFINITY);
    return p;
}

template <typename T, int VEC>
__device__ __forceinline__ void slot_store(T *base, int64_t idx, int shift, int end,
                                           const float (&in)[VEC], float scale)
{
    if (idx >= shift && idx + VEC <= end)
        pack_store<true, T, VEC>(base + idx, convert<T, VEC>(in, scale));
}

/* The k-th element of a shifted row outside its whole slots: the head before its first vector
 * boundary, then the tail after its last whole vector; -1 past them. */
template <int VEC> __device__ __forceinline__ int64_t edge_element(int64_t k, int cols, int shift)
{
    const int head = min((VEC - shift) % VEC, cols);
    const int tail = head + (cols - head) / VEC * VEC;
    if (k < head)
        return k;
    return tail + (k - head) < cols ? tail + (k - head) : -1;
}

/* A shifted row's place for the thread of index k among its threads: base, end, and its edge
 * element and value (-1 and -inf where it has none). */
template <typename T, int VEC> struct shifted_row {
    int shift, end;
    int64_t edge;
    float xe;
    __device__ __forceinline__ shifted_row() : shift(0), end(0), edge(-1), xe(-INFINITY) {}
    __device__ __forceinline__ shifted_row(const T *row, int cols, int64_t k)
    {
        shift = lead<T, VEC>(row);
        end = cols + shift;
        edge = edge_element<VEC>(k, cols, shift);
        xe = edge >= 0 ? to_float(row[edge]) : -INFINITY;
    }
};

/* Row in registers: max, exponentials (one each), sum, scaled store. index(it) gives the
 * element index of the it-th vector of this thread (SHIFTED: its slot), index(0) / VEC the
 * thread's place among the row's, which takes that edge element; scale(m, s) turns the max and
 * the sum of this thread's reduction into the factor of its exponentials.
 *
 * RAW keeps the elements as loaded (16-bit types: half the registers of fp32, so twice the bytes
 * of a row in flight for the same registers) and computes each exponential twice, for the sum and
 * for the store, instead of keeping them. */
template <typename T, int VEC, int ITERS, bool RAW, bool SHIFTED, typename Index, typename Max,
          typename Sum, typename Scale>
__device__ __forceinline__ void row_in_registers(const T *xr, T *yr, int cols, bool aligned,
                                                 Index index, Max reduce_max, Sum reduce_sum,
                                                 Scale scale)
{
    /* SHIFTED: xr and yr become the boundary before the row (see shifted_row) */
    const shifted_row<T, VEC> sr = SHIFTED ? shifted_row<T, VEC>(xr, cols, index(0) / VEC)
                                           : shifted_row<T, VEC>{};
    T *const ye = yr;
    if constexpr (SHIFTED) {
        xr -= sr.shift;
        yr -= sr.shift;
    }
    const auto load_at = [&](int it) {
        if constexpr (SHIFTED)
            return slot_load<T, VEC>(xr, index(it), sr.shift, sr.end);
        else
            return load_raw<T, VEC>(xr, index(it), cols, aligned);
    };
    const auto store_at = [&](int it, const float(&e)[VEC], float f) {
        if constexpr (SHIFTED)
            slot_store<T, VEC>(yr, index(it), sr.shift, sr.end, e, f);
        else
            store<T, VEC>(yr, index(it), cols, aligned, e, f);
    };
    if constexpr (RAW) {
        static_assert(sizeof(T) == 2 && VEC % 2 == 0, "pairs of 16-bit elements");
        uint32_t raw[ITERS][VEC / 2]; /* two elements a register */
        float m = -INFINITY;
#pragma unroll
        for (int it = 0; it < ITERS; it++) {
            const pack<T, VEC> p = load_at(it);
            memcpy(raw[it], &p, sizeof p);
        }
        uint32_t pm = raw[0][0]; /* the max of pairs, packed: exact in 16 bits */
#pragma unroll
        for (int it = 0; it < ITERS; it++)
#pragma unroll
            for (int j = 0; j < VEC / 2; j++)
                pm = max2<T>(pm, raw[it][j]);
        const float2 pair = unpack2<T>(pm);
        m = fmaxf(pair.x, pair.y);
        if constexpr (SHIFTED)
            m = fmaxf(m, sr.xe);
        m = reduce_max(m);
        const float base = m == -INFINITY ? 0.f : m;
        float s = 0.f;
        if constexpr (SHIFTED)
            s = __expf(sr.xe - base);
#pragma unroll
        for (int it = 0; it < ITERS; it++)
#pragma unroll
            for (int j = 0; j < VEC / 2; j++) {
                const float2 x = unpack2<T>(raw[it][j]);
                s += __expf(x.x - base) + __expf(x.y - base);
            }
        const float f = scale(m, reduce_sum(s));
#pragma unroll
        for (int it = 0; it < ITERS; it++) {
            float e[VEC];
#pragma unroll
            for (int j = 0; j < VEC / 2; j++) {
                const float2 x = unpack2<T>(raw[it][j]);
                e[2 * j] = __expf(x.x - base);
                e[2 * j + 1] = __expf(x.y - base);
            }
            store_at(it, e, f);
        }
        if constexpr (SHIFTED)
            if (sr.edge >= 0)
                ye[sr.edge] = from_float<T>(__expf(sr.xe - base) * f);
        return;
    }
    float v[ITERS][VEC];
    float m = -INFINITY;
#pragma unroll
    for (int it = 0; it < ITERS; it++) {
        const pack<T, VEC> p = load_at(it);
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            v[it][j] = to_float(p.v[j]);
            m = fmaxf(m, v[it][j]);
        }
    }
    if constexpr (SHIFTED)
        m = fmaxf(m, sr.xe);
    m = reduce_max(m);
    /* -inf throughout: exponentials of 0, not exp(-inf + inf) */
    const float base = m == -INFINITY ? 0.f : m;
    float s = 0.f;
    if constexpr (SHIFTED)
        s = __expf(sr.xe - base);
#pragma unroll
    for (int it = 0; it < ITERS; it++)
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            v[it][j] = __expf(v[it][j] - base);
            s += v[it][j];
        }
    const float f = scale(m, reduce_sum(s));
#pragma unroll
    for (int it = 0; it < ITERS; it++)
        store_at(it, v[it], f);
    if constexpr (SHIFTED)
        if (sr.edge >= 0)
            ye[sr.edge] = from_float<T>(__expf(sr.xe - base) * f);
}

template <typename T, int VEC, int ITERS, int WARPS, bool SHIFTED>
__global__ void __launch_bounds__(WARPS * 32)
    vec_kernel(const T *x, T *y, int64_t rows, int cols, bool aligned, bool overlapped)
{
    overlap_begin(overlapped);
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (row >= rows)
        return;
    row_in_registers<T, VEC, ITERS, false, SHIFTED>(
        x + row * cols, y + row * cols, cols, aligned,
        [=](int it) { return ((int64_t)it * 32 + lane) * VEC; }, warp_reduce<true>,
        warp_reduce<false>, [](float, float s) { return 1.f / s; });
}

template <typename T, int THREADS, int VEC, int ITERS, bool SHIFTED>
__global__ void __launch_bounds__(THREADS)
    block_kernel(const T *x, T *y, int64_t rows, int cols, bool aligned, bool overlapped)
{
    overlap_begin(overlapped);
    __shared__ float smem[32];
    const int64_t row = blockIdx.x;
    (void)rows;
    const int tid = threadIdx.x;
    row_in_registers<T, VEC, ITERS, false, SHIFTED>(
        x + row * cols, y + row * cols, cols, aligned,
        [=](int it) { return ((int64_t)it * THREADS + tid) * VEC; },
        [&](float v) { return block_reduce<THREADS, true>(v, smem); },
        [&](float v) { return block_reduce<THREADS, false>(v, smem); },
        [](float, float s) { return 1.f / s; });
}

/* Folds a batch of values v, whose max is cm, into a running max m and sum s of exp(x - m). */
template <int U, int V>
__device__ __forceinline__ void online_fold(float &m, float &s, float cm, const float (&v)[U][V])
{
    const float nm = fmaxf(m, cm);
    if (nm == -INFINITY)
        return;
    float cs = 0.f;
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
        for (int j = 0; j < V; j++)
            cs += __expf(v[u][j] - nm);
    s = (m == -INFINITY ? 0.f : s * __expf(m - nm)) + cs;
    m = nm;
}

template <typename T, int THREADS, int VEC, int UNROLL, bool SHIFTED>
__global__ void __launch_bounds__(THREADS)
    online_kernel(const T *x, T *y, int64_t rows, int cols, bool aligned, bool overlapped)
{
    overlap_begin(overlapped);
    __shared__ float2 red[32];
    (void)rows;
    const int64_t row = blockIdx.x;
    const T *xr = x + row * cols;
    T *yr = y + row * cols;
    const int tid = threadIdx.x;
    /* SHIFTED: xr and yr become the boundary before the row (see shifted_row) */
    const shifted_row<T, VEC> sr =
        SHIFTED ? shifted_row<T, VEC>(xr, cols, tid) : shifted_row<T, VEC>{};
    T *const ye = yr;
    int end = cols;
    if constexpr (SHIFTED) {
        xr -= sr.shift;
        yr -= sr.shift;
        end = sr.end;
    }
    const auto load_at = [&](int64_t idx, float(&v)[VEC]) {
        if constexpr (SHIFTED) {
            const pack<T, VEC> p = slot_load<T, VEC>(xr, idx, sr.shift, sr.end);
#pragma unroll
            for (int j = 0; j < VEC; j++)
                v[j] = to_float(p.v[j]);
        } else {
            load<T, VEC>(xr, idx, cols, aligned, v);
        }
    };
    float m = -INFINITY, s = 0.f;
    if constexpr (SHIFTED) {
        m = sr.xe;
        s = sr.xe == -INFINITY ? 0.f : 1.f;
    }
    for (int64_t base = (int64_t)tid * VEC; base < end; base += (int64_t)THREADS * VEC * UNROLL) {
        float v[UNROLL][VEC];
        float cm = -INFINITY;
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            load_at(base + (int64_t)u * THREADS * VEC, v[u]);
#pragma unroll
            for (int j = 0; j < VEC; j++)
                cm = fmaxf(cm, v[u][j]);
        }
        online_fold(m, s, cm, v);
    }
    block_merge<THREADS>(m, s, red);
    const float inv = 1.f / s;
    for (int64_t base = (int64_t)tid * VEC; base < end; base += (int64_t)THREADS * VEC * UNROLL) {
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int64_t idx = base + (int64_t)u * THREADS * VEC;
            float v[VEC];
            load_at(idx, v);
#pragma unroll
            for (int j = 0; j < VEC; j++)
                v[j] = __expf(v[j] - m);
            if constexpr (SHIFTED)
                slot_store<T, VEC>(yr, idx, sr.shift, sr.end, v, inv);
            else
                store<T, VEC>(yr, idx, cols, aligned, v, inv);
        }
    }
    if constexpr (SHIFTED)
        if (sr.edge >= 0)
            ye[sr.edge] = from_float<T>(__expf(sr.xe - m) * inv);
}

/* Whether a cluster thread holds its elements as loaded: up to 32 a thread as fp32 (one
 * exponential each), more of 16 bits only as loaded, with registers bounded to 80 a thread so
 * that six blocks of 128 threads fit a multiprocessor. */
template <typename T, int VEC, int ITERS> __host__ __device__ constexpr bool raw_row()
{
    return sizeof(T) == 2 && VEC * ITERS > 32;
}

/* A cluster of CTAS blocks a row; block b holds vectors it * CTAS + b of the row. */
template <typename T, int CTAS, int THREADS, int VEC, int ITERS, bool SHIFTED>
__global__ void __launch_bounds__(THREADS, raw_row<T, VEC, ITERS>() ? 65536 / (THREADS * 80) : 1)
    cluster_kernel(const T *x, T *y, int64_t rows, int cols, bool aligned, bool overlapped)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    overlap_begin(overlapped);
    __shared__ float smem[32];
    __shared__ float2 part;
    (void)rows;
    const int rank = (int)ktune_cluster::rank();
    const int64_t row = blockIdx.x / CTAS;
    const int tid = threadIdx.x;
    row_in_registers<T, VEC, ITERS, raw_row<T, VEC, ITERS>(), SHIFTED>(
        x + row * cols, y + row * cols, cols, aligned,
        [=](int it) { return (((int64_t)it * CTAS + rank) * THREADS + tid) * VEC; },
        [&](float v) { return block_reduce<THREADS, true>(v, smem); },
        [&](float v) { return block_reduce<THREADS, false>(v, smem); },
        [&](float m, float s) {
            const float f = cluster_scale<CTAS>(m, s, &part);
            ktune_cluster::arrive(); /* done with the other blocks' shared memory */
            return f;
        });
    ktune_cluster::wait(); /* no block leaves while another still reads its shared memory */
#else
    (void)x, (void)y, (void)rows, (void)cols, (void)aligned;
    __trap();
#endif
}

/* A whole vector at dst = in * scale: one store where dst is aligned to it, else element by
 * element. */
template <typename T, int VEC>
__device__ __forceinline__ void store_vector(T *dst, bool aligned, const float (&in)[VEC],
                                             float scale)
{
    const pack<T, VEC> p = convert<T, VEC>(in, scale);
    if (aligned) {
        pack_store<true, T, VEC>(dst, p);
        return;
    }
#pragma unroll
    for (int j = 0; j < VEC; j++)
        dst[j] = p.v[j];
}

/* The n elements of a chunk that starts `a` elements past a 16-byte boundary (a < E = 16 /
 * sizeof(T)) in three parts: `head` elements up to the next boundary (at most n), `vectors` whole
 * 16-byte vectors from there (vector(i) is the i-th's first element), and the tail; scalar(k)
 * is the k-th of the `scalars` elements of the head and the tail. */
template <typename T> struct span {
    static constexpr int E = 16 / sizeof(T);
    int head, vectors, tail, scalars;
    __device__ __forceinline__ span(int a, int n)
    {
        head = min((E - a) % E, n);
        vectors = (n - head) / E;
        tail = head + vectors * E;
        scalars = head + n - tail;
    }
    __device__ __forceinline__ int vector(int i) const { return head + i * E; }
    __device__ __forceinline__ int scalar(int k) const { return k < head ? k : tail + k - head; }
};

/* Row staged in shared memory by asynchronous 16-byte copies (no registers held while the loads
 * are in flight), spread over a cluster of CTAS blocks when it is long: block b holds elements
 * [b * chunk, (b + 1) * chunk). Max and sum go through distributed shared memory. A chunk that
 * starts a elements past a 16-byte boundary lies at buf + a, so that its 16-byte blocks land on
 * 16-byte boundaries of shared memory; a buffer has room for a vector more than a chunk. */

/* Copies the n elements of a chunk (src) to shared memory at buf + a (a = lead<T, E>(src)) with
 * `aligned`: the 16-byte blocks wholly inside the chunk by asynchronous copies (not waited for
 * here), then the elements of the partial blocks at its ends one at a time (the first thread the
 * head's, the last the tail's, once every copy is on its way), so that nothing outside the chunk
 * is read. Without (a = 0), element by element. The asynchronous copies are cp.async, a 16-byte
 * block a thread; or (BULK, sm_90) bulk copies of the copy engine that complete the phase of the
 * transaction barrier bar, so that no thread holds a load in flight: thread 0 announces their
 * bytes (none where the chunk goes element by element) and issues them, and a thread waits for
 * bar and then the block barrier (the ends' elements) before it reads the chunk. */
template <typename T, int THREADS, bool BULK = false>
__device__ __forceinline__ void chunk_fetch(T *buf, const T *src, int n, int a, bool aligned,
                                            uint64_t *bar = nullptr)
{
    constexpr int E = 16 / sizeof(T);
    const int tid = threadIdx.x;
    if (!aligned) {
        if (BULK && tid == 0)
            barrier_expect(bar, 0);
        for (int i = tid; i < n; i += THREADS)
            buf[i] = src[i];
        return;
    }
    const T *from = src - a;
    const int blocks = n > 0 ? (a + n + E - 1) / E : 0;
    /* block i holds the chunk's elements [first(i), last(i)) of its E */
    auto first = [&](int i) { return i == 0 ? a : 0; };
    auto last = [&](int i) { return min(E, a + n - i * E); };
    if constexpr (BULK) {
        constexpr uint32_t PIECE = 16384; /* bytes a bulk copy */
        const int whole0 = blocks > 0 && first(0) > 0 ? 1 : 0;
        const int whole1 = blocks > 0 && last(blocks - 1) < E ? blocks - 1 : blocks;
        if (tid == 0) {
            const uint32_t bytes = whole1 > whole0 ? (uint32_t)(whole1 - whole0) * 16u : 0u;
            barrier_expect(bar, bytes);
            for (uint32_t at = 0; at < bytes; at += PIECE)
                bulk_copy_to_shared(buf + whole0 * E + at / sizeof(T),
                                    from + whole0 * E + at / sizeof(T), min(PIECE, bytes - at), bar);
        }
    } else {
        for (int i = tid; i < blocks; i += THREADS)
            if (first(i) == 0 && last(i) == E)
                cp_async16(buf + i * E, from + i * E);
    }
    int i = -1; /* the partial block this thread copies, if any */
    if (tid == 0 && blocks > 0)
        i = 0;
    else if (tid == THREADS - 1 && blocks > 1)
        i = blocks - 1;
    if (i >= 0 && (first(i) > 0 || last(i) < E))
        for (int j = first(i); j < last(i); j++)
            buf[i * E + j] = from[i * E + j];
}

/* The max of a pack's elements and m (16-bit elements compared two at a time, as stored). */
template <typename T, int E> __device__ __forceinline__ float pack_max(const pack<T, E> &p, float m)
{
    if constexpr (sizeof(T) == 2) {
        uint32_t w[E / 2];
        memcpy(w, &p, sizeof p);
#pragma unroll
        for (int j = 1; j < E / 2; j++)
            w[0] = max2<T>(w[0], w[j]);
        const float2 pair = unpack2<T>(w[0]);
        return fmaxf(m, fmaxf(pair.x, pair.y));
    } else {
#pragma unroll
        for (int j = 0; j < E; j++)
            m = fmaxf(m, to_float(p.v[j]));
        return m;
    }
}

/* The block's max m and the block-wide sum s of exp(x - m) over the n elements of its chunk in
 * shared memory (at buf + a, as chunk_fetch put them), every thread getting both; each
 * exponential replaces its element, rounded to T, for chunk_write (16-bit types: half a unit in
 * the last place, before the scaling's own rounding). A thread reads and writes only its own
 * elements. Blocks whose chunk lies past the row's end call it with n = 0. */
template <typename T, int THREADS>
__device__ __forceinline__ void chunk_reduce(T *buf, int n, int a, float *red, float &m, float &s)
{
    constexpr int E = 16 / sizeof(T);
    const span<T> sp(a, n);
    T *data = buf + a;
    const int tid = threadIdx.x;
    m = -INFINITY;
    for (int i = tid; i < sp.vectors; i += THREADS)
        m = pack_max<T, E>(pack_load<T, E>(data + sp.vector(i)), m);
    for (int k = tid; k < sp.scalars; k += THREADS)
        m = fmaxf(m, to_float(data[sp.scalar(k)]));
    m = block_reduce<THREADS, true>(m, red);
    const float base = m == -INFINITY ? 0.f : m; /* a chunk of -inf: exponentials of 0 */
    s = 0.f;
    for (int i = tid; i < sp.vectors; i += THREADS) {
        const pack<T, E> p = pack_load<T, E>(data + sp.vector(i));
        float e[E];
#pragma unroll
        for (int j = 0; j < E; j++) {
            e[j] = __expf(to_float(p.v[j]) - base);
            s += e[j];
        }
        pack_store<false, T, E>(data + sp.vector(i), convert<T, E>(e, 1.f));
    }
    for (int k = tid; k < sp.scalars; k += THREADS) {
        const float e = __expf(to_float(data[sp.scalar(k)]) - base);
        s += e;
        data[sp.scalar(k)] = from_float<T>(e);
    }
    s = block_reduce<THREADS, false>(s, red);
}

/* dst = e * scale over the chunk's exponentials in shared memory (chunk_reduce's, at buf + a);
 * with `aligned`, dst lies a elements past a 16-byte boundary too. */
template <typename T, int THREADS>
__device__ __forceinline__ void chunk_write(const T *buf, T *dst, int n, int a, bool aligned,
                                            float scale)
{
    constexpr int E = 16 / sizeof(T);
    const span<T> sp(a, n);
    const T *data = buf + a;
    const int tid = threadIdx.x;
    for (int i = tid; i < sp.vectors; i += THREADS) {
        const pack<T, E> p = pack_load<T, E>(data + sp.vector(i));
        float e[E];
#pragma unroll
        for (int j = 0; j < E; j++)
            e[j] = to_float(p.v[j]);
        store_vector<T, E>(dst + sp.vector(i), aligned, e, scale);
    }
    for (int k = tid; k < sp.scalars; k += THREADS)
        dst[sp.scalar(k)] = from_float<T>(to_float(data[sp.scalar(k)]) * scale);
}

template <typename T, int CTAS, int THREADS>
__global__ void __launch_bounds__(THREADS, 1)
    smem_kernel(const T *x, T *y, int64_t rows, int cols, int chunk, bool aligned, bool overlapped)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    overlap_begin(overlapped);
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ float red[32];
    __shared__ float2 part;
    T *buf = reinterpret_cast<T *>(smem_raw);
    (void)rows;
    int rank = 0;
    if constexpr (CTAS > 1)
        rank = (int)ktune_cluster::rank();
    const int64_t row = blockIdx.x / CTAS;
    const int begin = rank * chunk;
    const int n = max(0, min(chunk, cols - begin));
    const T *src = x + row * cols + begin;
    const int a = aligned ? lead<T, 16 / sizeof(T)>(src) : 0;
    chunk_fetch<T, THREADS>(buf, src, n, a, aligned);
    cp_async_wait_all();
    __syncthreads();
    float m, sum;
    chunk_reduce<T, THREADS>(buf, n, a, red, m, sum);
    const float scale = cluster_scale<CTAS>(m, sum, &part);
    if constexpr (CTAS > 1)
        ktune_cluster::arrive(); /* done with the other blocks' slots */
    chunk_write<T, THREADS>(buf, y + row * cols + begin, n, a, aligned, scale);
    if constexpr (CTAS > 1)
        ktune_cluster::wait(); /* no block leaves while another still reads its shared memory */
#else
    (void)x, (void)y, (void)rows, (void)cols, (void)chunk, (void)aligned;
    __trap();
#endif
}

/* Persistent clusters: cluster c of `clusters` takes rows c, c + clusters, ... Each block holds
 * its chunk of a row in one of STAGES shared-memory buffers, and the copies of the next
 * STAGES - 1 rows are in flight while it reduces and writes this one, so that the loads of a
 * multiprocessor never wait for its stores. The buffers lie `stride` elements apart. */
template <typename T, int CTAS, int THREADS, int STAGES>
__global__ void __launch_bounds__(THREADS, 1)
    pipe_kernel(const T *x, T *y, int64_t rows, int cols, int chunk, int stride, bool aligned, bool overlapped)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    overlap_begin(overlapped);
    static_assert(STAGES >= 2, "one buffer in use, at least one being filled");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ float red[32];
    __shared__ float2 part[2]; /* a row's slot, alternating: see below */
    T *const base = reinterpret_cast<T *>(smem_raw);
    int rank = 0;
    if constexpr (CTAS > 1)
        rank = (int)ktune_cluster::rank();
    const int64_t first = blockIdx.x / CTAS, clusters = gridDim.x / CTAS;
    constexpr int E = 16 / sizeof(T);
    const int begin = rank * chunk;
    const int n = max(0, min(chunk, cols - begin));
    /* where a row's chunk lies past a 16-byte boundary (chunk_fetch) */
    auto lead_of = [&](int64_t row) { return aligned ? lead<T, E>(x + row * cols + begin) : 0; };
    /* one commit group a row, empty past the last, so that wait_group counts rows */
#pragma unroll
    for (int k = 0; k < STAGES - 1; k++) {
        const int64_t row = first + k * clusters;
        if (row < rows)
            chunk_fetch<T, THREADS>(base + (size_t)k * stride, x + row * cols + begin, n,
                                    lead_of(row), aligned);
        cp_async_commit();
    }
    int stage = 0, parity = 0;
    for (int64_t row = first; row < rows; row += clusters) {
        const int64_t ahead = row + (int64_t)(STAGES - 1) * clusters;
        const int fill = stage == 0 ? STAGES - 1 : stage - 1; /* the previous row's buffer */
        if (ahead < rows)
            chunk_fetch<T, THREADS>(base + (size_t)fill * stride, x + ahead * cols + begin, n,
                                    lead_of(ahead), aligned);
        cp_async_commit();
        cp_async_wait<STAGES - 1>();
        __syncthreads();
        T *buf = base + (size_t)stage * stride;
        const int a = lead_of(row);
        float m, sum;
        chunk_reduce<T, THREADS>(buf, n, a, red, m, sum);
        /* a block writes slot k again two rows later, after the next row's cluster barrier, which
         * no block passes before it has read the slots of this row */
        const float scale = cluster_scale<CTAS>(m, sum, &part[parity]);
        chunk_write<T, THREADS>(buf, y + row * cols + begin, n, a, aligned, scale);
        __syncthreads(); /* the buffer is read before the next row's copy overwrites it */
        parity ^= 1;
        stage = stage + 1 == STAGES ? 0 : stage + 1;
    }
    if constexpr (CTAS > 1)
        ktune_cluster::sync(); /* no block leaves while another still reads its shared memory */
#else
    (void)x, (void)y, (void)rows, (void)cols, (void)chunk, (void)stride, (void)aligned;
    __trap();
#endif
}

/* A row split over `parts` blocks of a cooperative grid (all resident at once), for rows longer
 * than a cluster holds: block b of a row takes its elements [b * cols / parts, (b + 1) * cols /
 * parts), at least 16 bytes. Two passes through L2: the first reads the part for its running max
 * and sum, the row's parts meet after a grid barrier, the second reads the part again and writes
 * it. There is no workspace: a block parks its (max, sum) in the first 8-byte-aligned 8 bytes of
 * its own part of y, keeping what was there (x's elements when x == y), and puts that back after
 * a second barrier, once every block of the row has read the pairs. */
template <typename T, int THREADS, int UNROLL>
__global__ void __launch_bounds__(THREADS)
    split_kernel(const T *x, T *y, int64_t rows, int cols, int parts, bool aligned, bool overlapped)
{
    overlap_begin(overlapped);
    constexpr int E = 16 / sizeof(T);
    __shared__ float2 red[32];
    (void)rows;
    const int64_t row = blockIdx.x / parts;
    const int tid = threadIdx.x;
    auto part_begin = [&](int b) { return (int)((int64_t)b * cols / parts); };
    /* where block b of this row parks its pair */
    auto slot_of = [&](int b) {
        const uintptr_t at = (uintptr_t)(y + row * cols + part_begin(b));
        return reinterpret_cast<float2 *>((at + 7) & ~(uintptr_t)7);
    };
    const int b = (int)(blockIdx.x % parts), lo = part_begin(b);
    const int n = part_begin(b + 1) - lo;
    const T *xp = x + row * cols + lo;
    T *yp = y + row * cols + lo;
    const span<T> sp(lead<T, E>(xp), n);

    float m = -INFINITY, s = 0.f;
    for (int i0 = tid; i0 < sp.vectors; i0 += THREADS * UNROLL) {
        float v[UNROLL][E];
        float cm = -INFINITY;
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int i = i0 + u * THREADS;
            if (i >= sp.vectors) {
#pragma unroll
                for (int j = 0; j < E; j++)
                    v[u][j] = -INFINITY;
                continue;
            }
            const pack<T, E> p = pack_load<T, E>(xp + sp.vector(i));
#pragma unroll
            for (int j = 0; j < E; j++) {
                v[u][j] = to_float(p.v[j]);
                cm = fmaxf(cm, v[u][j]);
            }
        }
        online_fold(m, s, cm, v);
    }
    for (int k = tid; k < sp.scalars; k += THREADS)
        online_merge(m, s, to_float(xp[sp.scalar(k)]), 1.f);
    block_merge<THREADS>(m, s, red);

    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    float2 *const slot = slot_of(b);
    uint2 kept = make_uint2(0, 0);
    if (tid == 0) {
        kept = *reinterpret_cast<const uint2 *>(slot);
        *slot = make_float2(m, s);
    }
    grid.sync();
    m = -INFINITY, s = 0.f;
    for (int k = tid; k < parts; k += THREADS) {
        const float2 p = __ldcg(slot_of(k)); /* written by other multiprocessors: from L2 */
        online_merge(m, s, p.x, p.y);
    }
    block_merge<THREADS>(m, s, red);
    grid.sync();
    if (tid == 0)
        *reinterpret_cast<uint2 *>(slot) = kept;
    __syncthreads(); /* x's elements back before they are read again */

    const float base = m == -INFINITY ? 0.f : m; /* -inf throughout: see row_in_registers */
    const float inv = 1.f / s;
    for (int i0 = tid; i0 < sp.vectors; i0 += THREADS * UNROLL) {
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int i = i0 + u * THREADS;
            if (i >= sp.vectors)
                break;
            const pack<T, E> p = pack_load<T, E>(xp + sp.vector(i));
            float e[E];
#pragma unroll
            for (int j = 0; j < E; j++)
                e[j] = __expf(to_float(p.v[j]) - base);
            store_vector<T, E>(yp + sp.vector(i), aligned, e, inv);
        }
    }
    for (int k = tid; k < sp.scalars; k += THREADS)
        yp[sp.scalar(k)] = from_float<T>(__expf(to_float(xp[sp.scalar(k)]) - base) * inv);
}

/* The most blocks resident_kernel's grid may have. */
constexpr int resident_max_blocks = 1024;

/* What the blocks of a resident_kernel grid share besides the rows, in the module's global memory
 * (one a kernel instance and device, so that the library's signature needs no workspace): their
 * (max, sum) pairs, in slots of two generations, and counts of arrivals at barriers.
 *
 * `arrived` counts arrivals at grid barriers and only grows: a launch takes it from a multiple of
 * its grid's size to later ones, and the next launch of the instance, whose blocks need the whole
 * device, starts only once blocks of this one leave, after their last grid barrier. `row_arrived`
 * counts the arrivals of a row's blocks at its barriers (place p: the p-th row of each wave), an
 * epoch in its high 32 bits: the last arrival of a launch moves it to the next epoch, and a
 * launch reads it only after a grid barrier that no block passes while one of the launch before
 * is still running. */
template <typename T, int THREADS, int PER_SM, int STAGES> struct resident_shared {
    float2 slots[2][resident_max_blocks];     /* one row a wave: by the grid barrier's generation */
    float2 row_slots[2][resident_max_blocks]; /* several: by the wave's parity */
    unsigned long long arrived;
    unsigned long long row_arrived[resident_max_blocks];
};

template <typename T, int THREADS, int PER_SM, int STAGES>
__device__ resident_shared<T, THREADS, PER_SM, STAGES> resident_state;

/* Thread 0 arrives at a counter for its block (releasing what the block wrote before, after a
 * block barrier) and returns the count before it. */
__device__ __forceinline__ unsigned long long arrive(unsigned long long *count)
{
    unsigned long long old;
    asm volatile("atom.add.release.gpu.global.u64 %0, [%1], 1;\n" : "=l"(old) : "l"(count) : "memory");
    return old;
}

/* Thread 0 waits until *count reaches target; what the arrivals released is visible to the block
 * after the block barrier that follows. */
__device__ __forceinline__ void wait_count(const unsigned long long *count, unsigned long long target)
{
    unsigned long long now;
    do
        asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(now) : "l"(count) : "memory");
    while (now < target);
}

/* Waits until every block of the grid has arrived `generation + 1` times in all. */
__device__ __forceinline__ void grid_barrier(unsigned long long *arrived,
                                             unsigned long long generation)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        arrive(arrived);
        wait_count(arrived, (generation + 1) * gridDim.x);
    }
    __syncthreads();
}

/* Waits until the `parts` blocks of the row have arrived `wave + 1` times since the epoch that
 * starts at base; the last of `total` arrivals of the launch moves the count to the next epoch. */
__device__ __forceinline__ void row_barrier(unsigned long long *arrived, unsigned long long base,
                                            int wave, int parts, unsigned long long total)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        if (arrive(arrived) - base + 1 == total)
            atomicAdd(arrived, (1ull << 32) - total);
        wait_count(arrived, base + (unsigned long long)(wave + 1) * parts);
    }
    __syncthreads();
}

/* Rows over the whole device, each held in shared memory between its two passes, so that it is
 * read from memory once (split reads it twice): a cooperative grid (all resident at once) takes
 * the rows in waves of `at_once`, each row over `parts` blocks (block b of the grid: place b /
 * parts of the wave, its elements [q * cols / parts, (q + 1) * cols / parts) for q = b % parts;
 * blocks past at_once * parts leave). A block copies its part to shared memory (chunk_fetch),
 * reduces it (chunk_reduce), publishes its (max, sum), and after a barrier of its row collects
 * the row's pairs and writes the part. With one row a wave the row's barrier is a grid barrier;
 * with several, each place has its own, so that the rows of a wave (and the blocks of a
 * multiprocessor) go at their own pace, after one grid barrier at the start. A slot is written
 * again two waves later, after a barrier that each of its readers passes only once it has read
 * it. A part lands by bulk copies (chunk_fetch); with STAGES buffers `stride` elements
 * apart, the copies of the next STAGES - 1 waves are in flight while a wave is reduced and
 * written. sm_90. */
template <typename T, int THREADS, int PER_SM, int STAGES>
__global__ void __launch_bounds__(THREADS, PER_SM)
    resident_kernel(const T *x, T *y, int64_t rows, int cols, int parts, int at_once, int stride,
                    bool aligned, bool overlapped)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    overlap_begin(overlapped);
    constexpr int E = 16 / sizeof(T);
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ float2 red[32];
    __shared__ uint64_t landed[STAGES]; /* a buffer's bulk copies */
    T *const base = reinterpret_cast<T *>(smem_raw);
    resident_shared<T, THREADS, PER_SM, STAGES> &shared = resident_state<T, THREADS, PER_SM, STAGES>;
    const int tid = threadIdx.x, q = (int)(blockIdx.x % parts);
    const int place = (int)(blockIdx.x / parts); /* the block's row in a wave */
    const int lo = (int)((int64_t)q * cols / parts), n = (int)((int64_t)(q + 1) * cols / parts) - lo;
    const int first = (int)(blockIdx.x - q); /* the slot of part 0 of the block's row */
    const bool alone = at_once == 1;
    auto mine = [&](int64_t row0) { return place < at_once && row0 + place < rows; };
    auto lead_of = [&](int64_t row) { return aligned ? lead<T, E>(x + row * cols + lo) : 0; };
    auto fetch = [&](int64_t row0, int stage) {
        if (mine(row0))
            chunk_fetch<T, THREADS, true>(base + (size_t)stage * stride,
                                          x + (row0 + place) * cols + lo, n, lead_of(row0 + place),
                                          aligned, &landed[stage]);
    };
    if (tid == 0) {
        for (int k = 0; k < STAGES; k++)
            barrier_init(&landed[k], 1);
        barrier_init_fence();
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < STAGES - 1; k++)
        fetch((int64_t)k * at_once, k);
    /* the generation of this launch's first grid barrier: the last launch's arrivals are all
     * counted */
    const unsigned long long generation =
        *reinterpret_cast<volatile unsigned long long *>(&shared.arrived) / gridDim.x;
    unsigned long long epoch = 0, total = 0;
    if (!alone) {
        grid_barrier(&shared.arrived, generation);
        if (place >= at_once)
            return;
        epoch = *reinterpret_cast<volatile unsigned long long *>(&shared.row_arrived[place]) >>
                32 << 32;
        total = (unsigned long long)((rows - place + at_once - 1) / at_once) * parts;
    }
    int stage = 0, wave = 0;
    for (int64_t row0 = 0; mine(row0); row0 += at_once, wave++) {
        /* into the buffer of the wave before, written and read by every thread */
        fetch(row0 + (int64_t)(STAGES - 1) * at_once, (stage + STAGES - 1) % STAGES);
        barrier_wait(&landed[stage], wave / STAGES & 1);
        __syncthreads();
        const int64_t row = row0 + place;
        T *const buf = base + (size_t)stage * stride;
        float2 *const slots = alone ? shared.slots[(generation + wave) & 1] : shared.row_slots[wave & 1];
        const int a = lead_of(row);
        float m, s;
        chunk_reduce<T, THREADS>(buf, n, a, reinterpret_cast<float *>(red), m, s);
        if (tid == 0)
            slots[blockIdx.x] = make_float2(m, s);
        if (alone)
            grid_barrier(&shared.arrived, generation + wave);
        else
            row_barrier(&shared.row_arrived[place], epoch, wave, parts, total);
        float rm = -INFINITY, rs = 0.f;
        for (int i = tid; i < parts; i += THREADS) {
            const float2 p = __ldcg(&slots[first + i]); /* written by other multiprocessors */
            online_merge(rm, rs, p.x, p.y);
        }
        block_merge<THREADS>(rm, rs, red);
        /* a part of -inf only: its exponentials are 0 (NaN for a row of -inf, as everywhere) */
        const float scale = m == -INFINITY ? (rs > 0.f ? 0.f : NAN) : __expf(m - rm) / rs;
        chunk_write<T, THREADS>(buf, y + row * cols + lo, n, a, aligned, scale);
        /* the buffer is read and written before a later wave's bulk copies overwrite it */
        fence_proxy_async();
        __syncthreads();
        stage = stage + 1 == STAGES ? 0 : stage + 1;
    }
#else
    (void)x, (void)y, (void)rows, (void)cols, (void)parts, (void)at_once, (void)stride;
    (void)aligned;
    __trap();
#endif
}

template <typename T, int VEC> static bool is_aligned(const void *x, const void *y, int64_t cols)
{
    const uintptr_t a = sizeof(T) * VEC;
    return cols % VEC == 0 && (uintptr_t)x % a == 0 && (uintptr_t)y % a == 0;
}

/* Whether x and y lie the same distance past a boundary of VEC elements, so that a row's vectors
 * are aligned in both at the same indices: the staged and split kernels' `aligned`. */
template <typename T, int VEC> static bool same_alignment(const void *x, const void *y)
{
    return ((uintptr_t)x - (uintptr_t)y) % (sizeof(T) * VEC) == 0;
}

static inline cudaError_t check_shape(int64_t rows, int64_t cols, int64_t blocks)
{
    if (rows < 1 || cols < 1 || cols > INT32_MAX || blocks > INT32_MAX)
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

/* The instantiation a kernel that holds rows in registers (capacity elements of slots a row)
 * launches with: *shifted where the rows are off a boundary of VEC elements, x and y at the same
 * alignment and the slots hold any shift (shifted_row); else the aligned one, *aligned telling
 * whether its rows are whole vectors or go element by element. */
template <typename T, int VEC>
static void row_layout(const void *x, const void *y, int64_t cols, int64_t capacity, bool *shifted,
                       bool *aligned)
{
    *aligned = is_aligned<T, VEC>(x, y, cols);
    *shifted = !*aligned && VEC > 1 && same_alignment<T, VEC>(x, y) &&
               (uintptr_t)x % sizeof(T) == 0 && cols + VEC - 1 <= capacity;
    *aligned = *aligned || *shifted;
}

/* Grids of at most this many blocks a multiprocessor are launched overlapped with the stream's
 * previous kernel; larger ones the plain way: overlapped, grids of many short blocks ran slower on
 * the H100 (README, softmax). */
constexpr int overlap_blocks_per_sm = 4;

/* Whether a grid of `blocks` blocks is launched overlapped (where the device allows it, and
 * overlap_blocks_per_sm), in *overlap. */
inline cudaError_t overlap_grid(int64_t blocks, bool *overlap)
{
    int sms = 0;
    const cudaError_t e = ktune_launch::multiprocessors(&sms);
    *overlap = e == cudaSuccess && ktune_launch::overlap_allowed() &&
               blocks <= (int64_t)overlap_blocks_per_sm * sms;
    return e;
}

/* Launches kernel on grid x block in clusters of `cluster` blocks with smem bytes of dynamic
 * shared memory (ktune_launch::launch), overlapped where overlap_grid says so. */
template <typename... Params, typename... Args>
cudaError_t launch_grid(void (*kernel)(Params...), dim3 grid, dim3 block, dim3 cluster,
                        size_t smem, cudaStream_t s, Args... args)
{
    bool overlap;
    const cudaError_t e = overlap_grid((int64_t)grid.x * grid.y * grid.z, &overlap);
    if (e != cudaSuccess)
        return e;
    return overlap ? ktune_launch::launch_overlapped(kernel, grid, block, cluster, smem, s, args...,
                                                     true)
                   : ktune_launch::launch(kernel, grid, block, cluster, smem, s, args..., false);
}

/* As launch_grid, a cooperative grid (ktune_launch::launch_cooperative). */
template <typename... Params, typename... Args>
cudaError_t launch_cooperative_grid(void (*kernel)(Params...), dim3 grid, dim3 block,
                                    size_t smem, cudaStream_t s, Args... args)
{
    bool overlap;
    const cudaError_t e = overlap_grid((int64_t)grid.x * grid.y * grid.z, &overlap);
    if (e != cudaSuccess)
        return e;
    return overlap
               ? ktune_launch::launch_cooperative_overlapped(kernel, grid, block, smem, s, args...,
                                                             true)
               : ktune_launch::launch_cooperative(kernel, grid, block, smem, s, args..., false);
}

template <int VEC, int ITERS, int WARPS> struct vec_launcher {
    template <typename T>
    static cudaError_t run(const void *x, void *y, int64_t rows, int64_t cols, cudaStream_t s)
    {
        const int64_t blocks = (rows + WARPS - 1) / WARPS;
        cudaError_t e = check_shape(rows, cols, blocks);
        if (e != cudaSuccess)
            return e;
        bool shifted, aligned;
        row_layout<T, VEC>(x, y, cols, 32 * VEC * ITERS, &shifted, &aligned);
        const auto kernel = shifted ? vec_kernel<T, VEC, ITERS, WARPS, true>
                                    : vec_kernel<T, VEC, ITERS, WARPS, false>;
        return launch_grid(kernel, dim3((unsigned)blocks), dim3(WARPS * 32), dim3(1, 1, 1), 0, s,
                           (const T *)x, (T *)y, rows, (int)cols, aligned);
    }
};

template <int THREADS, int VEC, int ITERS> struct block_launcher {
    template <typename T>
    static cudaError_t run(const void *x, void *y, int64_t rows, int64_t cols, cudaStream_t s)
    {
        cudaError_t e = check_shape(rows, cols, rows);
        if (e != cudaSuccess)
            return e;
        bool shifted, aligned;
        row_layout<T, VEC>(x, y, cols, THREADS * VEC * ITERS, &shifted, &aligned);
        const auto kernel = shifted ? block_kernel<T, THREADS, VEC, ITERS, true>
                                    : block_kernel<T, THREADS, VEC, ITERS, false>;
        return launch_grid(kernel, dim3((unsigned)rows), dim3(THREADS), dim3(1, 1, 1), 0, s,
                           (const T *)x, (T *)y, rows, (int)cols, aligned);
    }
};

/* PER_SM > 0 caps the blocks resident on a multiprocessor, by reserving shared memory the kernel
 * does not use: fewer rows in flight, so that the second pass finds its row still in L2. */
template <int THREADS, int VEC, int UNROLL, int PER_SM> struct online_launcher {
    template <typename T>
    static cudaError_t run(const void *x, void *y, int64_t rows, int64_t cols, cudaStream_t s)
    {
        cudaError_t e = check_shape(rows, cols, rows);
        if (e != cudaSuccess)
            return e;
        bool shifted, aligned;
        row_layout<T, VEC>(x, y, cols, INT64_MAX, &shifted, &aligned);
        const auto kernel = shifted ? online_kernel<T, THREADS, VEC, UNROLL, true>
                                    : online_kernel<T, THREADS, VEC, UNROLL, false>;
        size_t reserve = 0;
        if (PER_SM > 0) {
            int device = 0, per_sm = 0, optin = 0;
            e = cudaGetDevice(&device);
            if (e == cudaSuccess)
                e = cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor,
                                           device);
            if (e == cudaSuccess)
                e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
            if (e != cudaSuccess)
                return e;
            reserve = std::min<size_t>((size_t)per_sm / (PER_SM + 1) + 1024, (size_t)optin);
        }
        /* the launch sets the kernel's shared memory limit, every time: see launch_clusters */
        return launch_grid(kernel, dim3((unsigned)rows), dim3(THREADS), dim3(1, 1, 1), reserve, s,
                           (const T *)x, (T *)y, rows, (int)cols, aligned);
    }
};

/* Launches kernel on rows * CTAS blocks, in clusters of CTAS blocks when CTAS > 1 (launch_grid).
 * Function attributes are set on every launch: they belong to one device's context, and each
 * translation unit that instantiates a kernel loads its own copy. */
template <int CTAS, int THREADS, typename... Params, typename... Args>
cudaError_t launch_clusters(void (*kernel)(Params...), int64_t rows, size_t smem, cudaStream_t s,
                            Args... args)
{
    return launch_grid(kernel, dim3((unsigned)(rows * CTAS)), dim3(THREADS), dim3(CTAS, 1, 1),
                       smem, s, args...);
}

template <int CTAS, int THREADS, int VEC, int ITERS> struct cluster_launcher {
    template <typename T>
    static cudaError_t run(const void *x, void *y, int64_t rows, int64_t cols, cudaStream_t s)
    {
        cudaError_t e = check_shape(rows, cols, rows * CTAS);
        if (e != cudaSuccess)
            return e;
        bool shifted, aligned;
        row_layout<T, VEC>(x, y, cols, (int64_t)CTAS * THREADS * VEC * ITERS, &shifted, &aligned);
        const auto kernel = shifted ? cluster_kernel<T, CTAS, THREADS, VEC, ITERS, true>
                                    : cluster_kernel<T, CTAS, THREADS, VEC, ITERS, false>;
        return launch_clusters<CTAS, THREADS>(kernel, rows, 0, s, (const T *)x, (T *)y, rows,
                                              (int)cols, aligned);
    }
};

/* A row staged in shared memory over CTAS blocks: the shape checked, each block's chunk
 * (elements, whole 16-byte copies), the buffers' stride and the dynamic shared memory of
 * `buffers` of them, which the device must hold beside the kernels' 1 KB of static shared
 * memory. A buffer holds a vector more than a chunk where a chunk may start past a 16-byte
 * boundary (chunk_fetch); where the device cannot hold that, the rows go element by element
 * (*aligned cleared). */
template <typename T, int CTAS>
cudaError_t staged_layout(const void *x, const void *y, int64_t rows, int64_t cols, int buffers,
                          int64_t *chunk, int64_t *stride, size_t *bytes, bool *aligned)
{
    constexpr int E = 16 / sizeof(T);
    if (check_shape(rows, cols, rows * CTAS) != cudaSuccess)
        return cudaErrorInvalidValue;
    *chunk = ((cols + CTAS - 1) / CTAS + E - 1) / E * E;
    int device = 0, optin = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (e != cudaSuccess)
        return e;
    *aligned = same_alignment<T, E>(x, y);
    const bool every_chunk_aligned = cols % E == 0 && (uintptr_t)x % 16 == 0;
    const size_t limit = (size_t)optin - 1024;
    *stride = *chunk + (*aligned && !every_chunk_aligned ? E : 0);
    if ((size_t)buffers * (size_t)*stride * sizeof(T) > limit) {
        *aligned = *aligned && every_chunk_aligned;
        *stride = *chunk;
    }
    *bytes = (size_t)buffers * (size_t)*stride * sizeof(T);
    return *bytes > limit ? cudaErrorInvalidValue : cudaSuccess;
}

template <int CTAS, int THREADS> struct smem_launcher {
    template <typename T>
    static cudaError_t run(const void *x, void *y, int64_t rows, int64_t cols, cudaStream_t s)
    {
        int64_t chunk, stride;
        size_t bytes;
        bool aligned;
        const cudaError_t e =
            staged_layout<T, CTAS>(x, y, rows, cols, 1, &chunk, &stride, &bytes, &aligned);
        if (e != cudaSuccess)
            return e;
        return launch_clusters<CTAS, THREADS>(smem_kernel<T, CTAS, THREADS>, rows, bytes, s,
                                              (const T *)x, (T *)y, rows, (int)cols, (int)chunk,
                                              aligned);
    }
};

template <int CTAS, int THREADS, int STAGES> struct pipe_launcher {
    template <typename T>
    static cudaError_t run(const void *x, void *y, int64_t rows, int64_t cols, cudaStream_t s)
    {
        int64_t chunk, stride;
        size_t bytes;
        bool aligned;
        unsigned clusters;
        cudaError_t e =
            staged_layout<T, CTAS>(x, y, rows, cols, STAGES, &chunk, &stride, &bytes, &aligned);
        if (e != cudaSuccess)
            return e;
        constexpr auto kernel = pipe_kernel<T, CTAS, THREADS, STAGES>;
        e = ktune_launch::persistent_grid<kernel>(dim3(THREADS), dim3(CTAS, 1, 1), bytes, rows,
                                                  &clusters);
        if (e != cudaSuccess)
            return e;
        return launch_clusters<CTAS, THREADS>(kernel, clusters, bytes, s, (const T *)x, (T *)y,
                                              rows, (int)cols, (int)chunk, (int)stride, aligned);
    }
};

/* A row over PER_SM blocks a multiprocessor's share of the device (split_kernel): every block of
 * the grid resident at once, at least two parts a row of at least 16 bytes each. */
template <int THREADS, int UNROLL, int PER_SM> struct split_launcher {
    template <typename T>
    static cudaError_t run(const void *x, void *y, int64_t rows, int64_t cols, cudaStream_t s)
    {
        cudaError_t e = check_shape(rows, cols, rows);
        if (e != cudaSuccess)
            return e;
        constexpr auto kernel = split_kernel<T, THREADS, UNROLL>;
        int device = 0, sms = 0;
        unsigned resident;
        e = cudaGetDevice(&device);
        if (e == cudaSuccess)
            e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
        if (e == cudaSuccess)
            e = ktune_launch::persistent_grid<kernel>(dim3(THREADS), dim3(1, 1, 1), 0, INT64_MAX,
                                                      &resident);
        if (e != cudaSuccess)
            return e;
        const int64_t parts = (int64_t)PER_SM * sms / rows;
        if ((int64_t)resident < (int64_t)PER_SM * sms || parts < 2 ||
            cols / parts * (int64_t)sizeof(T) < 16)
            return cudaErrorInvalidValue;
        return launch_cooperative_grid(
            kernel, dim3((unsigned)(rows * parts)), dim3(THREADS), 0, s, (const T *)x, (T *)y, rows,
            (int)cols, (int)parts, same_alignment<T, 16 / sizeof(T)>(x, y));
    }
};

/* Rows held in the shared memory of the whole device (resident_kernel): PER_SM blocks a
 * multiprocessor, each with the shared memory of its share (the kernel's static shared memory and
 * the 1 KB a block reserves taken off), so that no other block of the kernel fits beside them, cut
 * into STAGES buffers; a row over the fewest blocks whose buffers hold it (a vector more than a
 * part each, for its lead), in the fewest waves the grid takes them in, as many rows in each as
 * they take. Rows longer than a buffer of every block holds are refused. */
template <int THREADS, int PER_SM, int STAGES> struct resident_launcher {
    template <typename T>
    static cudaError_t run(const void *x, void *y, int64_t rows, int64_t cols, cudaStream_t s)
    {
        constexpr int E = 16 / sizeof(T);
        cudaError_t e = check_shape(rows, cols, rows);
        if (e != cudaSuccess)
            return e;
        constexpr auto kernel = resident_kernel<T, THREADS, PER_SM, STAGES>;
        /* a block's share of the shared memory, asked once a device (not on every call) */
        static std::atomic<int> shares[ktune_launch::max_devices];
        int share = 0, device = 0, sms = 0;
        e = ktune_launch::asked_once(
            shares,
            [&](int d, int *v) {
                int optin = 0, per_sm = 0;
                cudaFuncAttributes attr;
                cudaError_t r =
                    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, d);
                if (r == cudaSuccess)
                    r = cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor,
                                               d);
                if (r == cudaSuccess)
                    r = cudaFuncGetAttributes(&attr, kernel);
                if (r == cudaSuccess)
                    *v = std::min(optin, per_sm / PER_SM - 1024) - (int)attr.sharedSizeBytes;
                return r;
            },
            &share);
        if (e == cudaSuccess)
            e = cudaGetDevice(&device);
        if (e == cudaSuccess)
            e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
        if (e != cudaSuccess)
            return e;
        const int64_t stride = share / STAGES / 16 * 16 / (int64_t)sizeof(T); /* elements */
        const size_t bytes = (size_t)(stride * STAGES) * sizeof(T);
        unsigned resident;
        e = ktune_launch::persistent_grid<kernel>(dim3(THREADS), dim3(1, 1, 1), bytes, INT64_MAX,
                                                  &resident);
        if (e != cudaSuccess)
            return e;
        const int64_t blocks = (int64_t)PER_SM * sms, capacity = stride - E;
        if ((int64_t)resident < blocks || blocks > resident_max_blocks || capacity < 1)
            return cudaErrorInvalidValue;
        const int64_t fewest = (cols + capacity - 1) / capacity; /* blocks a row needs */
        if (fewest > blocks)
            return cudaErrorInvalidValue;
        /* the fewest waves, and as many rows in each as they take */
        const int64_t most = std::min(rows, blocks / fewest), waves = (rows + most - 1) / most;
        const int64_t at_once = (rows + waves - 1) / waves, parts = blocks / at_once;
        return launch_cooperative_grid(
            kernel, dim3((unsigned)blocks), dim3(THREADS), bytes, s, (const T *)x, (T *)y, rows,
            (int)cols, (int)parts, (int)at_once, (int)stride, same_alignment<T, E>(x, y));
    }
};

} // namespace ktune_softmax_impl
