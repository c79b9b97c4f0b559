// Which backend a test should see chosen, by this build's options.
#pragma once

#include <cohort/config.hpp>

namespace cohort::test {

/// The backend cohort::init() picks for several ranks on one host: shm where
/// it is built, else gloo.
inline constexpr const char* kOneHostBackend = COHORT_WITH_SHM ? "shm" : "gloo";

}  // namespace cohort::test
