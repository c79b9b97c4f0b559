// Slurm hostlists from the environment and the command line
// (src/env/hostlist.cpp): expand, then compress and expand again, which must
// give back the same hosts; summarize must count them and begin them alike.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>

#include <cohort/errors.hpp>
#include <cohort/launch_env.hpp>

#include "fuzz/fuzz_target.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(hostlist) {
  const std::string_view expression(reinterpret_cast<const char*>(data), size);
  // Bounded so that an input costs microseconds, not the second a million
  // hosts take: the bound itself is checked before any host is made.
  constexpr std::size_t kBound = 256;
  std::vector<std::string> hosts;
  try {
    hosts = cohort::hostlist::expand(expression, kBound);
  } catch (const InvalidArgument&) {
    return 0;
  }
  if (hosts.size() > kBound) std::abort();
  const cohort::hostlist::Summary summary = cohort::hostlist::summarize(expression, 3);
  if (summary.count != hosts.size() ||
      !std::equal(
          summary.hosts.begin(), summary.hosts.end(), hosts.begin(),
          hosts.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(3, hosts.size())))) {
    std::abort();
  }
  std::string compressed;
  try {
    compressed = cohort::hostlist::compress(hosts);
  } catch (const InvalidArgument&) {
    return 0;  // a name with hostlist syntax in it (only from names that are not expanded)
  }
  if (cohort::hostlist::expand(compressed) != hosts) std::abort();
  return 0;
}

}  // namespace cohort::fuzz
