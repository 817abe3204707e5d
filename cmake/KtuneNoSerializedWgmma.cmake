# The compiler launcher of the library's CUDA sources (cmake -P this file -- COMPILER ARGS...):
# runs the compile and fails it where ptxas says it serialized a kernel's wgmma instructions
# (its message C7514, "wgmma.mma_async instructions are serialized"). ptxas does so, for a whole
# kernel, where a wgmma's accumulators are read by other instructions while it may still run (as
# it judges it: a sum read in a later iteration of a loop than the one that issued its multiply
# is such a read), and the kernel then runs its multiplies one after another; a kernel the
# library ships must not. The compile's output passes through unchanged.
set(command "")
set(after_separator FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_separator)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_separator TRUE)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "usage: cmake -P KtuneNoSerializedWgmma.cmake -- COMPILER ARGS...")
endif()

execute_process(COMMAND ${command} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(out)
  execute_process(COMMAND ${CMAKE_COMMAND} -E echo_append "${out}")
endif()
if(err)
  message(NOTICE "${err}")
endif()
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the compile failed (${status}): its messages are above")
endif()
string(FIND "${err}${out}" "(C7514)" serialized)
if(NOT serialized EQUAL -1)
  message(FATAL_ERROR
    "ptxas serialized the wgmma instructions of a kernel above (C7514): no accumulator of a "
    "multiply may be read before the wait that retires it, in the iteration that issued it")
endif()
