// A place of the agents' tree as a relay publishes it in the job's store
// (src/launch/tree_arrival.cpp): every relay that arrives after it decodes
// it. Decoding must refuse what is not an entry (and never crash), and an
// entry it accepts must encode back to the same hop.
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_target.hpp"
#include "launch/tree_arrival.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(tree_place) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const StoreServer::Hop hop = detail::tree_place_hop(text);
  if (hop.port == 0) return 0;
  if (hop.host.empty() || hop.port < 0 || hop.port > 65535) std::abort();
  const StoreServer::Hop again = detail::tree_place_hop(detail::tree_place_entry(hop));
  if (again.host != hop.host || again.port != hop.port || again.name != hop.name) std::abort();
  return 0;
}

}  // namespace cohort::fuzz
