# Installs the built project into a fresh prefix, then configures, builds and runs a project of
# examples/ (EXAMPLE, its program PROGRAM) against it, as another project would, and checks that
# it printed EXPECT (a regular expression) and links none of FORBID (a list of names).
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run_step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "step failed (${status}): ${ARGN}\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

run_step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
run_step(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/${EXAMPLE} -B ${WORK_DIR}/build
         -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
         -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}")
run_step(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
# FORBID: libraries that must not be on the program's link line (a component without them).
if(FORBID)
  file(GLOB_RECURSE _link_files ${WORK_DIR}/build/CMakeFiles/*/link.txt)
  foreach(_link IN LISTS _link_files)
    file(READ ${_link} _line)
    foreach(_library IN LISTS FORBID)
      if(_line MATCHES "${_library}")
        message(FATAL_ERROR "${PROGRAM} links ${_library}:\n${_line}")
      endif()
    endforeach()
  endforeach()
endif()
run_step(${WORK_DIR}/build/${PROGRAM})
if(NOT step_output MATCHES "${EXPECT}")
  message(FATAL_ERROR "${PROGRAM} printed something unexpected:\n${step_output}")
endif()
message(STATUS "${step_output}")
