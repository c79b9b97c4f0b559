// cohort's own settings from the environment (COHORT_*), typed, with the
// variable named in every error.
#pragma once

#include <chrono>
#include <cstddef>

namespace cohort::detail {

/// The duration in seconds (fractions allowed) in variable `name`, or
/// `fallback` when it is unset. Throws cohort::InvalidArgument naming the
/// variable and its value when it is not a non-negative number.
std::chrono::milliseconds seconds_from_env(const char* name, std::chrono::milliseconds fallback);

/// The byte count in variable `name` (parse_byte_size: "65536", "64K",
/// "1M"), or `fallback` when it is unset. Throws cohort::InvalidArgument like seconds_from_env.
std::size_t bytes_from_env(const char* name, std::size_t fallback);

}  // namespace cohort::detail
