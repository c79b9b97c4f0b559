// Every rank's "host pid" entry as another rank reads it (from the store, or
// through MPI; src/comm/kit/peers.cpp), one per line of the input: read
// without a crash, whatever a peer wrote. Only the parsing is driven: no
// process is looked up.
#include <string>
#include <vector>

#include "comm/kit/peers.hpp"
#include "fuzz/fuzz_target.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(peer_entries) {
  std::vector<std::string> entries(1);
  for (std::size_t i = 0; i < size && entries.size() < 4096; ++i) {
    if (data[i] == '\n') {
      entries.emplace_back();
    } else {
      entries.back().push_back(static_cast<char>(data[i]));
    }
  }
  const detail::Peers peers(0, entries);
  (void)peers.any_on_this_host();
  return 0;
}

}  // namespace cohort::fuzz
