# Bad input: exit status 2, nothing on stdout, exactly one line on stderr.
execute_process(COMMAND ${COMMAND} layout --mesh data=0 --shape 4
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 2)
  message(FATAL_ERROR "expected exit status 2, got '${status}'")
endif()
if(NOT out STREQUAL "")
  message(FATAL_ERROR "expected nothing on stdout, got '${out}'")
endif()
string(REGEX MATCHALL "\n" newlines "${err}")
list(LENGTH newlines lines)
if(NOT lines EQUAL 1 OR NOT err MATCHES "axis 'data' has size 0")
  message(FATAL_ERROR "expected one line naming the axis on stderr, got '${err}'")
endif()
