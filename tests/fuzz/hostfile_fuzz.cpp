// `cohort run --hostfile FILE` (src/launch/ssh_launch.cpp): lines
// `host [slots=N]`, comments, blank lines.
#include <cstdlib>
#include <string_view>

#include <cohort/errors.hpp>

#include "fuzz/fuzz_target.hpp"
#include "launch/ssh_launch.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(hostfile) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    for (const RunOptions::Host& host : detail::parse_hostfile(text, "fuzz")) {
      if (host.name.empty() || host.slots < 0) std::abort();
    }
  } catch (const InvalidArgument&) {
  }
  return 0;
}

}  // namespace cohort::fuzz
