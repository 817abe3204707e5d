# ktune_add_family(<family> [WORKER_LIBS <lib>...]): the build's side of a kernel family.
#   - `ktune gen` turns spaces/<family>.yaml and generated/*/<family>.yaml into the space header,
#     the instance tables (all configs for the sweep worker; the tables' configs plus the
#     defaults for the library) and the list of device tables;
#   - the library gets kernels/<family>/<family>.cu and the library instances;
#   - ktune-worker-<family> gets every candidate, compiled with the library's flags, and links
#     WORKER_LIBS (the vendor library its reference and anchor call).
function(ktune_add_family family)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "WORKER_LIBS")
  set(out "${CMAKE_BINARY_DIR}/gen/${family}")
  set(space "${PROJECT_SOURCE_DIR}/spaces/${family}.yaml")
  file(GLOB registries CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/generated/*/${family}.yaml")
  file(GLOB templates CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/gen/templates/*.m4")
  set(library_sources "${out}/${family}_library.cu" "${out}/${family}_tables.c")
  set(candidate_sources "${out}/${family}_candidates.cu")
  math(EXPR last "${KTUNE_SHARDS} - 1")
  foreach(i RANGE ${last})
    list(APPEND library_sources "${out}/${family}_library_${i}.cu")
    list(APPEND candidate_sources "${out}/${family}_candidates_${i}.cu")
  endforeach()
  set(all_flag "")
  if(KTUNE_LIBRARY_ALL_CONFIGS)
    set(all_flag --library-all)
  endif()
  add_custom_command(
    OUTPUT "${out}/${family}_space.h" ${library_sources} ${candidate_sources}
    COMMAND ktune gen ${family} --space "${space}" --registry-dir "${PROJECT_SOURCE_DIR}/generated"
            --templates "${PROJECT_SOURCE_DIR}/gen/templates" --m4 "${KTUNE_M4}"
            --out "${out}" --shards ${KTUNE_SHARDS} ${all_flag}
    DEPENDS ktune "${space}" ${registries} ${templates}
    COMMENT "ktune: generating the ${family} sources"
    VERBATIM)
  add_custom_target(ktune_${family}_sources DEPENDS "${out}/${family}_space.h")

  target_sources(ktune_lib PRIVATE "${PROJECT_SOURCE_DIR}/kernels/${family}/${family}.cu"
                               ${library_sources})
  target_include_directories(ktune_lib PRIVATE "${out}" "${PROJECT_SOURCE_DIR}/kernels/${family}")
  add_dependencies(ktune_lib ktune_${family}_sources)

  # every candidate, for the worker and the GPU tests
  add_library(ktune_${family}_candidates OBJECT ${candidate_sources})
  target_include_directories(ktune_${family}_candidates PUBLIC
    "${out}" "${PROJECT_SOURCE_DIR}/kernels/${family}" "${PROJECT_SOURCE_DIR}/kernels/runtime"
    "${PROJECT_SOURCE_DIR}/gen/worker" "${PROJECT_SOURCE_DIR}/include")
  target_link_libraries(ktune_${family}_candidates PUBLIC ktune_cuda_options CUDA::cudart)
  add_dependencies(ktune_${family}_candidates ktune_${family}_sources)

  add_executable(ktune-worker-${family}
    "${PROJECT_SOURCE_DIR}/gen/worker/worker_main.cu"
    "${PROJECT_SOURCE_DIR}/kernels/${family}/${family}_worker.cu")
  target_link_libraries(ktune-worker-${family} PRIVATE ktune_${family}_candidates ${arg_WORKER_LIBS})
endfunction()
