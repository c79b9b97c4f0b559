# Optional parts: how a missing or half-installed package turns a part off
# without ever failing the configure, and without a stale "not found".
#
# COHORT_WITH_<NAME> is AUTO (the default: built when its package is found),
# ON (missing is an error, never a silent downgrade) or OFF. With
# COHORT_REQUIRE_ALL_PARTS=ON (what .ci/run sets through `make test STRICT=ON`)
# every AUTO part must be found: a missing one fails the configure, naming its
# package.
#
# A part that was not found is probed again at the next configure: the cache
# entries its probe left (FindMPI caches its failed test compile, for one) are
# forgotten first, so packages can be installed in any order.

option(COHORT_REQUIRE_ALL_PARTS
       "Fail the configure when an optional part set to AUTO is not found (CI)" OFF)
set(COHORT_PARTS_BUILT "")
set(COHORT_PARTS_LEFT_OUT "")

# cohort_forget_failed_probe(<NAME> PREFIXES <prefix>... [KEEP <entry>...]):
# unless <NAME> was found at the last configure, drops every cache entry
# whose name starts with one of the prefixes, so that its probe runs again
# from scratch; KEEP names the entries a user sets (a compiler's path).
function(cohort_forget_failed_probe name)
  cmake_parse_arguments(ARG "" "" "PREFIXES;KEEP" ${ARGN})
  if(_COHORT_FOUND_${name})
    return()
  endif()
  get_property(entries DIRECTORY "${PROJECT_SOURCE_DIR}" PROPERTY CACHE_VARIABLES)
  foreach(entry IN LISTS entries)
    if(entry IN_LIST ARG_KEEP)
      continue()
    endif()
    foreach(prefix IN LISTS ARG_PREFIXES)
      string(FIND "${entry}" "${prefix}" at)
      if(at EQUAL 0)
        unset(${entry} CACHE)
      endif()
    endforeach()
  endforeach()
endfunction()

# cohort_optional(<NAME> <found> <debian package> <what it builds> [WHY <reason>])
#   -> COHORT_WITH_<NAME> 0|1, and `#define COHORT_WITH_<NAME> 0|1` in
#   cohort/config.hpp. A part left out prints one line naming the package
#   (and WHY, when the probe knows more than "not found").
function(cohort_optional name found package description)
  cmake_parse_arguments(ARG "" "WHY" "" ${ARGN})
  set(COHORT_WITH_${name} AUTO CACHE STRING "${description} (${package}): AUTO, ON or OFF")
  set_property(CACHE COHORT_WITH_${name} PROPERTY STRINGS AUTO ON OFF)
  set(_COHORT_FOUND_${name} "${found}" CACHE INTERNAL "Whether ${name}'s probe succeeded")
  set(why "${ARG_WHY}")
  if(NOT why)
    set(why "${package} is not installed")
  endif()
  set(wanted "${COHORT_WITH_${name}}")
  string(TOLOWER "${name}" part)
  if(wanted STREQUAL "AUTO" AND COHORT_REQUIRE_ALL_PARTS AND NOT found)
    message(FATAL_ERROR "cohort: ${part} is required (COHORT_REQUIRE_ALL_PARTS, as in CI) but "
                        "${why}: run `scripts/install-deps test`, or configure with "
                        "-DCOHORT_WITH_${name}=OFF")
  elseif(wanted STREQUAL "AUTO")
    set(wanted ${found})
    if(NOT found AND why MATCHES "not installed")
      message(STATUS "cohort: ${part} left out: ${why} (scripts/install-deps test installs it)")
    elseif(NOT found)
      message(STATUS "cohort: ${part} left out: ${why}")
    endif()
  elseif(wanted AND NOT found)
    message(FATAL_ERROR "COHORT_WITH_${name}=${COHORT_WITH_${name}} but ${why}: install "
                        "${package} (scripts/install-deps test), or configure with "
                        "-DCOHORT_WITH_${name}=OFF")
  endif()
  if(wanted)
    set(flag 1)
    set(COHORT_PARTS_BUILT "${COHORT_PARTS_BUILT} ${part}" PARENT_SCOPE)
  else()
    set(flag 0)
    set(COHORT_PARTS_LEFT_OUT "${COHORT_PARTS_LEFT_OUT} ${part}" PARENT_SCOPE)
  endif()
  # A normal variable: shadows the cache's AUTO for the rest of the project.
  set(COHORT_WITH_${name} ${flag} PARENT_SCOPE)
  set(COHORT_FEATURE_FLAGS "${COHORT_FEATURE_FLAGS}#define COHORT_WITH_${name} ${flag}\n"
      PARENT_SCOPE)
endfunction()

