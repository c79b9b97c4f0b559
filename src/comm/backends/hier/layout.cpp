#include "comm/backends/hier/layout.hpp"

#include <algorithm>
#include <map>

namespace cohort::detail::hier_backend {

bool HostLayout::uniform() const {
  return std::all_of(local_size.begin(), local_size.end(),
                     [&](int ranks) { return ranks == local_size.front(); });
}

HostLayout lay_out(const std::vector<std::string>& hosts) {
  HostLayout layout;
  std::map<std::string, int> numbers;
  for (const std::string& host : hosts) {
    const auto [at, added] = numbers.emplace(host, layout.nodes);
    if (added) {
      ++layout.nodes;
      layout.local_size.push_back(0);
    }
    layout.node_of.push_back(at->second);
    layout.local_index.push_back(layout.local_size[static_cast<std::size_t>(at->second)]++);
  }
  return layout;
}

}  // namespace cohort::detail::hier_backend
