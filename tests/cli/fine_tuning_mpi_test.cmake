# `shardwise train` on chat JSON Lines under mpirun -np NP on MESH against one rank: each process
# reads and encodes the examples, and the losses over the assistant's tokens are one rank's.
#   cmake -DMPIEXEC=... -DCOMMAND=... -DFIXTURES=tests/text/fixtures -DWORK=dir -DNP=4
#         -DMESH=fsdp=2,model=2 -DZERO=3 -P fine_tuning_mpi_test.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/tokenizer)
file(COPY_FILE ${FIXTURES}/smollm2.tokenizer.json ${WORK}/tokenizer/tokenizer.json)
file(READ ${FIXTURES}/chat/smollm2_135m_instruct.json _fixture)
string(JSON _template GET "${_fixture}" template)
set(_config "{}")
string(JSON _config SET "${_config}" eos_token "\"<|im_end|>\"")
# The template as a JSON string: set through a placeholder, then the text put in escaped.
string(REPLACE "\\" "\\\\" _escaped "${_template}")
string(REPLACE "\"" "\\\"" _escaped "${_escaped}")
string(REPLACE "\n" "\\n" _escaped "${_escaped}")
string(JSON _config SET "${_config}" chat_template "\"${_escaped}\"")
file(WRITE ${WORK}/tokenizer/tokenizer_config.json "${_config}")
set(_lines "")
foreach(i RANGE 39)
  math(EXPR _a "(${i} * 7) % 40")
  math(EXPR _b "${_a} + ${i} % 9")
  string(APPEND _lines "{\"messages\": [{\"role\": \"user\", \"content\": \"How many ships?\"}, "
         "{\"role\": \"assistant\", \"content\": \"${_a} ships.\"}, {\"role\": \"user\", "
         "\"content\": \"And more?\"}, {\"role\": \"assistant\", \"content\": \"${_b}.\"}]}\n")
endforeach()
file(WRITE ${WORK}/chat.jsonl "${_lines}")
file(WRITE ${WORK}/model.json
     "{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 32, \"block_size\": 160, \"vocab_size\": 640}")
set(MODEL ${WORK}/model.json)
set(SHARDING first-dim)
set(DATA_ARGS --data ${WORK}/chat.jsonl --tokenizer ${WORK}/tokenizer/tokenizer.json --seq 160)
include(${CMAKE_CURRENT_LIST_DIR}/train_mpi_test.cmake)
