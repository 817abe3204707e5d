/* The sm_90a instructions of the wgmma variant, one wrapper each: warpgroup matrix multiplies on
 * shared-memory descriptors, tensor-memory-access (TMA) tile loads, transaction barriers and
 * register reallocation between warpgroups.
 *
 * Only code compiled for sm_90a may execute these (KTUNE_WGMMA_DEVICE below); the kernels that
 * call them compile to an empty body elsewhere and are never launched there. */
#pragma once

#include <cuda.h> /* CUtensorMap */
#include <stdint.h>

#include <type_traits>

#include "matmul_common.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KTUNE_WGMMA_DEVICE 1
#endif

namespace ktune_matmul_impl {

/* A shared-memory matrix descriptor for a K-major tile of rows of 128 bytes (64 16-bit
 * elements), stored as TMA's 128-byte swizzle writes it: 8-row atoms of 1024 bytes, one after
 * the other. addr is the tile's shared address plus the byte offset of a 16-wide k step within
 * the row (0, 32, 64, 96); the tile starts 1024-byte aligned. */
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t addr)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) /* start address */
           | (uint64_t)1 << 16               /* leading byte offset (unused when swizzled) */
           | (uint64_t)(1024 >> 4) << 32 /* stride byte offset: from one 8-row atom to the next */
           | (uint64_t)1 << 62;          /* 128-byte swizzle */
}

/* The descriptor of the same tile `bytes` further on (a multiple of 16): the start address is the
 * low field, and shared memory lies below 256 KiB, so the sum never carries out of it; the high
 * word is kept as it is (one add, where a descriptor made anew takes several). */
__device__ __forceinline__ uint64_t wgmma_desc_plus(uint64_t desc, uint32_t bytes)
{
    return (desc >> 32 << 32) | (uint32_t)((uint32_t)desc + (bytes >> 4));
}

/* A shared-memory matrix descriptor for an N-major b tile of 16-bit elements (imm-trans-b 1): k
 * rows of 64 n (128 bytes) in TMA's 128-byte swizzle, 8-row atoms of 1024 bytes one after the
 * other along k, and each further 64 n (a panel) panel_bytes on. addr is the tile's shared
 * address plus 1024 bytes for each 8 k rows skipped; the tile starts 1024-byte aligned. */
__device__ __forceinline__ uint64_t wgmma_desc_n_major(uint32_t addr, uint32_t panel_bytes)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4)        /* start address */
           | (uint64_t)(panel_bytes >> 4) << 16     /* leading byte offset: the next 64 n */
           | (uint64_t)(1024 >> 4) << 32            /* stride byte offset: the next 8 k */
           | (uint64_t)1 << 62;                     /* 128-byte swizzle */
}

/* wgmma's accumulator operands for N = 8 and every multiple of 16 up to 256: R<N> lists the
 * N / 2 operand numbers, D<N> binds them to d[0 .. N / 2 - 1]. */
