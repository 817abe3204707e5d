/* Test data for the library's compiler launcher (cmake/KtuneNoSerializedWgmma.cmake): two wgmma
 * accumulator sets taking a loop's iterations in turn, each set's sums read in the iteration after
 * the one that issued its multiplies (as qmatmul's fp8 tiles of 32 accumulators once did). ptxas
 * serializes the kernel's wgmma instructions and says so (C7514); the launcher fails the
 * compile. */
#include <stdint.h>

#define D16(x) "+f"(x[0]), "+f"(x[1]), "+f"(x[2]), "+f"(x[3]), "+f"(x[4]), "+f"(x[5]), "+f"(x[6]), \
    "+f"(x[7]), "+f"(x[8]), "+f"(x[9]), "+f"(x[10]), "+f"(x[11]), "+f"(x[12]), "+f"(x[13]),     \
    "+f"(x[14]), "+f"(x[15])
__device__ __forceinline__ void mma(float (&d)[16], uint64_t da, uint64_t db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, "
                 "%6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, 0, 1, 1, 0, 0;\n"
                 : D16(d)
                 : "l"(da), "l"(db));
}

__device__ __forceinline__ void hold(float (&d)[16])
{
    for (int i = 0; i < 16; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

__global__ void two_sets(float *out, uint64_t da, uint64_t db, int steps)
{
    float d[16] = {}, e[16] = {}, total[16] = {};
    for (int j = 0; j < steps; j++) {
        if (j % 2 == 0) {
            hold(d);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            mma(d, da, db);
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            hold(d);
        } else {
            hold(e);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            mma(e, da, db);
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            hold(e);
        }
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        if (j > 0) {
            if (j % 2 == 0) {
                hold(e);
                for (int i = 0; i < 16; i++)
                    total[i] += e[i];
            } else {
                hold(d);
                for (int i = 0; i < 16; i++)
                    total[i] += d[i];
            }
        }
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    for (int i = 0; i < 16; i++)
        out[threadIdx.x * 16 + i] = total[i] + d[i] + e[i];
}
