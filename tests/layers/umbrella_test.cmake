# Fails when a public header (include/shardwise/<layer>/*.hpp) is missing from the umbrella
# header shardwise/shardwise.hpp; the MPI backend's header is left out on purpose (it needs MPI).
#   cmake -DSOURCE_DIR=... -P tests/layers/umbrella_test.cmake
file(GLOB _headers RELATIVE "${SOURCE_DIR}/include" "${SOURCE_DIR}/include/shardwise/*/*.hpp")
file(READ "${SOURCE_DIR}/include/shardwise/shardwise.hpp" _umbrella)
set(_missing "")
foreach(header IN LISTS _headers)
  if(header STREQUAL "shardwise/comm/mpi.hpp")
    continue()
  endif()
  string(FIND "${_umbrella}" "#include \"${header}\"" _at)
  if(_at EQUAL -1)
    string(APPEND _missing "  ${header}\n")
  endif()
endforeach()
if(_missing)
  message(FATAL_ERROR "public headers missing from shardwise/shardwise.hpp:\n${_missing}")
endif()
