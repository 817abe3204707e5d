# The qmatmul family's build settings (cmake/KtuneFamily.cmake reads them): cuBLAS computes the
# reference of the worker's checks (int8 sums in int32, fp8 sums in fp32).
set(KTUNE_FAMILY_WORKER_LIBS CUDA::cublas)
