#include "launch/agent_tree.hpp"

#include <algorithm>

namespace cohort::detail {

std::vector<std::string> tree_path(int id, const std::vector<TreeMember>& members, int width) {
  std::vector<const TreeMember*> relays;
  for (const TreeMember& member : members) {
    if (!member.relay.empty()) relays.push_back(&member);
  }
  std::sort(relays.begin(), relays.end(),
            [](const TreeMember* a, const TreeMember* b) { return a->id < b->id; });
  const auto mine = std::find_if(relays.begin(), relays.end(),
                                 [id](const TreeMember* member) { return member->id == id; });
  std::vector<std::string> path;
  if (mine == relays.end()) return path;
  for (const std::size_t place :
       tree_ancestors(static_cast<std::size_t>(mine - relays.begin()) + 1, width)) {
    path.push_back(relays[place - 1]->relay);
  }
  return path;
}

std::size_t tree_place_ahead(int id, int store_node) {
  if (id < 0 || id == store_node) return 0;
  // The relays in order of their ids are every node rank but the store's.
  return static_cast<std::size_t>(id - (store_node >= 0 && id > store_node ? 1 : 0)) + 1;
}

int tree_parent_ahead(int id, int nnodes, int store_node, int width) {
  if (id >= nnodes) return -1;
  const std::size_t place = tree_place_ahead(id, store_node);
  if (place == 0) return -1;
  const std::vector<std::size_t> above = tree_ancestors(place, width);
  if (above.empty()) return -1;
  const int parent = static_cast<int>(above.front()) - 1;
  return parent + (store_node >= 0 && parent >= store_node ? 1 : 0);
}

std::vector<std::size_t> tree_ancestors(std::size_t place, int width) {
  std::vector<std::size_t> above;
  if (width < 1) return above;
  while (place > 0) {
    place = (place - 1) / static_cast<std::size_t>(width);
    if (place > 0) above.push_back(place);
  }
  return above;
}

bool tree_has_inner_nodes(int nnodes, int width) {
  // At most nnodes relays: every place past `width` has a parent that is a relay.
  return width >= 1 && nnodes > width;
}

}  // namespace cohort::detail
