# Runs the failure probe in a clean-* mode under `mpirun --quiet`: the job must end within
# seconds with exit status STATUS and exactly one line on stderr matching EXPECTED.
#   cmake -DMPIEXEC=... -DPROBE=... -DMODE=... -DSTATUS=... -DEXPECTED=... -P mpi_job_end_test.cmake
string(TIMESTAMP start "%s")
execute_process(COMMAND ${MPIEXEC} --quiet -np 2 --oversubscribe ${PROBE} ${MODE}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
string(TIMESTAMP end "%s")
math(EXPR seconds "${end} - ${start}")
if(NOT status EQUAL STATUS)
  message(FATAL_ERROR "${MODE}: expected exit status ${STATUS}, got '${status}':\n${out}\n${err}")
endif()
if(NOT err MATCHES "^${EXPECTED}\n$")
  message(FATAL_ERROR "${MODE}: expected exactly the line '${EXPECTED}' on stderr, got:\n${err}")
endif()
if(seconds GREATER 15)
  message(FATAL_ERROR "${MODE} took ${seconds} s; a failure must end the job promptly")
endif()
