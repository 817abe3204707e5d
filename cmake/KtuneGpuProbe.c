/* Configure-time probe for -DKTUNE_SWEEP=ON: is there a GPU to sweep on? Prints the first device
 * ("NAME, N SMs, compute capability C") and exits 0, or prints why not and exits 1. */
#include <stdio.h>

#include <cuda_runtime_api.h>

int main(void)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorInsufficientDriver) {
        printf("no NVIDIA driver is loaded, or it is older than CUDA %d.%d needs "
               "(cudaErrorInsufficientDriver)\n",
               CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
        return 1;
    }
    if (e == cudaErrorNoDevice || (e == cudaSuccess && count == 0)) {
        printf("the driver sees no CUDA device (cudaErrorNoDevice; is CUDA_VISIBLE_DEVICES "
               "empty?)\n");
        return 1;
    }
    if (e != cudaSuccess) {
        printf("%s (%s)\n", cudaGetErrorString(e), cudaGetErrorName(e));
        return 1;
    }
    struct cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, 0)) != cudaSuccess) {
        printf("device 0: %s (%s)\n", cudaGetErrorString(e), cudaGetErrorName(e));
        return 1;
    }
    printf("%s, %d SMs, compute capability %d.%d\n", p.name, p.multiProcessorCount, p.major,
           p.minor);
    return 0;
}
