// TORCHELASTIC_ERROR_FILE contents, written by any worker (src/launch/error_file.cpp).
#include <cstdlib>
#include <string_view>

#include "fuzz/fuzz_target.hpp"
#include "launch/error_file.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(error_file) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto error = detail::parse_error_file(input, 3);
  // At most 3 frames of at most 2 lines each.
  if (error && error->frames.size() > 6) std::abort();
  return 0;
}

}  // namespace cohort::fuzz
