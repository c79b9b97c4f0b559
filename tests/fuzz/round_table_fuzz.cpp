// The table of an elastic round that node 0 publishes in the job's store
// (src/launch/membership.cpp): every agent decodes it. Decoding must refuse
// what is not a table (and never crash), and a table it accepts must encode
// back to the same text and name each member once.
#include <cstdlib>
#include <set>
#include <string>

#include "fuzz/fuzz_target.hpp"
#include "launch/membership.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(round_table) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto table = detail::RoundTable::decode(text);
  if (!table) return 0;
  std::set<int> ids;
  for (const detail::Member& member : table->members) {
    if (!ids.insert(member.id).second) std::abort();
    if (table->node_rank_of(member.id) < 0) std::abort();
  }
  const auto again = detail::RoundTable::decode(table->encode());
  if (!again || again->encode() != table->encode()) std::abort();
  return 0;
}

}  // namespace cohort::fuzz
