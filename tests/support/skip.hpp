// Skipping a test whose real tool is missing: with a printed reason on a
// developer's machine; as a failure in CI (CI=true), where nothing may be missing.
#pragma once

#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

namespace cohort::test {

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::strcmp(ci, "true") == 0;
}

}  // namespace cohort::test

/// Skips the current test with `reason`, or fails it under CI. Like
/// GTEST_SKIP, it returns from the function it is used in.
#define COHORT_SKIP_MISSING(reason)                                                   \
  do {                                                                                \
    if (::cohort::test::in_ci()) {                                                    \
      GTEST_FAIL() << reason << " -- CI must provide it (scripts/install-deps test)"; \
    } else {                                                                          \
      GTEST_SKIP() << reason;                                                         \
    }                                                                                 \
  } while (false)
