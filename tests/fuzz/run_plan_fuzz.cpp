// `cohort agent`'s plan on standard input (src/launch/run_plan.cpp): what a
// launcher of any cohort version, or anything else, writes to it.
#include <cstdlib>
#include <string_view>

#include <cohort/errors.hpp>

#include "fuzz/fuzz_target.hpp"
#include "launch/run_plan.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(run_plan) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const RunOptions options = detail::decode_run_plan(text, "fuzz");
    // What was read is written back and read again alike.
    const std::string again = detail::encode_run_plan(options);
    const RunOptions back = detail::decode_run_plan(again.substr(again.find('\n') + 1), "fuzz");
    if (back.command != options.command || back.job_token != options.job_token ||
        back.hosts.size() != options.hosts.size() || back.timeout != options.timeout) {
      std::abort();
    }
  } catch (const InvalidArgument&) {
  }
  return 0;
}

}  // namespace cohort::fuzz
