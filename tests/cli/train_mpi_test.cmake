# `shardwise train` under mpirun -np NP on MESH with ZeRO stage ZERO (parameters split as
# SHARDING says) against one rank: the same losses.
#   cmake -DMPIEXEC=... -DCOMMAND=... -DMODEL=... -DNP=2 -DMESH=data=2 -DZERO=2
#         -DSHARDING=first-dim -P train_mpi_test.cmake
# DATA_ARGS: what both runs train on (the built-in corpus where absent). PRECISION: what both
# compute in (fp32 where absent; bf16 is held to 5e-4 rather than 6e-6). RESIDUAL: what both keep
# the residual stream in (fp32 where absent).
if(NOT DEFINED PRECISION)
  set(PRECISION fp32)
endif()
if(NOT DEFINED RESIDUAL)
  set(RESIDUAL fp32)
endif()
set(_args train --model ${MODEL} --steps 6 --batch 4 --seed 3 --json --precision ${PRECISION}
    --residual-dtype ${RESIDUAL} ${DATA_ARGS})
set(_most 60)
if(PRECISION STREQUAL "bf16")
  set(_most 5000)
endif()
execute_process(COMMAND ${COMMAND} ${_args} RESULT_VARIABLE _one_status OUTPUT_VARIABLE _one
                ERROR_VARIABLE _one_err TIMEOUT 120)
execute_process(COMMAND ${MPIEXEC} -np ${NP} --oversubscribe ${COMMAND} ${_args} --mesh ${MESH} --zero ${ZERO}
                        --param-sharding ${SHARDING} ${EXTRA}
                RESULT_VARIABLE _mpi_status OUTPUT_VARIABLE _mpi ERROR_VARIABLE _mpi_err TIMEOUT 120)
if(NOT _one_status EQUAL 0 OR NOT _mpi_status EQUAL 0)
  message(FATAL_ERROR "one rank: ${_one_status} ${_one_err}\nmpirun: ${_mpi_status} ${_mpi_err}")
endif()
string(REGEX MATCHALL "\"loss\":[0-9.e+-]+" _one_losses "${_one}")
string(REGEX MATCHALL "\"loss\":[0-9.e+-]+" _mpi_losses "${_mpi}")
list(LENGTH _one_losses _count)
list(LENGTH _mpi_losses _mpi_count)
if(NOT _count EQUAL 6 OR NOT _mpi_count EQUAL 6)
  message(FATAL_ERROR "expected 6 losses each, got ${_count} and ${_mpi_count}:\n${_one}\n${_mpi}")
endif()
foreach(i RANGE 5)
  list(GET _one_losses ${i} _a)
  list(GET _mpi_losses ${i} _b)
  string(REPLACE "\"loss\":" "" _a "${_a}")
  string(REPLACE "\"loss\":" "" _b "${_b}")
  # CMake has no floating point: losses here are 1 to 9.x, so the first eight digits without
  # the point are the loss in units of 1e-7; allow 60 of them (about 1e-5 relative), 5000 in bf16.
  foreach(_v _a _b)
    string(REPLACE "." "" _digits "${${_v}}")
    string(APPEND _digits "00000000")
    string(SUBSTRING "${_digits}" 0 8 _digits)
    string(REGEX REPLACE "^0+([0-9])" "\\1" _digits "${_digits}")
    set(${_v}_units ${_digits})
  endforeach()
  math(EXPR _diff "${_a_units} - ${_b_units}")
  if(_diff GREATER _most OR _diff LESS -_most)
    message(FATAL_ERROR "step ${i}: one rank ${_a}, mpirun ${_b}")
  endif()
endforeach()
message(STATUS "6 steps, the same losses under mpirun -np ${NP} (${MESH}, ZeRO ${ZERO}, ${SHARDING}, ${PRECISION}, residual stream ${RESIDUAL}) as on one rank")
