# The `self` backend: always built.
target_sources(cohort_comm PRIVATE ${CMAKE_CURRENT_LIST_DIR}/backend.cpp)
