# `shardwise train` under mpirun where the ranks were given different flags (MPMD launch):
# every case ends at once with exit status 2 and a line naming the flag, never a run that trains
# different models on different ranks, never a wait for the timeout.
#   cmake -DMPIEXEC=... -DCOMMAND=... -DMODEL=... -DSOURCE_DIR=... -P train_mpi_disagree_test.cmake
set(_common train --model ${MODEL} --steps 4 --batch 4 --json --backend mpi)

# NP ranks run with the flags A, NP more with B (both on _common's model).
function(expect_disagreement flag np a b)
  execute_process(COMMAND ${MPIEXEC} --oversubscribe -np ${np} ${COMMAND} ${_common} ${a}
                          : -np ${np} ${COMMAND} ${_common} ${b}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(NOT status EQUAL 2)
    message(FATAL_ERROR "${flag}: expected exit status 2, got '${status}'\n${out}\n${err}")
  endif()
  if(NOT err MATCHES "runs with another ${flag} than rank 0")
    message(FATAL_ERROR "${flag}: the error does not name ${flag}:\n${err}")
  endif()
  if(out MATCHES "\"step\"")
    message(FATAL_ERROR "${flag}: a step ran before the disagreement was found:\n${out}")
  endif()
endfunction()

expect_disagreement(--seed 1 "--mesh;fsdp=2;--seed;1" "--mesh;fsdp=2;--seed;2")
expect_disagreement(--lr 1 "--mesh;data=2;--lr;1e-3" "--mesh;data=2;--lr;0.5")
expect_disagreement(--mesh 2 "--mesh;data=2,fsdp=2;--zero;3" "--mesh;fsdp=4;--zero;3")
# One half computing in bf16, or reducing in bf16: the sums would differ from rank to rank.
expect_disagreement(--precision 1 "--mesh;fsdp=2;--zero;3" "--mesh;fsdp=2;--zero;3;--precision;bf16")
expect_disagreement(--reduce-dtype 1 "--mesh;data=2" "--mesh;data=2;--reduce-dtype;bf16")
# One half rounding its residual stream: the model ranks would compute different functions.
expect_disagreement(--residual-dtype 1 "--mesh;model=2;--precision;bf16"
                    "--mesh;model=2;--precision;bf16;--residual-dtype;bf16")

# One half capping its experts: the experts would compute other rows from rank to rank.
set(_common train --model ${SOURCE_DIR}/examples/models/mixtral_micro.json --steps 4 --batch 4
    --json --backend mpi)
expect_disagreement(--capacity-factor 1 "--mesh;expert=2" "--mesh;expert=2;--capacity-factor;1")
# One half moving an expert bias: the ranks would route alike only until the first update.
expect_disagreement(--expert-bias-rate 1 "--mesh;model=2"
                    "--mesh;model=2;--expert-bias-rate;0.01")
set(_common train --model ${MODEL} --steps 4 --batch 4 --json --backend mpi)

# --blas: one half on oneDNN and the other on MKL, where MKL is on this machine
# (tests/mkl_for_tests.hpp looks in the same places).
set(_mkl "$ENV{SHARDWISE_TEST_MKL}")
foreach(_candidate ${SOURCE_DIR}/build/peer-venv/lib/libmkl_rt.so.3
                   ${SOURCE_DIR}/build/peer-venv/lib/libmkl_rt.so.2)
  if(_mkl STREQUAL "" AND EXISTS ${_candidate})
    set(_mkl ${_candidate})
  endif()
endforeach()
if(NOT _mkl STREQUAL "")
  expect_disagreement(--blas 1 "--mesh;data=2;--blas;onednn" "--mesh;data=2;--blas;mkl:${_mkl}")
endif()

# One rank's --blas names no library: that rank's line, status 2, no step and no wait.
execute_process(COMMAND ${MPIEXEC} --oversubscribe -np 1 ${COMMAND} ${_common} --mesh data=2
                        : -np 1 ${COMMAND} ${_common} --mesh data=2 --blas mkl:/dev/zero
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT status EQUAL 2 OR NOT err MATCHES "rank 1: --blas: /dev/zero is not a regular file"
   OR out MATCHES "\"step\"")
  message(FATAL_ERROR "--blas mkl:/dev/zero on rank 1: status '${status}'\n${out}\n${err}")
endif()

# A mesh of 2 devices under -np 3: bad input, status 2.
execute_process(COMMAND ${MPIEXEC} --oversubscribe -np 3 ${COMMAND} ${_common} --mesh fsdp=2
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT status EQUAL 2 OR NOT err MATCHES "has 2 devices but the job has 3 ranks")
  message(FATAL_ERROR "-np 3 on fsdp=2: status '${status}'\n${err}")
endif()
message(STATUS "disagreeing ranks end with status 2 and a line naming the flag")
