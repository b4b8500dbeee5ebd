cmake_minimum_required(VERSION 3.25)
# Fails when a file of one layer includes a public header of a layer above it (docs/architecture.md's
# table): run at every build (target shardwise_layers), so such an include fails the build.
#   cmake -DSOURCE_DIR=... -P cmake/check_layers.cmake
set(_allowed_core core)
set(_allowed_comm core comm)
set(_allowed_array core comm array)
set(_allowed_strategy core comm array strategy)
set(_allowed_kernels core kernels)
set(_allowed_train core comm array strategy kernels ckpt plan text train)
set(_allowed_models core comm array strategy kernels ckpt plan text train models)
set(_allowed_plan core comm array strategy plan)
set(_allowed_ckpt core comm array ckpt)
set(_allowed_text core text)
set(_allowed_cli core comm array strategy kernels train models plan ckpt text cli)
set(_layers core comm array strategy kernels train models plan ckpt text cli)

get_filename_component(SOURCE_DIR "${SOURCE_DIR}" ABSOLUTE)
set(_violations "")
foreach(layer IN LISTS _layers)
  file(GLOB_RECURSE _files
       "${SOURCE_DIR}/src/${layer}/*.cpp" "${SOURCE_DIR}/src/${layer}/*.hpp"
       "${SOURCE_DIR}/include/shardwise/${layer}/*.hpp")
  foreach(file IN LISTS _files)
    # A layer's own internals (src/<layer>/detail/) are private to it: another layer reaching
    # them ("../<layer>/detail/...") is caught as an upward include would be.
    file(STRINGS "${file}" _private REGEX "^#include \"(\\.\\./)+[a-z]+/detail/")
    foreach(line IN LISTS _private)
      string(REGEX REPLACE "^#include \"(\\.\\./)+([a-z]+)/detail/.*" "\\2" _target "${line}")
      if(NOT _target STREQUAL layer)
        file(RELATIVE_PATH _relative "${SOURCE_DIR}" "${file}")
        string(APPEND _violations
               "  ${_relative} (${layer}) includes ${_target}'s internals: ${line}\n")
      endif()
    endforeach()
    file(STRINGS "${file}" _includes REGEX "^#include \"shardwise/[a-z]+/")
    foreach(line IN LISTS _includes)
      string(REGEX REPLACE "^#include \"shardwise/([a-z]+)/.*" "\\1" _target "${line}")
      if(NOT _target IN_LIST _allowed_${layer})
        file(RELATIVE_PATH _relative "${SOURCE_DIR}" "${file}")
        string(APPEND _violations "  ${_relative} (${layer}) includes ${_target}: ${line}\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(_violations)
  message(FATAL_ERROR "includes that go up the layers (see docs/architecture.md):\n${_violations}")
endif()
