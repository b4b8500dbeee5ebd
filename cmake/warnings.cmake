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
# GCC notes that passing a 64-byte vector by value changed ABI in GCC 4.6 wherever an AVX-512
# clone of a kernel passes one (src/kernels/lane_vector.hpp). The vectors cross no library
# boundary (the kernels' public functions take pointers), so the note says nothing that matters.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(shardwise_warnings INTERFACE -Wno-psabi)
endif()