#define KTUNE_WGMMA_R8 "%0, %1, %2, %3"
#define KTUNE_WGMMA_R16 KTUNE_WGMMA_R8 ", %4, %5, %6, %7"
#define KTUNE_WGMMA_R32 KTUNE_WGMMA_R16 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define KTUNE_WGMMA_R48 KTUNE_WGMMA_R32 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define KTUNE_WGMMA_R64 KTUNE_WGMMA_R48 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define KTUNE_WGMMA_R80 KTUNE_WGMMA_R64 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define KTUNE_WGMMA_R96 KTUNE_WGMMA_R80 ", %40, %41, %42, %43, %44, %45, %46, %47"
#define KTUNE_WGMMA_R112 KTUNE_WGMMA_R96 ", %48, %49, %50, %51, %52, %53, %54, %55"
#define KTUNE_WGMMA_R128 KTUNE_WGMMA_R112 ", %56, %57, %58, %59, %60, %61, %62, %63"
#define KTUNE_WGMMA_R144 KTUNE_WGMMA_R128 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define KTUNE_WGMMA_R160 KTUNE_WGMMA_R144 ", %72, %73, %74, %75, %76, %77, %78, %79"
#define KTUNE_WGMMA_R176 KTUNE_WGMMA_R160 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define KTUNE_WGMMA_R192 KTUNE_WGMMA_R176 ", %88, %89, %90, %91, %92, %93, %94, %95"
#define KTUNE_WGMMA_R208 KTUNE_WGMMA_R192 ", %96, %97, %98, %99, %100, %101, %102, %103"
#define KTUNE_WGMMA_R224 KTUNE_WGMMA_R208 ", %104, %105, %106, %107, %108, %109, %110, %111"
#define KTUNE_WGMMA_R240 KTUNE_WGMMA_R224 ", %112, %113, %114, %115, %116, %117, %118, %119"
#define KTUNE_WGMMA_R256 KTUNE_WGMMA_R240 ", %120, %121, %122, %123, %124, %125, %126, %127"
#define KTUNE_WGMMA_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define KTUNE_WGMMA_F8(i) KTUNE_WGMMA_F4(i), KTUNE_WGMMA_F4(i + 4)
#define KTUNE_WGMMA_D8 KTUNE_WGMMA_F4(0)
#define KTUNE_WGMMA_D16 KTUNE_WGMMA_F8(0)
#define KTUNE_WGMMA_D32 KTUNE_WGMMA_D16, KTUNE_WGMMA_F8(8)
#define KTUNE_WGMMA_D48 KTUNE_WGMMA_D32, KTUNE_WGMMA_F8(16)
#define KTUNE_WGMMA_D64 KTUNE_WGMMA_D48, KTUNE_WGMMA_F8(24)
#define KTUNE_WGMMA_D80 KTUNE_WGMMA_D64, KTUNE_WGMMA_F8(32)
#define KTUNE_WGMMA_D96 KTUNE_WGMMA_D80, KTUNE_WGMMA_F8(40)
#define KTUNE_WGMMA_D112 KTUNE_WGMMA_D96, KTUNE_WGMMA_F8(48)
#define KTUNE_WGMMA_D128 KTUNE_WGMMA_D112, KTUNE_WGMMA_F8(56)
#define KTUNE_WGMMA_D144 KTUNE_WGMMA_D128, KTUNE_WGMMA_F8(64)
#define KTUNE_WGMMA_D160 KTUNE_WGMMA_D144, KTUNE_WGMMA_F8(72)
#define KTUNE_WGMMA_D176 KTUNE_WGMMA_D160, KTUNE_WGMMA_F8(80)
#define KTUNE_WGMMA_D192 KTUNE_WGMMA_D176, KTUNE_WGMMA_F8(88)
#define KTUNE_WGMMA_D208 KTUNE_WGMMA_D192, KTUNE_WGMMA_F8(96)
#define KTUNE_WGMMA_D224 KTUNE_WGMMA_D208, KTUNE_WGMMA_F8(104)
#define KTUNE_WGMMA_D240 KTUNE_WGMMA_D224, KTUNE_WGMMA_F8(112)
#define KTUNE_WGMMA_D256 KTUNE_WGMMA_D240, KTUNE_WGMMA_F8(120)
/* d (64 x N, fp32) += a (64 x 16, descriptor da) * b (N x 16, descriptor db)^T; A, B, S are the
 * operand numbers of da, db and the scale-d flag (ACC: 1 accumulates, 0 overwrites). */
#define KTUNE_WGMMA_(N, TY, A, B, S)                                                               \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #S ", 0;\n"                                  \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" KTUNE_WGMMA_R##N \
                 "}, %" #A ", %" #B ", p, 1, 1, 0, 0;\n}\n"                                        \
                 : KTUNE_WGMMA_D##N                                                                \
                 : "l"(da), "l"(db), "n"(ACC))

/* One warpgroup's d (64 x N) += a b^T over a 16-wide k step (d = a b^T where ACC is 0); both
 * tiles K-major in shared memory. d holds the warpgroup's accumulator fragment: thread t of warp
 * w has rows 16 w + t / 4 and 16 w + t / 4 + 8, columns 8 j + 2 (t % 4) and the next, in
 * d[4 j .. 4 j + 3]. */
