// The --trace file's merge (src/launch/timeline.cpp): each node's part, as
// the job's store hands it over, whatever it holds.
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_target.hpp"
#include "launch/timeline.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(timeline) {
  const std::string part(reinterpret_cast<const char*>(data), size);
  const std::string merged = detail::Timeline::merge({part, "[]"}, {{"about", part}});
  // Whatever came in, the file is one JSON object with its events.
  const auto trace = nlohmann::json::parse(merged, nullptr, false);
  if (!trace.is_object() || !trace["traceEvents"].is_array()) std::abort();
  return 0;
}

}  // namespace cohort::fuzz
