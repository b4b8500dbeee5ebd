# `shardwise train` under `mpirun --quiet` where one rank fails: whichever rank it is, the job
# ends with the documented status and exactly one line on stderr, the failing rank's message
# prefixed and naming it; nothing on stdout when the input was bad.
#   cmake -DMPIEXEC=... -DCOMMAND=... -DMODEL=... -P train_mpi_errors_test.cmake
set(_common train --mesh data=2 --json)

# Rank 0 runs with A, rank 1 with B; expects STATUS and the one line LINE (a regular expression).
function(expect_one_line name status line a b)
  # Flags a rank's case leaves out default to 2 steps of 4 sequences of MODEL.
  foreach(_side a b)
    set(_flags ${${_side}})
    foreach(_default "--steps;2" "--batch;4" "--model;${MODEL}")
      list(GET _default 0 _flag)
      if(NOT "${_flags}" MATCHES "${_flag}")
        list(APPEND _flags ${_default})
      endif()
    endforeach()
    set(_${_side} ${_flags})
  endforeach()
  execute_process(COMMAND ${MPIEXEC} --quiet --oversubscribe -np 1 ${COMMAND} ${_common} ${_a}
                          : -np 1 ${COMMAND} ${_common} ${_b}
                  RESULT_VARIABLE got OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(NOT got EQUAL status)
    message(FATAL_ERROR "${name}: expected exit status ${status}, got '${got}'\n${out}\n${err}")
  endif()
  if(NOT err MATCHES "^${line}\n$")
    message(FATAL_ERROR "${name}: expected exactly one line matching '${line}', got:\n${err}")
  endif()
  if(status EQUAL 2 AND NOT out STREQUAL "")
    message(FATAL_ERROR "${name}: bad input, yet stdout has:\n${out}")
  endif()
endfunction()

# Bad input given to rank 1 only, before any rank has a job to run.
expect_one_line("--steps on rank 1" 2 "shardwise train: rank 1: --steps is 'abc'; expected an integer"
                "" "--steps;abc")
expect_one_line("--model on rank 1" 2
                "shardwise train: rank 1: --model: '/nonexistent.json' is neither a model .*"
                "" "--model;/nonexistent.json")
expect_one_line("--batch on rank 1" 2
                "shardwise train: rank 1: --batch 3 does not divide among the 2 data-parallel ranks \\(data x fsdp x expert\\)"
                "" "--batch;3")
expect_one_line("unknown flag on rank 0" 2
                "shardwise: rank 0: The following arguments were not expected: 4 --stpes; .*"
                "--stpes;4" "")
# A rank that would run a job of its own.
expect_one_line("--backend local on rank 1" 2
                "shardwise train: rank 1: --backend local runs the ranks as threads of one process, .*"
                "" "--backend;local")
# Every setting is compared, the ones that only change speed or output too.
foreach(_flag "--seed;7" "--threads;2" "--eval-every;1" "--warmup;1")
  list(GET _flag 0 _name)
  expect_one_line("${_name} on rank 1" 2
                  "shardwise train: rank 0: rank 1 runs with another ${_name} than rank 0; .*"
                  "" "${_flag}")
endforeach()

# Data: another copy on rank 1 (its fingerprint differs), and a log folder on rank 0 only.
set(_text_a ${CMAKE_CURRENT_BINARY_DIR}/train_mpi_errors_a.txt)
set(_text_b ${CMAKE_CURRENT_BINARY_DIR}/train_mpi_errors_b.txt)
string(REPEAT "the same words on every host, " 100 _words)
file(WRITE ${_text_a} "${_words}")
file(WRITE ${_text_b} "${_words}!")
expect_one_line("--data on rank 1" 2
                "shardwise train: rank 0: rank 1 runs with another --data than rank 0; .*"
                "--data;${_text_a}" "--data;${_text_b}")
expect_one_line("--log-dir on rank 0" 2
                "shardwise train: rank 0: rank 1 runs with another --log-dir than rank 0; .*"
                "--log-dir;${CMAKE_CURRENT_BINARY_DIR}/train_mpi_errors_logs" "")
# A token file whose 10th id (token 9, byte 18) is outside the vocabulary, found before the first
# step on every rank (every id is read once): the user's input (status 2), named by its position.
set(_ids ${CMAKE_CURRENT_BINARY_DIR}/train_mpi_errors_ids.u16)
set(_val ${CMAKE_CURRENT_BINARY_DIR}/train_mpi_errors_val.u16)
execute_process(COMMAND sh -c "printf 'a\\000%.0s' 1 2 3 4 5 6 7 8 9 > '${_ids}' && \
printf '\\054\\001' >> '${_ids}' && printf 'a\\000%.0s' 1 2 3 4 5 6 7 >> '${_ids}' && \
printf 'a\\000%.0s' $(seq 40) > '${_val}'" RESULT_VARIABLE _made)
file(SIZE ${_ids} _ids_size)
if(NOT _made EQUAL 0 OR NOT _ids_size EQUAL 34)
  message(FATAL_ERROR "could not write the token file ${_ids} (${_ids_size} bytes)")
endif()
expect_one_line("an id out of the vocabulary" 2
                "shardwise train: rank 0: --data '[^']*': token 9 \\(byte 18\\) is the id 300, outside the model's vocabulary 0..255"
                "--data;${_ids};--val-data;${_val};--data-format;tokens-u16"
                "--data;${_ids};--val-data;${_val};--data-format;tokens-u16")

# Output that cannot be written on rank 0, at the end of a run the others finished: status 1.
execute_process(COMMAND ${MPIEXEC} --quiet --oversubscribe
                        -np 1 sh -c "exec \"$0\" \"$@\" > /dev/full" ${COMMAND} ${_common} --steps 2
                        --batch 4 --model ${MODEL} : -np 1 ${COMMAND} ${_common} --steps 2 --batch 4
                        --model ${MODEL}
                RESULT_VARIABLE got OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT got EQUAL 1 OR NOT err MATCHES "^shardwise train: rank 0: writing the output failed[^\n]*\n$")
  message(FATAL_ERROR "/dev/full on rank 0: status '${got}', stderr:\n${err}")
endif()

# Two processes on this machine share its memory: the check counts both. A model sized to need
# about 0.3 of the machine's memory per process passes alone and is refused for two.
file(STRINGS /proc/meminfo _total REGEX "^MemTotal:")
string(REGEX MATCH "[0-9]+" _kib "${_total}")
math(EXPR _vocab "${_kib} * 1024 * 3 / 10 / (16 * 1024)")
set(_big ${CMAKE_CURRENT_BINARY_DIR}/train_mpi_errors_big_model.json)
file(WRITE ${_big} "{\"n_layer\": 1, \"n_head\": 1, \"n_embd\": 1024, \"block_size\": 1, \"vocab_size\": ${_vocab}}")
execute_process(COMMAND ${MPIEXEC} --quiet --oversubscribe -np 2 ${COMMAND} train --model ${_big}
                        --mesh data=2 --batch 2 --seq 1 --steps 1
                RESULT_VARIABLE got OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT got EQUAL 2 OR NOT err MATCHES "\\(2 processes on this machine\\) needs about")
  message(FATAL_ERROR "two processes' memory: status '${got}', stderr:\n${err}")
endif()
message(STATUS "one line from the failing rank, the documented status, in every case")
