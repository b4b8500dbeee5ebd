# Warnings for every shardwise target; errors when SHARDWISE_WERROR is on (as in CI).
add_library(shardwise_warnings INTERFACE)
target_compile_options(shardwise_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow
                       -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual)
if(SHARDWISE_WERROR)
  target_compile_options(shardwise_warnings INTERFACE -Werror)
endif()
# GCC 12 reports false -Wrestrict overlaps inside std::string's operator+ at -O2 (GCC bug
# 105651, fixed in GCC 13); the warning has found nothing real here.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(shardwise_warnings INTERFACE -Wno-restrict)
endif()