template <typename T, int N, int ACC = 1>
__device__ __forceinline__ void wgmma_m64k16(float (&d)[N / 2], uint64_t da, uint64_t db)
{
#ifdef KTUNE_WGMMA_DEVICE
    constexpr bool bf16 = std::is_same<T, __nv_bfloat16>::value;
    if constexpr (N == 8) {
        if constexpr (bf16)
            KTUNE_WGMMA_(8, "bf16", 4, 5, 6);
        else
            KTUNE_WGMMA_(8, "f16", 4, 5, 6);
    } else if constexpr (N == 16) {
        if constexpr (bf16)
            KTUNE_WGMMA_(16, "bf16", 8, 9, 10);
        else
            KTUNE_WGMMA_(16, "f16", 8, 9, 10);
    } else if constexpr (N == 32) {
        if constexpr (bf16)
            KTUNE_WGMMA_(32, "bf16", 16, 17, 18);
        else
            KTUNE_WGMMA_(32, "f16", 16, 17, 18);
    } else if constexpr (N == 48) {
        if constexpr (bf16)
            KTUNE_WGMMA_(48, "bf16", 24, 25, 26);
        else
            KTUNE_WGMMA_(48, "f16", 24, 25, 26);
    } else if constexpr (N == 64) {
        if constexpr (bf16)
            KTUNE_WGMMA_(64, "bf16", 32, 33, 34);
        else
            KTUNE_WGMMA_(64, "f16", 32, 33, 34);
    } else if constexpr (N == 80) {
        if constexpr (bf16)
            KTUNE_WGMMA_(80, "bf16", 40, 41, 42);
        else
            KTUNE_WGMMA_(80, "f16", 40, 41, 42);
    } else if constexpr (N == 96) {
        if constexpr (bf16)
            KTUNE_WGMMA_(96, "bf16", 48, 49, 50);
        else
            KTUNE_WGMMA_(96, "f16", 48, 49, 50);
    } else if constexpr (N == 112) {
        if constexpr (bf16)
            KTUNE_WGMMA_(112, "bf16", 56, 57, 58);
        else
            KTUNE_WGMMA_(112, "f16", 56, 57, 58);
    } else if constexpr (N == 128) {
        if constexpr (bf16)
            KTUNE_WGMMA_(128, "bf16", 64, 65, 66);
        else
            KTUNE_WGMMA_(128, "f16", 64, 65, 66);
    } else if constexpr (N == 144) {
        if constexpr (bf16)
            KTUNE_WGMMA_(144, "bf16", 72, 73, 74);
        else
            KTUNE_WGMMA_(144, "f16", 72, 73, 74);
    } else if constexpr (N == 160) {
        if constexpr (bf16)
            KTUNE_WGMMA_(160, "bf16", 80, 81, 82);
        else
            KTUNE_WGMMA_(160, "f16", 80, 81, 82);
    } else if constexpr (N == 176) {
        if constexpr (bf16)
            KTUNE_WGMMA_(176, "bf16", 88, 89, 90);
        else
            KTUNE_WGMMA_(176, "f16", 88, 89, 90);
    } else if constexpr (N == 192) {
        if constexpr (bf16)
            KTUNE_WGMMA_(192, "bf16", 96, 97, 98);
        else
            KTUNE_WGMMA_(192, "f16", 96, 97, 98);
    } else if constexpr (N == 208) {
        if constexpr (bf16)
            KTUNE_WGMMA_(208, "bf16", 104, 105, 106);
        else
            KTUNE_WGMMA_(208, "f16", 104, 105, 106);
    } else if constexpr (N == 224) {
        if constexpr (bf16)
            KTUNE_WGMMA_(224, "bf16", 112, 113, 114);
        else
            KTUNE_WGMMA_(224, "f16", 112, 113, 114);
    } else if constexpr (N == 240) {
        if constexpr (bf16)
            KTUNE_WGMMA_(240, "bf16", 120, 121, 122);
        else
            KTUNE_WGMMA_(240, "f16", 120, 121, 122);
    } else {
        static_assert(N == 256, "N of 8 or a multiple of 16 up to 256");
        if constexpr (bf16)
            KTUNE_WGMMA_(256, "bf16", 128, 129, 130);
        else
            KTUNE_WGMMA_(256, "f16", 128, 129, 130);
    }
#else
    (void)d, (void)da, (void)db;
#endif
}

/* d (64 x N, fp32) += a (64 x 16, in registers) * b (N x 16, descriptor db)^T: A0..A3 are the
 * operand numbers of a's four registers, B of db, S of the scale-d flag (always 1), TB of the
 * transpose-b flag (0: b K-major, 1: N-major). */
#define KTUNE_WGMMA_RA_(N, TY, A0, A1, A2, A3, B, S, TB)                                           \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #S ", 0;\n"                                  \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" KTUNE_WGMMA_R##N \
                 "}, {%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #B ", p, 1, 1, %" #TB ";\n}\n"  \
                 : KTUNE_WGMMA_D##N                                                                \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(1), "n"(TRANS_B))

