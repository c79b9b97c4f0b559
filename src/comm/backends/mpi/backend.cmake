# The `mpi` backend, when COHORT_WITH_MPI (libopenmpi-dev, or MPICH's) is on.
if(COHORT_WITH_MPI)
  target_sources(cohort_comm PRIVATE ${CMAKE_CURRENT_LIST_DIR}/backend.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/runtime.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/element_types.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/lost_record.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/staged_buffers.cpp)
  target_link_libraries(cohort_comm PRIVATE MPI::MPI_CXX)
  cohort_config_dependency("set(MPI_CXX_SKIP_MPICXX ON)" "find_dependency(MPI COMPONENTS CXX)")
else()
  target_sources(cohort_comm PRIVATE ${CMAKE_CURRENT_LIST_DIR}/not_built.cpp)
endif()
