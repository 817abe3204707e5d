/* The mma variant: the matmul family's mma.sync GEMM (kernels/matmul/matmul_mma.cuh: a cp.async
 * ring of swizzled shared memory, ldmatrix fragments, grouped tiles, k split over a cluster) on
 * 8-bit operands, for the architectures without wgmma and the shapes where it pays on sm_90.
 *
 * The tiles are loaded in 2-byte units (two elements of k): m16n8k32's 8-bit fragments hold the
 * same bytes as m16n8k16's 16-bit ones, so the kernel's loads and ldmatrix serve both, and the
 * mma is m16n8k32 (int8 into int32, exact; e4m3 into fp32, sm_89 on). BK counts units: 32 or 64
 * units are 64 or 128 elements of k. Split-k partial sums add in the accumulator's type. The
 * epilogue scales each sum by its row's scale of A and its column's scale of W, adds the bias
 * and stores bf16 or f16 pairs. The family's rules (k % 16 == 0, 16-byte aligned A and W) make
 * every row of A and W 16-byte aligned: loads are always 16 bytes.
 *
 * On sm_90 e4m3 mma.sync runs as f16 instructions on converted fragments, which need registers of
 * their own: fp8 tiles of more than 64 accumulators a thread are not compiled (the launcher
 * returns cudaErrorNotSupported), as the wgmma variant's. */
#pragma once

#include "../matmul/matmul_mma.cuh"
#include "qmatmul_common.cuh"

namespace ktune_qmatmul_impl {

/* The 8-bit policy of ktune_matmul_impl::mma_kernel: Q inputs, O output, the epilogue. */
template <typename Q, typename O> struct qmma_policy {
    using unit = uint16_t;
    using acc = typename accumulator<Q>::type;
    struct out {
        O *c;
        ktune_qmatmul_epilogue ep;
        __device__ __forceinline__ void store(int64_t row, int64_t col, int64_t m, int64_t n, acc x,
                                              acc y, int flags) const
        {
            if (row >= m || col >= n)
                return;
            const float vx = epilogue_value<O>((float)x, ep, row, col);
            O *p = c + row * n + col;
            if (col + 1 >= n) {
                p[0] = ktune_common::from_float<O>(vx);
                return;
            }
            const float vy = epilogue_value<O>((float)y, ep, row, col + 1);
            if (flags & ktune_matmul_impl::PAIR_STORES) {
                *reinterpret_cast<uint32_t *>(p) = ktune_matmul_impl::pack2<O>(vx, vy);
            } else {
                p[0] = ktune_common::from_float<O>(vx);
                p[1] = ktune_common::from_float<O>(vy);
            }
        }
    };
    static __device__ __forceinline__ void mma(acc (&d)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2])
    {
        mma_16832(d, a, b);
    }
};

template <int BM, int BN, int BK, int WM, int WN, int STAGES, int SPLIT> struct qmma_launcher {
    template <typename Q, typename O>
    static cudaError_t run(const void *a, const void *w, void *c, int64_t m, int64_t n, int64_t k,
                           const ktune_qmatmul_epilogue &ep, cudaStream_t s)
    {
        constexpr bool int8 = std::is_same<Q, int8_t>::value;
        if constexpr (!int8 && (BM / WM) * (BN / WN) / 32 > 64)
            return cudaErrorNotSupported;
        else
            return int8 || device_has_fp8() ? launch<Q, O>(a, w, c, m, n, k, ep, s)
                                            : cudaErrorNotSupported;
    }

    template <typename Q, typename O>
    static cudaError_t launch(const void *a, const void *w, void *c, int64_t m, int64_t n,
                              int64_t k, const ktune_qmatmul_epilogue &ep, cudaStream_t s)
    {
        const int64_t tiles = ((m + BM - 1) / BM) * ((n + BN - 1) / BN);
        if (tiles > INT32_MAX)
            return cudaErrorInvalidValue;
        using P = qmma_policy<Q, O>;
        using namespace ktune_matmul_impl;
        const int flags = VEC_LOADS | pair_stores(c, n);
        return ktune_launch::launch(mma_kernel<P, BM, BN, BK, WM, WN, STAGES, SPLIT>,
                                    dim3((unsigned)tiles, SPLIT), dim3(WM * WN * 32),
                                    dim3(1, SPLIT, 1), mma_smem_bytes<BM, BN, BK, STAGES, SPLIT>(),
                                    s, (const uint16_t *)a, (const uint16_t *)w,
                                    typename P::out{(O *)c, ep}, (int)m, (int)n, k / 2, flags);
    }
};

} // namespace ktune_qmatmul_impl