/* One warpgroup's d (64 x N) += a b^T over a 16-wide k step, a from registers: warp w of the
 * warpgroup holds rows 16 w .. 16 w + 15 of a as mma.sync's m16n8k16 A fragment (thread t: rows
 * t / 4 and t / 4 + 8, k 2 (t % 4) and the next in a[0] and a[1], 8 further in a[2] and a[3]);
 * b K-major in shared memory as in wgmma_m64k16 or, with TRANS_B, N-major (wgmma_desc_n_major);
 * d as there. The multiply reads a after it is issued: a's registers keep their values until the
 * wgmma_wait that retires it. */
template <typename T, int N, int TRANS_B = 0>
__device__ __forceinline__ void wgmma_m64k16_ra(float (&d)[N / 2], const uint32_t (&a)[4],
                                                uint64_t db)
{
#ifdef KTUNE_WGMMA_DEVICE
    constexpr bool bf16 = std::is_same<T, __nv_bfloat16>::value;
    if constexpr (N == 64) {
        if constexpr (bf16)
            KTUNE_WGMMA_RA_(64, "bf16", 32, 33, 34, 35, 36, 37, 38);
        else
            KTUNE_WGMMA_RA_(64, "f16", 32, 33, 34, 35, 36, 37, 38);
    } else if constexpr (N == 128) {
        if constexpr (bf16)
            KTUNE_WGMMA_RA_(128, "bf16", 64, 65, 66, 67, 68, 69, 70);
        else
            KTUNE_WGMMA_RA_(128, "f16", 64, 65, 66, 67, 68, 69, 70);
    } else {
        static_assert(N == 256, "N of 64, 128 or 256");
        if constexpr (bf16)
            KTUNE_WGMMA_RA_(256, "bf16", 128, 129, 130, 131, 132, 133, 134);
        else
            KTUNE_WGMMA_RA_(256, "f16", 128, 129, 130, 131, 132, 133, 134);
    }
#else
    (void)d, (void)a, (void)db;
#endif
}

#undef KTUNE_WGMMA_RA_
#undef KTUNE_WGMMA_
#undef KTUNE_WGMMA_D256
#undef KTUNE_WGMMA_D240
#undef KTUNE_WGMMA_D224
#undef KTUNE_WGMMA_D208
#undef KTUNE_WGMMA_D192
#undef KTUNE_WGMMA_D176
#undef KTUNE_WGMMA_D160
#undef KTUNE_WGMMA_D144
#undef KTUNE_WGMMA_D128
#undef KTUNE_WGMMA_D112
#undef KTUNE_WGMMA_D96
#undef KTUNE_WGMMA_D80
#undef KTUNE_WGMMA_D64
#undef KTUNE_WGMMA_D48
#undef KTUNE_WGMMA_D32
#undef KTUNE_WGMMA_D16
#undef KTUNE_WGMMA_D8
#undef KTUNE_WGMMA_F8
#undef KTUNE_WGMMA_F4
#undef KTUNE_WGMMA_R256
#undef KTUNE_WGMMA_R240
#undef KTUNE_WGMMA_R224
#undef KTUNE_WGMMA_R208
#undef KTUNE_WGMMA_R192
#undef KTUNE_WGMMA_R176
#undef KTUNE_WGMMA_R160
#undef KTUNE_WGMMA_R144
#undef KTUNE_WGMMA_R128
#undef KTUNE_WGMMA_R112
#undef KTUNE_WGMMA_R96
#undef KTUNE_WGMMA_R80
#undef KTUNE_WGMMA_R64
#undef KTUNE_WGMMA_R48
#undef KTUNE_WGMMA_R32
#undef KTUNE_WGMMA_R16
#undef KTUNE_WGMMA_R8

/* Keeps the compiler from moving reads or writes of an accumulator (fp32, or int32 for 8-bit
 * integer multiplies) across the asynchronous multiplies (which it cannot see use the
 * registers). */
template <typename A, int R> __device__ __forceinline__ void wgmma_fence_registers(A (&d)[R])
{
    static_assert(std::is_same<A, float>::value || std::is_same<A, int32_t>::value,
                  "fp32 or int32 accumulators");
#pragma unroll
    for (int i = 0; i < R; i++) {
        if constexpr (std::is_same<A, int32_t>::value)
            asm volatile("" : "+r"(d[i])::"memory");
        else
            asm volatile("" : "+f"(d[i])::"memory");
    }
}

#ifdef KTUNE_WGMMA_DEVICE
/* Orders this warpgroup's register and shared-memory accesses before the next multiplies. */
__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

