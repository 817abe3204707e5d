# ktune_gpu_probe(<ok_var> <text_var>): whether this machine has a CUDA GPU the runtime can use.
# A small program (KtuneGpuProbe.c) asks the CUDA runtime: <ok_var> is TRUE when it found one,
# <text_var> names it ("<name>, <sms> SMs, compute capability <cc>") or says why there is none.
function(ktune_gpu_probe ok_var text_var)
  try_run(probe_rc probe_built "${CMAKE_BINARY_DIR}/ktune-gpu-probe"
    "${PROJECT_SOURCE_DIR}/cmake/KtuneGpuProbe.c"
    CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${CUDAToolkit_INCLUDE_DIRS}"
    LINK_LIBRARIES CUDA::cudart_static
    COMPILE_OUTPUT_VARIABLE probe_compile RUN_OUTPUT_VARIABLE probe_out)
  string(STRIP "${probe_out}" probe_out)
  if(NOT probe_built)
    file(WRITE "${CMAKE_BINARY_DIR}/ktune-gpu-probe.log" "${probe_compile}")
    set(${ok_var} FALSE PARENT_SCOPE)
    set(${text_var} "the GPU probe did not build (see ${CMAKE_BINARY_DIR}/ktune-gpu-probe.log)"
        PARENT_SCOPE)
  elseif(NOT probe_rc EQUAL 0)
    set(${ok_var} FALSE PARENT_SCOPE)
    set(${text_var} "${probe_out}" PARENT_SCOPE)
  else()
    set(${ok_var} TRUE PARENT_SCOPE)
    set(${text_var} "${probe_out}" PARENT_SCOPE)
  endif()
endfunction()
