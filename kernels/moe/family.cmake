# The moe family's build settings (cmake/KtuneFamily.cmake reads them): cuBLAS computes the
# reference of the worker's checks (one GEMM a group) and is the bench's vendor path (grouped
# batched GEMM, and a loop of GEMMs, one an expert: moe_vendor.cuh).
set(KTUNE_FAMILY_WORKER_LIBS CUDA::cublas)
