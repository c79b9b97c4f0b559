// Launch detection from an arbitrary environment (src/env/): lines
// NAME=VALUE, the variables of every launcher in any combination, and
// cohort run's COHORT_STORE_FD.
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include <cohort/errors.hpp>
#include <cohort/launch_env.hpp>

#include "fuzz/fuzz_target.hpp"
#include "store/inherited_socket.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(launch_env) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Environment env;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line = text.substr(start, end - start);
    const std::size_t equals = line.find('=');
    if (equals != std::string_view::npos) {
      env[std::string(line.substr(0, equals))] = std::string(line.substr(equals + 1));
    }
    start = end + 1;
  }
  if (auto fd = env.find("COHORT_STORE_FD"); fd != env.end()) {
    const std::optional<int> number = detail::parse_store_fd(fd->second);
    if (number && *number < 3) std::abort();  // never a standard stream
  }
  try {
    const LaunchInfo info = detect_launch(env);
    if (info.world_size.value < 1 || info.rank.value < 0 ||
        info.rank.value >= info.world_size.value) {
      std::abort();  // detection promises a consistent rank or an error
    }
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace cohort::fuzz
