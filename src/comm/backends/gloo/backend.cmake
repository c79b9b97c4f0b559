# The `gloo` backend, when COHORT_WITH_GLOO (libgloo-dev) is on.
if(COHORT_WITH_GLOO)
  target_sources(cohort_comm PRIVATE ${CMAKE_CURRENT_LIST_DIR}/backend.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/legacy_allreduce.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/sync_pairs.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/fast_close.cpp)
  target_link_libraries(cohort_comm PRIVATE gloo)
  cohort_config_dependency("find_dependency(Gloo)")
else()
  target_sources(cohort_comm PRIVATE ${CMAKE_CURRENT_LIST_DIR}/not_built.cpp)
endif()
