# The wqmatmul family's build settings (cmake/KtuneFamily.cmake reads them): cuBLAS computes the
# reference of the worker's checks (the dequantized weight in fp32) and is the bench's vendor
# path (the same layer unquantized).
set(KTUNE_FAMILY_WORKER_LIBS CUDA::cublas)
