// On a GPU host: back-to-back launches of softmax configs (as the H100 table picks them), plainly
// or overlapped with the previous kernel, against cudaMemcpyAsync of the same bytes; a checksum
// of each output, which must not depend on the launch. Built outside the library:
//   nvcc -std=c++17 -O3 -arch=sm_90a -DKTUNE_SM90A=1 -Ikernels/softmax -Ikernels/runtime \
//     -Ikernels/common -Iinclude -Ibuild/include -Ibuild/gen/softmax .ci/softmax-launches.cu -o sl
//   KTUNE_OVERLAP=0 ./sl; KTUNE_OVERLAP=1 ./sl
#include "softmax_kernels.cuh"
#include <cstdio>
#include <cstdlib>
using namespace ktune_softmax_impl;
__global__ void fill(unsigned short *x, size_t n, int f32) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    float v = (h & 0xffff) / 8192.f - 4.f;
    if (f32) ((float *)x)[i] = v; else x[i] = __half_as_ushort(__float2half(v));
  }
}
__global__ void sum(const unsigned short *y, size_t n, int f32, double *out) {
  double s = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    s += (f32 ? ((const float *)y)[i] : __half2float(__ushort_as_half(y[i]))) * (double)(i % 7 + 1);
  atomicAdd(out, s);
}
static void *bx, *by; static double *dsum;
template <typename Launcher> void run_case(const char *name, int f32, int64_t r, int64_t c) {
  size_t n = (size_t)r * c, bytes = n * (f32 ? 4 : 2);
  fill<<<1024, 256>>>((unsigned short *)bx, n, f32);
  cudaMemset(by, 0, bytes);
  auto go = [&] { return f32 ? Launcher::template run<float>(bx, by, r, c, 0) : Launcher::template run<__half>(bx, by, r, c, 0); };
  cudaError_t e = go(); cudaDeviceSynchronize();
  if (e != cudaSuccess || cudaGetLastError() != cudaSuccess) { printf("%-34s launch failed: %s\n", name, cudaGetErrorString(e)); return; }
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  int reps = bytes > (64 << 20) ? 20 : 100;
  float best = 1e30f, bestc = 1e30f;
  for (int t = 0; t < 5; t++) {
    cudaEventRecord(a); for (int i = 0; i < reps; i++) go(); cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); if (ms < best) best = ms;
    cudaEventRecord(a); for (int i = 0; i < reps; i++) cudaMemcpyAsync(by, bx, bytes, cudaMemcpyDeviceToDevice, 0);
    cudaEventRecord(b); cudaEventSynchronize(b); cudaEventElapsedTime(&ms, a, b); if (ms < bestc) bestc = ms;
  }
  go(); cudaMemset(dsum, 0, 8); sum<<<512, 256>>>((const unsigned short *)by, n, f32, dsum);
  double h; cudaMemcpy(&h, dsum, 8, cudaMemcpyDeviceToHost);
  e = cudaGetLastError();
  printf("%-34s %9.3f us  copy %9.3f us  vs copy %.3f  checksum %.6f %s\n", name, best * 1e3 / reps, bestc * 1e3 / reps,
         bestc / best, h, e == cudaSuccess ? "" : cudaGetErrorString(e));
}
int main() {
  cudaMalloc(&bx, (size_t)1400 << 20); cudaMalloc(&by, (size_t)1400 << 20); cudaMalloc(&dsum, 8);
  run_case<resident_launcher<256, 1, 2>>("f16 1x262144 resident256x1s2", 0, 1, 262144);
  run_case<resident_launcher<256, 1, 1>>("f16 1x262144 resident256x1s1", 0, 1, 262144);
  run_case<cluster_launcher<16, 512, 8, 4>>("f16 1x262144 cluster16x512v8i4", 0, 1, 262144);
  run_case<resident_launcher<256, 1, 1>>("f16 1x524288 resident256x1s1", 0, 1, 524288);
  run_case<resident_launcher<256, 1, 2>>("f16 1x1048576 resident256x1s2", 0, 1, 1048576);
  run_case<cluster_launcher<16, 512, 8, 4>>("f16 2x170683 cluster16x512v8i4", 0, 2, 170683);
  run_case<split_launcher<1024, 4, 1>>("f16 8x1048576 split1024u4", 0, 8, 1048576);
  run_case<resident_launcher<512, 2, 1>>("f16 8x4194304 resident512x2s1", 0, 8, 4194304);
  run_case<cluster_launcher<8, 256, 8, 2>>("f16 1x32000 cluster8x256v8i2", 0, 1, 32000);
  run_case<cluster_launcher<16, 128, 8, 4>>("f16 4x50257 cluster16x128v8i4", 0, 4, 50257);
  run_case<cluster_launcher<4, 256, 8, 4>>("f16 64x32000 cluster4x256v8i4", 0, 64, 32000);
  run_case<cluster_launcher<8, 256, 8, 8>>("f16 32x128256 cluster8x256v8i8", 0, 32, 128256);
  run_case<smem_launcher<1, 512>>("f16 1024x50257 smem1x512", 0, 1024, 50257);
  run_case<smem_launcher<16, 256>>("f16 76x237980 smem16x256", 0, 76, 237980);
  run_case<smem_launcher<8, 256>>("f32 2410x139410 smem8x256", 1, 2410, 139410);
  run_case<online_launcher<256, 1, 1, 0>>("f16 64x32000 online256", 0, 64, 32000);
  run_case<vec_launcher<1, 1, 4>>("f16 65536x32 vec1x1x4", 0, 65536, 32);
  run_case<vec_launcher<1, 1, 4>>("f16 8192x32 vec1x1x4", 0, 8192, 32);
  run_case<vec_launcher<4, 1, 4>>("f16 8192x128 vec4x1x4", 0, 8192, 128);
  run_case<block_launcher<128, 8, 1>>("f16 1x1024 block128v8i1", 0, 1, 1024);
  run_case<block_launcher<128, 4, 8>>("f32 1024x4096 block128v4i8", 1, 1024, 4096);
  run_case<cluster_launcher<8, 256, 8, 4>>("f16 32x50257 cluster8x256v8i4", 0, 32, 50257);
  return 0;
}
