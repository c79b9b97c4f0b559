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
    const detail::RunPlan plan = detail::decode_run_plan(text, "fuzz");
    // What was read is written back and read again alike.
    const std::string again = detail::encode_run_plan(plan);
    const detail::RunPlan back =
        detail::decode_run_plan(again.substr(again.find('\n') + 1), "fuzz");
    const RunOptions& a = plan.options;
    const RunOptions& b = back.options;
    if (b.command != a.command || b.job_token != a.job_token || b.hosts.size() != a.hosts.size() ||
        b.timeout != a.timeout || back.role.node_hosts != plan.role.node_hosts) {
      std::abort();
    }
  } catch (const InvalidArgument&) {
  }
  return 0;
}

}  // namespace cohort::fuzz
