# The qmatmul family's build settings (cmake/KtuneFamily.cmake reads them): cuBLAS computes the
# reference of the worker's checks (int8 sums in int32, fp8 sums in fp32); cuBLASLt and cuBLAS
# are the bench's vendor paths (qmatmul_vendor.cuh).
set(KTUNE_FAMILY_WORKER_LIBS CUDA::cublas CUDA::cublasLt)
