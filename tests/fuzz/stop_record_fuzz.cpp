// Why a job stops, as an agent wrote it in the job's store
// (src/launch/stop_record.cpp): what decodes encodes to what decodes the same.
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_target.hpp"
#include "launch/stop_record.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(stop_record) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const auto record = detail::StopRecord::decode(input);
  if (!record) return 0;
  const auto again = detail::StopRecord::decode(record->encode());
  if (!again || again->encode() != record->encode() || again->node != record->node ||
      again->rank != record->rank || again->exit_code != record->exit_code ||
      again->node_lost != record->node_lost || again->membership != record->membership) {
    std::abort();
  }
  return 0;
}

}  // namespace cohort::fuzz
