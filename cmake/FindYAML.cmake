# Finds libyaml: YAML_FOUND, YAML::YAML. Honors CMAKE_PREFIX_PATH (a GPU host without the
# package uses Debian's libyaml-dev unpacked into .deps/usr).
find_path(YAML_INCLUDE_DIR yaml.h)
find_library(YAML_LIBRARY NAMES yaml yaml-0)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(YAML
  REQUIRED_VARS YAML_LIBRARY YAML_INCLUDE_DIR
  FAIL_MESSAGE "libyaml not found: apt-get install libyaml-dev, or pass -DCMAKE_PREFIX_PATH=<prefix holding include/yaml.h>")
if(YAML_FOUND AND NOT TARGET YAML::YAML)
  add_library(YAML::YAML UNKNOWN IMPORTED)
  set_target_properties(YAML::YAML PROPERTIES
    IMPORTED_LOCATION "${YAML_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${YAML_INCLUDE_DIR}")
endif()
mark_as_advanced(YAML_INCLUDE_DIR YAML_LIBRARY)
