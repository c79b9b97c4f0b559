# `make install` / `cmake --install`: the CLI, the libraries, the public headers
# and a package config, so that users write
#   find_package(cohort REQUIRED)
#   target_link_libraries(app PRIVATE cohort::cohort)   # + cohort::torch with LibTorch
include(CMakePackageConfigHelpers)

install(TARGETS cohort_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS cohort cohort_core cohort_env cohort_store cohort_bootstrap cohort_comm
                cohort_launch
        EXPORT cohortTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# cohort::torch, when built: its users find LibTorch through this package.
if(COHORT_WITH_TORCH)
  install(TARGETS cohort_torch EXPORT cohortTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()
install(DIRECTORY include/cohort ${PROJECT_BINARY_DIR}/include/cohort
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
install(EXPORT cohortTargets NAMESPACE cohort::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cohort)
# What the backends' imported targets need found again by users of the package
# (each backend.cmake appends its lines to COHORT_CONFIG_DEPENDENCIES).
get_property(dependency_lines GLOBAL PROPERTY COHORT_CONFIG_DEPENDENCIES)
string(JOIN "\n" COHORT_BACKEND_DEPENDENCIES ${dependency_lines})
configure_package_config_file(cmake/cohortConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cohortConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cohort)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cohortConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cohortConfig.cmake
              ${PROJECT_BINARY_DIR}/cohortConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cohort)
