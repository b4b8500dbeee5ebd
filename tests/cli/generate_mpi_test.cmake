# `shardwise generate` under mpirun -np NP on model=NP against the in-process ranks and one rank:
# the same greedy and seeded ids, a model the mesh cannot split refused on every process, and
# processes given another prompt or seed refused naming it.
#   cmake -DMPIEXEC=... -DCOMMAND=... -DMODEL=... -DNP=2 -DWORK=dir -P generate_mpi_test.cmake
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${COMMAND} train --model ${MODEL} --steps 30 --batch 8 --lr 1e-2
                        --save ${WORK}/save
                RESULT_VARIABLE _status ERROR_VARIABLE _err OUTPUT_QUIET TIMEOUT 120)
if(NOT _status EQUAL 0)
  message(FATAL_ERROR "train: ${_status} ${_err}")
endif()
foreach(_sampling "--temperature;0" "--temperature;0.9;--top-k;40;--seed;5")
  set(_args generate ${WORK}/save --prompt "The " --max-new-tokens 30 --json ${_sampling})
  execute_process(COMMAND ${COMMAND} ${_args} RESULT_VARIABLE _one_status OUTPUT_VARIABLE _one
                  ERROR_VARIABLE _one_err TIMEOUT 120)
  execute_process(COMMAND ${COMMAND} ${_args} --mesh model=${NP} RESULT_VARIABLE _local_status
                  OUTPUT_VARIABLE _local ERROR_VARIABLE _local_err TIMEOUT 120)
  execute_process(COMMAND ${MPIEXEC} -np ${NP} --oversubscribe ${COMMAND} ${_args}
                          --mesh model=${NP}
                  RESULT_VARIABLE _mpi_status OUTPUT_VARIABLE _mpi ERROR_VARIABLE _mpi_err
                  TIMEOUT 120)
  if(NOT _one_status EQUAL 0 OR NOT _local_status EQUAL 0 OR NOT _mpi_status EQUAL 0)
    message(FATAL_ERROR "one rank: ${_one_status} ${_one_err}\nlocal: ${_local_status} "
                        "${_local_err}\nmpirun: ${_mpi_status} ${_mpi_err}")
  endif()
  string(REGEX MATCH "\"ids\":\\[[0-9,]*\\]" _one_ids "${_one}")
  string(REGEX MATCH "\"ids\":\\[[0-9,]*\\]" _local_ids "${_local}")
  string(REGEX MATCHALL "\"ids\":\\[[0-9,]*\\]" _mpi_ids "${_mpi}")
  list(LENGTH _mpi_ids _printed)
  if(_one_ids STREQUAL "" OR NOT _printed EQUAL 1)
    message(FATAL_ERROR "expected one result from one rank and from the mpirun job (rank 0 "
                        "prints):\n${_one}\n${_mpi}")
  endif()
  if(NOT _one_ids STREQUAL _local_ids OR NOT _one_ids STREQUAL _mpi_ids)
    message(FATAL_ERROR "${_sampling}: one rank ${_one_ids}\nlocal ${_local_ids}\nmpirun ${_mpi_ids}")
  endif()
  string(REGEX MATCH "\"backend\":\"mpi\"" _backend "${_mpi}")
  if(_backend STREQUAL "")
    message(FATAL_ERROR "the mpirun job did not run on the mpi backend:\n${_mpi}")
  endif()
endforeach()
# A degree the heads do not divide: refused on every process before any rank computes.
execute_process(COMMAND ${MPIEXEC} -np 3 --oversubscribe ${COMMAND} generate ${WORK}/save
                        --prompt "The " --mesh model=3
                RESULT_VARIABLE _bad_status OUTPUT_VARIABLE _bad ERROR_VARIABLE _bad_err
                TIMEOUT 120)
if(_bad_status EQUAL 0 OR NOT _bad_err MATCHES "does not divide")
  message(FATAL_ERROR "model=3 under mpirun: ${_bad_status} ${_bad_err}")
endif()
# Processes launched with another prompt or seed (MPMD): refused on every process with status 2
# and a line naming what differs, before a token is computed.
foreach(_case "seed;--prompt;The ;--seed;1;--seed;2" "prompt;--seed;1;--prompt;The ;--prompt;A ")
  list(GET _case 0 _what)
  list(SUBLIST _case 1 2 _common)
  list(SUBLIST _case 3 2 _first)
  list(SUBLIST _case 5 2 _second)
  set(_generate generate ${WORK}/save --mesh model=2 --max-new-tokens 5 ${_common})
  execute_process(COMMAND ${MPIEXEC} --oversubscribe -np 1 ${COMMAND} ${_generate} ${_first}
                          : -np 1 ${COMMAND} ${_generate} ${_second}
                  RESULT_VARIABLE _status OUTPUT_VARIABLE _out ERROR_VARIABLE _err TIMEOUT 60)
  if(NOT _status EQUAL 2 OR NOT _err MATCHES "runs with another ${_what} than rank 0"
     OR NOT _out STREQUAL "")
    message(FATAL_ERROR "another ${_what} on rank 1: status ${_status}\n${_out}\n${_err}")
  endif()
endforeach()
# Two processes given two checkpoints of the same architecture (two hosts seeing different
# newest checkpoints): their weights differ, refused naming them rather than computing with half
# of each.
execute_process(COMMAND ${COMMAND} train --model ${MODEL} --steps 2 --batch 8 --seed 7
                        --save ${WORK}/other
                RESULT_VARIABLE _status ERROR_VARIABLE _err OUTPUT_QUIET TIMEOUT 120)
if(NOT _status EQUAL 0)
  message(FATAL_ERROR "train: ${_status} ${_err}")
endif()
set(_generate generate --mesh model=2 --max-new-tokens 5 --prompt "The ")
execute_process(COMMAND ${MPIEXEC} --oversubscribe -np 1 ${COMMAND} ${_generate} ${WORK}/save
                        : -np 1 ${COMMAND} ${_generate} ${WORK}/other
                RESULT_VARIABLE _status OUTPUT_VARIABLE _out ERROR_VARIABLE _err TIMEOUT 60)
if(NOT _status EQUAL 2 OR NOT _err MATCHES "runs with another weights than rank 0"
   OR NOT _out STREQUAL "")
  message(FATAL_ERROR "another checkpoint on rank 1: status ${_status}\n${_out}\n${_err}")
endif()
file(REMOVE_RECURSE ${WORK})
message(STATUS "generate: the same ids under mpirun -np ${NP} as in process and on one rank")
