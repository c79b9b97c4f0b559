# `make install` / `cmake --install`, and the package `make package` builds:
# the CLI, the libraries, the public headers, a CMake package, a pkg-config
# file, the man page and bash completion. Users write
#   find_package(cohort REQUIRED)                     # or COMPONENTS torch
#   target_link_libraries(app PRIVATE cohort::cohort) # + cohort::torch
# or `pkg-config --cflags --libs cohort`. Everything installed finds the rest
# relative to itself: the tree can move (RPATH $ORIGIN, a relocatable
# package config).
include(CMakePackageConfigHelpers)

set(_cohort_parts cohort_core cohort_env cohort_store cohort_bootstrap cohort_comm cohort_launch)
if(COHORT_WITH_TORCH)
  list(APPEND _cohort_parts cohort_torch)
endif()
# Libraries find each other beside themselves, cohort-comm finds them from
# libexec/cohort. `cohort` links the parts' code in (src/cli/CMakeLists.txt)
# and needs no path: with one, the loader looked for libm and libc in 20
# subdirectories of it first, 40 failed system calls at every start.
set_target_properties(${_cohort_parts} PROPERTIES INSTALL_RPATH "$ORIGIN")
file(RELATIVE_PATH _cohort_tools_to_lib ${CMAKE_INSTALL_FULL_LIBEXECDIR}/cohort
     ${CMAKE_INSTALL_FULL_LIBDIR})
set_target_properties(cohort_comm_tools PROPERTIES INSTALL_RPATH "$ORIGIN/${_cohort_tools_to_lib}")
# The build tree has the install layout (CMakeLists.txt): build with the
# install RPATH, never with a padded one. An absolute libdir outside the
# prefix has no such mirror, and keeps CMake's edit at install.
if(NOT IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set_target_properties(${_cohort_parts} cohort_cli cohort_comm_tools
                        PROPERTIES BUILD_WITH_INSTALL_RPATH ON)
endif()

install(TARGETS cohort_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# `cohort env` and `cohort bench` (src/cli/CMakeLists.txt).
install(TARGETS cohort_comm_tools RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/cohort)
install(TARGETS cohort ${_cohort_parts}
        EXPORT cohortTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# torch.hpp only with the library behind it.
if(COHORT_WITH_TORCH)
  set(_cohort_header_exclude "")
else()
  set(_cohort_header_exclude PATTERN torch.hpp EXCLUDE)
endif()
install(DIRECTORY include/cohort ${PROJECT_BINARY_DIR}/include/cohort
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp"
        ${_cohort_header_exclude})
install(EXPORT cohortTargets NAMESPACE cohort::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cohort)

# What the exported targets need found again: for static libraries, each
# part's private dependencies (src/CMakeLists.txt, cohort_config_dependency).
if(BUILD_SHARED_LIBS)
  set(COHORT_BACKEND_DEPENDENCIES "# Shared libraries: their own dependencies come with them.")
else()
  get_property(_cohort_dependency_lines GLOBAL PROPERTY COHORT_CONFIG_DEPENDENCIES)
  list(REMOVE_DUPLICATES _cohort_dependency_lines)
  string(JOIN "\n" COHORT_BACKEND_DEPENDENCIES ${_cohort_dependency_lines})
endif()
configure_package_config_file(cmake/cohortConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cohortConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cohort)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cohortConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cohortConfig.cmake
              ${PROJECT_BINARY_DIR}/cohortConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cohort)

# pkg-config: the umbrella's libraries, in link order (users before what they use).
set(COHORT_PC_LIBS "-lcohort_launch -lcohort_comm -lcohort_bootstrap -lcohort_store -lcohort_env -lcohort_core")
if(NOT BUILD_SHARED_LIBS)
  set(COHORT_PC_PRIVATE "Libs.private: -lpthread -lcrypto -lzstd")
endif()
file(RELATIVE_PATH COHORT_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" COHORT_PC_TO_PREFIX "${COHORT_PC_TO_PREFIX}")
configure_file(packaging/cohort.pc.in ${PROJECT_BINARY_DIR}/cohort.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cohort.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Bash completion: asks the installed `cohort` for its subcommands and options
# when completing, so it cannot drift from the CLI.
install(FILES packaging/bash-completion/cohort
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)

# cohort(1), generated from the CLI's own --help (help2man), a section per
# subcommand. Without help2man the build goes on and installs no page.
find_program(HELP2MAN help2man)
if(HELP2MAN)
  set(COHORT_MANPAGE ${PROJECT_BINARY_DIR}/share/man/man1/cohort.1)
  add_custom_command(OUTPUT ${COHORT_MANPAGE}
    COMMAND ${PROJECT_SOURCE_DIR}/packaging/make-manpage $<TARGET_FILE:cohort_cli> ${COHORT_MANPAGE}
    DEPENDS cohort_cli ${PROJECT_SOURCE_DIR}/packaging/make-manpage
    COMMENT "Generating cohort(1) from cohort --help")
  add_custom_target(cohort_manpage ALL DEPENDS ${COHORT_MANPAGE})
  install(FILES ${COHORT_MANPAGE} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "help2man not found: no man page (scripts/install-deps build installs it)")
endif()

include(cmake/CohortPackage.cmake)
