# The `hier` backend, when COHORT_WITH_HIER (shm and gloo) is on.
if(COHORT_WITH_HIER)
  target_sources(cohort_comm PRIVATE ${CMAKE_CURRENT_LIST_DIR}/backend.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/layout.cpp)
else()
  target_sources(cohort_comm PRIVATE ${CMAKE_CURRENT_LIST_DIR}/not_built.cpp)
endif()
