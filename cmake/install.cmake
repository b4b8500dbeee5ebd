# `cmake --install` puts the headers, the library, the command and a package config in the
# prefix, so that other projects can find_package(shardwise) and link shardwise::shardwise.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS shardwise shardwise_core shardwise_kernels shardwise_training
        EXPORT shardwiseTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS shardwise_command RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The MPI backend has an export set of its own, loaded only where MPI is found.
if(TARGET shardwise_mpi)
  install(TARGETS shardwise_mpi EXPORT shardwiseMpiTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT shardwiseMpiTargets NAMESPACE shardwise::
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardwise)
  set_target_properties(shardwise_mpi PROPERTIES EXPORT_NAME mpi)
endif()
install(DIRECTORY include/shardwise DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT shardwiseTargets NAMESPACE shardwise::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardwise)

configure_package_config_file(cmake/shardwiseConfig.cmake.in
  ${PROJECT_BINARY_DIR}/shardwiseConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardwise)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/shardwiseConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/shardwiseConfig.cmake
              ${PROJECT_BINARY_DIR}/shardwiseConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardwise)