# cohort_probe_gloo(<found-var> <why-var>): Gloo's CMake package
# (libgloo-dev), and its headers where its target says they are. A macro: the
# imported target `gloo` must reach src/comm.
macro(cohort_probe_gloo found_var why_var)
  set(${found_var} OFF)
  set(${why_var} "")
  find_package(Gloo CONFIG QUIET)
  if(Gloo_FOUND)
    get_target_property(_cohort_gloo_includes gloo INTERFACE_INCLUDE_DIRECTORIES)
    find_file(_cohort_gloo_header gloo/config.h PATHS ${_cohort_gloo_includes} NO_DEFAULT_PATH
              NO_CACHE)
    if(_cohort_gloo_header)
      set(${found_var} ON)
    else()
      string(CONCAT ${why_var} "GlooConfig.cmake is in ${Gloo_DIR} but <gloo/config.h> is not "
                    "in its include directories (half-installed)")
    endif()
  endif()
endmacro()

# cohort_probe_mpi(<found-var> <why-var>): Open MPI's (or MPICH's) C++ API.
# FindMPI is only asked once the wrapper compiler can preprocess <mpi.h>:
# with openmpi-bin but not libopenmpi-dev, `mpicxx` exists and FindMPI's own
# test compile stops the whole configure (its imported target names an
# include directory that is not there).
function(cohort_probe_mpi found_var why_var)
  set(${found_var} OFF PARENT_SCOPE)
  if(COHORT_WITH_MPI STREQUAL "OFF")
    return()
  endif()
  cohort_forget_failed_probe(MPI PREFIXES MPI_ MPIEXEC_ KEEP MPI_CXX_COMPILER MPIEXEC_EXECUTABLE)
  if(MPI_CXX_COMPILER)
    set(wrapper "${MPI_CXX_COMPILER}")
  else()
    find_program(wrapper NAMES mpicxx mpic++ mpiCC NO_CACHE)
  endif()
  if(NOT wrapper)
    set(${why_var} "no MPI C++ compiler wrapper (mpicxx): libopenmpi-dev is not installed"
        PARENT_SCOPE)
    return()
  endif()
  set(probe "${PROJECT_BINARY_DIR}/CMakeFiles/cohort_mpi_probe.cpp")
  file(WRITE "${probe}" "#include <mpi.h>\n")
  execute_process(COMMAND "${wrapper}" -E "${probe}" RESULT_VARIABLE status
                  OUTPUT_QUIET ERROR_QUIET)
  if(NOT status EQUAL 0)
    set(${why_var} "${wrapper} cannot find <mpi.h>: libopenmpi-dev is not installed"
        PARENT_SCOPE)
    return()
  endif()
  set(MPI_CXX_SKIP_MPICXX ON)  # MPI's C API from C++; not the deprecated C++ bindings
  find_package(MPI QUIET COMPONENTS CXX)
  if(NOT MPI_CXX_FOUND)
    set(${why_var} "FindMPI found no working MPI for C++ with ${wrapper} (libopenmpi-dev)"
        PARENT_SCOPE)
    return()
  endif()
  set(${found_var} ON PARENT_SCOPE)
endfunction()

# cohort_pkg_config_probe(<prefix> <module>): pkg_check_modules, which probes
# again by itself when the module was not found last time, and creates
# PkgConfig::<prefix>. Sets <prefix>_USABLE, and <prefix>_WHY when it is not:
# a .pc file whose include directories are not there. pkg-config itself is
# required (CMakeLists.txt: libzstd is found through it).
macro(cohort_pkg_config_probe prefix module)
  set(${prefix}_USABLE OFF)
  set(${prefix}_WHY "")
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${module})
  if(${prefix}_FOUND)
    set(${prefix}_USABLE ON)
    foreach(_cohort_dir IN LISTS ${prefix}_INCLUDE_DIRS)
      if(NOT IS_DIRECTORY "${_cohort_dir}")
        set(${prefix}_USABLE OFF)
        set(${prefix}_WHY "${module}.pc names ${_cohort_dir}, which is not there (half-installed)")
      endif()
    endforeach()
  endif()
endmacro()

# cohort_report_parts(): one line of what this build has and lacks.
function(cohort_report_parts)
  string(STRIP "${COHORT_PARTS_BUILT}" built)
  string(STRIP "${COHORT_PARTS_LEFT_OUT}" left_out)
  if(left_out)
    message(STATUS "cohort: optional parts built: ${built}; left out: ${left_out}")
  else()
    message(STATUS "cohort: optional parts built: ${built} (all of them)")
  endif()
endfunction()

