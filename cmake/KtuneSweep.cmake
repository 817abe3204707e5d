# cmake -DKTUNE_SWEEP=ON: re-tune every family on this machine's GPU, at configure time.
# A tools-only build of ktune and the workers is made under <build>/ktune-sweep-tools, then
# `ktune sweep <family> --apply` measures into <build>/ktune-runs/<stamp>/<family> and merges the
# winners into generated/<device>/ (the registry and the header), which this configure then
# compiles in. Without a GPU it stops before building anything, changes nothing, and turns
# KTUNE_SWEEP back off (so that the next configure uses the committed tables). An interrupted
# sweep resumes on the next configure; a finished one turns KTUNE_SWEEP back off.
if(NOT KTUNE_SWEEP)
  return()
endif()

# A configure that cannot sweep: turn the option back off, say why, stop.
function(ktune_sweep_refuse why)
  set(KTUNE_SWEEP OFF CACHE BOOL "Re-tune every family on this machine's GPU at configure time" FORCE)
  message(FATAL_ERROR "ktune: KTUNE_SWEEP needs a CUDA GPU on this machine: ${why}\n"
                      "Nothing was built or changed, and KTUNE_SWEEP is OFF again: configure "
                      "again to build with the committed tables.")
endfunction()

# Is there a GPU? Asked before minutes of building.
if(NOT KTUNE_GPU_FOUND)
  ktune_sweep_refuse("${KTUNE_GPU_TEXT}")
endif()
message(STATUS "ktune: sweeping on ${KTUNE_GPU_TEXT}")

if(NOT KTUNE_SWEEP_RUN_DIR)
  string(TIMESTAMP stamp "%Y%m%d-%H%M%S" UTC)
  set(KTUNE_SWEEP_RUN_DIR "${CMAKE_BINARY_DIR}/ktune-runs/${stamp}" CACHE INTERNAL "")
endif()
set(tools "${CMAKE_BINARY_DIR}/ktune-sweep-tools")
set(log "${CMAKE_BINARY_DIR}/ktune-sweep-tools.log")
message(STATUS "ktune: building the sweep tools (log: ${log})")
execute_process(
  COMMAND "${CMAKE_COMMAND}" -S "${PROJECT_SOURCE_DIR}" -B "${tools}" -G "${CMAKE_GENERATOR}"
          -DKTUNE_SWEEP=OFF -DKTUNE_BUILD_TESTS=OFF -DKTUNE_CANDIDATES=ALL -DCMAKE_BUILD_TYPE=Release
          "-DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES}"
          "-DCMAKE_PREFIX_PATH=${CMAKE_PREFIX_PATH}"
          "-DCMAKE_CUDA_COMPILER=${CMAKE_CUDA_COMPILER}"
  OUTPUT_FILE "${log}" ERROR_FILE "${log}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ktune: configuring the sweep tools failed; see ${log}")
endif()
set(targets ktune)
foreach(family IN LISTS KTUNE_FAMILIES)
  list(APPEND targets ktune-worker-${family})
endforeach()
execute_process(
  COMMAND "${CMAKE_COMMAND}" --build "${tools}" --parallel --target ${targets}
  OUTPUT_FILE "${log}" ERROR_FILE "${log}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ktune: building the sweep tools failed; see ${log}")
endif()
foreach(family IN LISTS KTUNE_FAMILIES)
  message(STATUS "ktune: sweeping ${family} into ${KTUNE_SWEEP_RUN_DIR}/${family}")
  execute_process(
    COMMAND "${tools}/ktune" sweep ${family} --run "${KTUNE_SWEEP_RUN_DIR}/${family}"
            --registry-dir "${PROJECT_SOURCE_DIR}/generated" --apply
    RESULT_VARIABLE rc)
  if(rc EQUAL 4)
    ktune_sweep_refuse("the ${family} sweep found no usable GPU (see the message above)")
  elseif(rc EQUAL 130)
    message(FATAL_ERROR "ktune: the ${family} sweep was interrupted; configure again to resume "
                        "${KTUNE_SWEEP_RUN_DIR}/${family}")
  elseif(NOT rc EQUAL 0)
    message(FATAL_ERROR "ktune: the ${family} sweep failed (exit ${rc}); its run folder is "
                        "${KTUNE_SWEEP_RUN_DIR}/${family}")
  endif()
endforeach()
message(STATUS "ktune: sweep done; review and commit generated/ (git diff generated/)")
unset(KTUNE_SWEEP_RUN_DIR CACHE)
set(KTUNE_SWEEP OFF CACHE BOOL "Re-tune every family on this machine's GPU at configure time" FORCE)
