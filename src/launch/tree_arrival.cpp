#include "launch/tree_arrival.hpp"

#include <cohort/errors.hpp>

#include "core/strings.hpp"
#include "launch/agent_tree.hpp"
#include "launch/node_group_keys.hpp"

namespace cohort::detail {

std::string tree_place_entry(const StoreServer::Hop& relay) {
  return cat(relay.host, '\t', relay.port, '\t', relay.name);
}

StoreServer::Hop tree_place_hop(const std::string& entry) {
  const std::vector<std::string> fields = split_at(entry, '\t');
  if (fields.size() != 3 || fields[0].empty()) return {};
  const std::optional<std::int64_t> port = parse_int(fields[1]);
  if (!port || *port <= 0 || *port > 65535) return {};
  return {fields[0], static_cast<int>(*port), fields[2]};
}

TreeArrival arrive_in_tree(StoreClient& store, const StoreServer::Hop& relay, std::int64_t place,
                           int width, std::chrono::milliseconds patience) {
  TreeArrival arrival;
  arrival.place = place > 0 ? place : store.add(node_keys::kTreeArrivals, 1);
  const std::string mine = node_keys::tree_place_key(arrival.place);
  store.run(StoreClient::Batch().set(mine, tree_place_entry(relay)).set_on_close(mine, ""));
  std::vector<std::string> keys;
  for (const std::size_t above : tree_ancestors(static_cast<std::size_t>(arrival.place), width))
    keys.push_back(node_keys::tree_place_key(static_cast<std::int64_t>(above)));
  if (keys.empty()) return arrival;
  std::vector<std::string> entries;
  try {
    entries = store.multi_get(keys, patience);
  } catch (const Timeout&) {
    // Those published by now; the others are passed over.
    for (const std::string& key : keys)
      entries.push_back(store.check({key}) ? store.get(key, patience) : "");
  }
  for (const std::string& entry : entries) {
    StoreServer::Hop hop = tree_place_hop(entry);
    if (hop.port > 0) arrival.path.push_back(std::move(hop));
  }
  return arrival;
}

}  // namespace cohort::detail