# cohort_probe_torch(<found-var> <why-var>): LibTorch's CMake package
# (libtorch-dev). Its config stops the configure with FATAL_ERROR when one of
# its own dependencies is missing (gflags, glog, protobuf), so until it has
# been found once a separate CMake process tries it first. A macro: the
# imported targets find_package(Torch) makes must reach src/torch.
macro(cohort_probe_torch found_var why_var)
  set(${found_var} OFF)
  set(${why_var} "")
  if(NOT COHORT_WITH_TORCH STREQUAL "OFF")
    cohort_forget_failed_probe(TORCH PREFIXES Torch_ TORCH_ Caffe2_ C10_ KEEP Torch_DIR)
    set(_cohort_torch_probed ON)
    if(NOT _COHORT_FOUND_TORCH)
      set(_cohort_probe_dir "${PROJECT_BINARY_DIR}/CMakeFiles/cohort_torch_probe")
      file(MAKE_DIRECTORY "${_cohort_probe_dir}")
      file(WRITE "${_cohort_probe_dir}/CMakeLists.txt"
           "cmake_minimum_required(VERSION 3.25)\nproject(probe LANGUAGES CXX)\n"
           "find_package(Torch REQUIRED)\n")
      execute_process(COMMAND "${CMAKE_COMMAND}" -S "${_cohort_probe_dir}"
                              -B "${_cohort_probe_dir}/build"
                              -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
                      RESULT_VARIABLE _cohort_probe_status OUTPUT_QUIET
                      ERROR_VARIABLE _cohort_probe_error)
      file(REMOVE_RECURSE "${_cohort_probe_dir}")
      if(NOT _cohort_probe_status EQUAL 0)
        set(_cohort_torch_probed OFF)
        if(_cohort_probe_error MATCHES "Could not find a package configuration file")
          set(${why_var} "libtorch-dev is not installed")
        else()
          string(REGEX REPLACE "[ \n\t;]+" " " _cohort_probe_error "${_cohort_probe_error}")
          string(SUBSTRING "${_cohort_probe_error}" 0 300 _cohort_probe_error)
          string(CONCAT ${why_var} "LibTorch's CMake package failed (${_cohort_probe_error}...): "
                        "reinstall libtorch-dev")
        endif()
      endif()
    endif()
    if(_cohort_torch_probed)
      find_package(Torch QUIET)
      if(NOT Torch_FOUND)
        set(${why_var} "libtorch-dev is not installed")
      elseif(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 15)
        # c10::IValue is incomplete inside std::vector there: LibTorch 1.13's
        # headers do not compile as C++20 with clang 14's libstdc++ checks.
        string(CONCAT ${why_var} "clang ${CMAKE_CXX_COMPILER_VERSION} cannot compile LibTorch's "
                      "headers as C++20 (build with g++ for cohort::torch)")
      else()
        set(${found_var} ON)
      endif()
    endif()
  endif()
endmacro()

# cohort_load_at_run_time(<target> <macro> LIBRARY <file> INCLUDES <dir>...):
# <target> uses the library <file> through
# dlopen when it first needs it (core/shared_library.hpp) instead of linking
# it: its headers only, <macro> defined as the file to load, the library's
# directory and soname ("/usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so.2", so
# that a newer build of the same ABI loads), and <macro>_PACKAGE as the
# Debian package that has it (the soname where dpkg does not know it).
# dpkg-shlibdeps cannot see such a library: the package recommends it
# (COHORT_RUN_TIME_RECOMMENDS).
function(cohort_load_at_run_time target macro)
  cmake_parse_arguments(LOAD "" "LIBRARY" "INCLUDES" ${ARGN})
  execute_process(COMMAND ${CMAKE_OBJDUMP} -p "${LOAD_LIBRARY}" OUTPUT_VARIABLE dynamic
                  RESULT_VARIABLE status)
  if(NOT status EQUAL 0 OR NOT dynamic MATCHES "SONAME +([^\n]+)")
    message(FATAL_ERROR "cohort: cannot read the soname of ${LOAD_LIBRARY} (objdump -p)")
  endif()
  set(soname "${CMAKE_MATCH_1}")
  get_filename_component(directory "${LOAD_LIBRARY}" DIRECTORY)
  set(package "${soname}")
  execute_process(COMMAND dpkg-query -S "${directory}/${soname}" OUTPUT_VARIABLE owner
                  RESULT_VARIABLE status ERROR_QUIET)
  if(status EQUAL 0 AND owner MATCHES "^([^:,]+)")
    set(package "${CMAKE_MATCH_1}")
    set_property(GLOBAL APPEND PROPERTY COHORT_RUN_TIME_RECOMMENDS ${package})
  endif()
  target_include_directories(${target} SYSTEM PRIVATE ${LOAD_INCLUDES})
  target_compile_definitions(${target} PRIVATE ${macro}="${directory}/${soname}"
                                               ${macro}_PACKAGE="${package}")
endfunction()
