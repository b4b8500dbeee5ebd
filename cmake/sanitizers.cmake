# SHARDWISE_SANITIZE="address;undefined" or "thread" instruments everything that is built.
if(SHARDWISE_SANITIZE)
  list(JOIN SHARDWISE_SANITIZE "," _shardwise_sanitizers)
  add_compile_options(-fsanitize=${_shardwise_sanitizers} -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=${_shardwise_sanitizers})
  if("undefined" IN_LIST SHARDWISE_SANITIZE)
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()
