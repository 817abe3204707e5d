/* What the moe kernels share: the launch signature of a config and the dispatch on the dtype.
 *
 * Layout of every kernel: for each group g and each row r of it (offsets[g] <= r <
 * offsets[g + 1]), C[r][j] = sum over l of A[r][l] * W[g][j][l]; A is rows x k, W groups x n x k,
 * C rows x n, all row-major 16-bit (bf16 or f16), fp32 sums. */
#pragma once

#include "moe_schedule.cuh"

namespace ktune_moe_impl {

/* One grouped GEMM's arguments, as a config's launch function receives them. */
struct problem {
    const void *a, *w;
    const int32_t *offsets;
    void *c;
    int64_t rows, n, k, groups;
};

/* Runs Launcher::run<T> for the dtype; rows == 0 is nothing to do. */
template <typename Launcher> cudaError_t dispatch(const problem &pb, int dtype, cudaStream_t s)
{
    if (pb.rows < 0 || pb.n < 1 || pb.k < 1 || pb.groups < 1 || pb.groups > KTUNE_MOE_MAX_GROUPS ||
        pb.rows > INT32_MAX || pb.k > INT32_MAX || pb.k % 8 != 0 || pb.groups * pb.n > INT32_MAX ||
        !pb.a || !pb.w || !pb.offsets || !pb.c)
        return cudaErrorInvalidValue;
    if (pb.rows == 0)
        return cudaSuccess;
    switch (dtype) {
    case KTUNE_F16:
        return Launcher::template run<__half>(pb, s);
    case KTUNE_BF16:
        return Launcher::template run<__nv_bfloat16>(pb, s);
    default:
        return cudaErrorInvalidValue;
    }
}

} // namespace ktune_moe_impl