/* Closes a group of multiplies issued since the last commit. */
__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

/* Waits until at most N of this warpgroup's groups are still running. */
template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Sets the register count of every thread of this warpgroup to R: lower hands registers back to
 * the multiprocessor, raise takes them (waiting until other warpgroups have lowered theirs). */
template <int R> __device__ __forceinline__ void registers_lower()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R> __device__ __forceinline__ void registers_raise()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}

using ktune_common::barrier_arrive;
using ktune_common::barrier_expect;
using ktune_common::barrier_init;
using ktune_common::barrier_init_fence;
using ktune_common::barrier_wait;

/* A producer-consumer ring's STAGES pairs of barriers, set up by thread 0 of the block (made
 * visible to TMA, not yet to the other threads): full[s] completes on full_arrivals arrivals and
 * the bytes they announce, empty[s] on empty_arrivals. */
template <int STAGES>
__device__ __forceinline__ void ring_barriers_setup(uint64_t *full, uint64_t *empty,
                                                    int full_arrivals, int empty_arrivals)
{
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            barrier_init(&full[s], full_arrivals);
            barrier_init(&empty[s], empty_arrivals);
        }
        barrier_init_fence();
    }
}

/* ring_barriers_setup for one producer thread and CONSUMERS consumers, then the whole block
 * waits. */
template <int STAGES, int CONSUMERS>
__device__ __forceinline__ void ring_barriers_init(uint64_t *full, uint64_t *empty)
{
    ring_barriers_setup<STAGES>(full, empty, 1, CONSUMERS);
    __syncthreads();
}

/* A barrier of the 128 threads of consumer warpgroup `consumer` (0, 1 or 2): named barrier 1, 2
 * or 3, as 0 is __syncthreads. Immediate ids, so that a kernel holds only the barriers it uses. */
__device__ __forceinline__ void warpgroup_sync(int consumer)
{
    if (consumer == 0)
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
    else if (consumer == 1)
        asm volatile("bar.sync 2, 128;\n" ::: "memory");
    else
        asm volatile("bar.sync 3, 128;\n" ::: "memory");
}

/* Makes this thread's shared-memory writes visible to TMA (the asynchronous proxy). */
using ktune_common::fence_proxy_async;

/* TMA: shared memory at src into the box of map at (x, y); parts outside the tensor are not
 * written. Commits the store as one bulk group. */
__device__ __forceinline__ void tma_store(const CUtensorMap *map, int x, int y, const void *src)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
                 "cp.async.bulk.commit_group;\n" ::"l"(reinterpret_cast<uint64_t>(map)),
                 "r"(x), "r"(y), "r"(smem_addr(src))
                 : "memory");
}

/* Waits until at most N of this thread's bulk stores still read shared memory. */
template <int N> __device__ __forceinline__ void tma_store_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

/* Waits until every bulk store of this thread is complete. */
__device__ __forceinline__ void tma_store_wait_all()
{
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

/* Fetches map's descriptor ahead of its first copy, which would otherwise wait for it. */
__device__ __forceinline__ void tma_descriptor_prefetch(const CUtensorMap *map)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

/* TMA: the box of map at (x, y) (x along the contiguous dimension) into shared memory at dst,
 * completing its bytes on bar. Parts of the box outside the tensor arrive as zeros. */
__device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *map, int x, int y,
                                         uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_addr(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smem_addr(bar))
                 : "memory");
}

/* TMA: the box of a 3-dimensional map at (x, y, z) (x along the contiguous dimension) into
 * shared memory at dst, completing its bytes on bar. */
__device__ __forceinline__ void tma_load_3d(void *dst, const CUtensorMap *map, int x, int y, int z,
                                            uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(smem_addr(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(smem_addr(bar))
                 : "memory");
}

/* tma_load into the same offsets of the shared memory of every block of the cluster in mask
 * (bit i: block rank i), completing its bytes on each one's barrier at bar's offset. */
__device__ __forceinline__ void tma_load_multicast(void *dst, const CUtensorMap *map, int x, int y,
                                                   uint64_t *bar, uint16_t mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_addr(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smem_addr(bar)),
                 "h"(mask)
                 : "memory");
}

/* One arrival on the barrier at bar's offset in the shared memory of cluster block `block`. */
__device__ __forceinline__ void barrier_arrive_cluster(uint64_t *bar, unsigned block)
{
    asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_addr(bar)),
                 "r"(block)
                 : "memory");
}
#endif

} // namespace ktune_matmul_impl
