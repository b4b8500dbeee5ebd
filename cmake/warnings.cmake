# Warnings for every shardwise target; errors when SHARDWISE_WERROR is on (as in CI).
add_library(shardwise_warnings INTERFACE)
target_compile_options(shardwise_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow
                       -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual)
if(SHARDWISE_WERROR)
  target_compile_options(shardwise_warnings INTERFACE -Werror)
endif()
