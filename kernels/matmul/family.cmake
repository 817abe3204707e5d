# The matmul family's build settings (cmake/KtuneFamily.cmake reads them): cuBLAS is the
# reference of the worker's checks and the bench's anchor.
set(KTUNE_FAMILY_WORKER_LIBS CUDA::cublas)
