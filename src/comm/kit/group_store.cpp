#include "comm/kit/group_store.hpp"

#include <algorithm>
#include <string>
#include <tuple>

#include "core/strings.hpp"
#include "store/exchange.hpp"

namespace cohort::detail {

std::optional<Subgroup> plan_split(const std::shared_ptr<Store>& store, int round, int rank,
                                   int size, int color, int key,
                                   std::chrono::milliseconds timeout) {
  const std::string prefix = cat("split/", round);
  store->set(cat(prefix, "/", rank), cat(color, " ", key));
  const std::vector<std::string> entries =  // one request
      store->multi_get(ranked_keys(prefix, static_cast<std::size_t>(size)), timeout);
  std::vector<std::tuple<int, int>> members;  // key, parent rank
  for (int r = 0; r < size; ++r) {
    const std::string& entry = entries[static_cast<std::size_t>(r)];
    const std::size_t space = entry.find(' ');
    if (std::stoi(entry.substr(0, space)) == color) {
      members.emplace_back(std::stoi(entry.substr(space + 1)), r);
    }
  }
  if (color < 0) return std::nullopt;
  std::sort(members.begin(), members.end());
  Subgroup group;
  group.size = static_cast<int>(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (std::get<1>(members[i]) == rank) group.rank = static_cast<int>(i);
  }
  group.store = std::make_shared<PrefixStore>(cat(prefix, "/color", color), store);
  return group;
}

bool everyone_done(Store& store, int rank, int size, std::chrono::milliseconds wait) noexcept {
  try {
    store.set(cat("done/", rank), "");
    std::vector<std::string> keys;
    keys.reserve(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r)
      keys.push_back(cat("done/", r));
    store.wait(keys, wait);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace cohort::detail
