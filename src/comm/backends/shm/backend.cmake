# The `shm` backend, when COHORT_WITH_SHM (Linux) is on.
if(COHORT_WITH_SHM)
  target_sources(cohort_comm PRIVATE ${CMAKE_CURRENT_LIST_DIR}/backend.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/segment.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/waiting.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/group.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/collectives.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/shared_memory.cpp)
  # The copies and reductions of large messages are its hot loops.
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/collectives.cpp
                              PROPERTIES COMPILE_OPTIONS "-O3")
else()
  target_sources(cohort_comm PRIVATE ${CMAKE_CURRENT_LIST_DIR}/not_built.cpp)
endif()
