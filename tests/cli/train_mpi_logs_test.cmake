# `shardwise train --log-dir` under mpirun: rank 0's process alone writes the logs (one event
# file, a metrics line per step holding every rank's memory), the others none.
#   cmake -DMPIEXEC=... -DCOMMAND=... -DMODEL=... -DWORK=... -P train_mpi_logs_test.cmake
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${MPIEXEC} --quiet --oversubscribe -np 2 ${COMMAND} train --model ${MODEL}
                        --mesh data=2 --steps 3 --batch 4 --json --log-dir ${WORK}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "mpirun: ${status}\n${err}")
endif()
file(GLOB events ${WORK}/events.out.tfevents.*)
list(LENGTH events event_files)
file(STRINGS ${WORK}/metrics.jsonl lines)
list(LENGTH lines steps)
if(NOT event_files EQUAL 1 OR NOT steps EQUAL 3)
  message(FATAL_ERROR "expected one event file and 3 metrics lines, got ${event_files} and ${steps}")
endif()
list(GET lines 2 last)
if(NOT last MATCHES "\"step\":3" OR NOT last MATCHES "memory/rank_1/held_bytes")
  message(FATAL_ERROR "the last metrics line lacks step 3 or rank 1's memory: ${last}")
endif()
message(STATUS "one event file and 3 metrics lines from rank 0's process")
