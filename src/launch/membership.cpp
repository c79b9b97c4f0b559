#include "launch/membership.hpp"

#include <algorithm>

#include "core/strings.hpp"

namespace cohort::detail {

std::string RoundTable::encode() const {
  std::string id = run_id;
  std::replace_if(
      id.begin(), id.end(), [](char c) { return c == '\t' || c == '\n'; }, ' ');
  std::string text = cat(restarts, '\t', master_port, '\t', id, traced ? "\ttraced" : "");
  for (const Member& member : members)
    text += cat('\n', member.id, '\t', member.entry);
  return text;
}

std::optional<RoundTable> RoundTable::decode(const std::string& text) {
  const std::vector<std::string> lines = split_at(text, '\n');
  if (lines.empty()) return std::nullopt;
  const std::vector<std::string> head = split_at(lines[0], '\t');
  if (head.size() != 3 && (head.size() != 4 || head[3] != "traced")) return std::nullopt;
  const auto restarts = parse_int(head[0]);
  const auto port = parse_int(head[1]);
  if (!restarts || !port || *restarts < 0 || *restarts > 1 << 30 || *port < 0 || *port > 65535)
    return std::nullopt;
  RoundTable table;
  table.restarts = static_cast<int>(*restarts);
  table.master_port = static_cast<int>(*port);
  table.run_id = head[2];
  table.traced = head.size() == 4;
  std::set<int> seen;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::size_t tab = lines[i].find('\t');
    const auto id = parse_int(lines[i].substr(0, tab));
    if (tab == std::string::npos || !id || *id < 0 || *id > 1 << 30) return std::nullopt;
    if (!seen.insert(static_cast<int>(*id)).second) return std::nullopt;
    table.members.push_back({static_cast<int>(*id), lines[i].substr(tab + 1)});
  }
  return table;
}

int RoundTable::node_rank_of(int id) const {
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (members[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

std::vector<Member> choose_members(const std::vector<Member>& registered,
                                   const std::set<int>& previous, int max) {
  std::vector<Member> chosen;
  std::set<int> ids;
  for (const bool returning : {true, false}) {
    for (const Member& member : registered) {
      if (static_cast<int>(chosen.size()) >= max) break;
      if ((previous.count(member.id) != 0) != returning) continue;
      if (ids.insert(member.id).second) chosen.push_back(member);
    }
  }
  std::sort(chosen.begin(), chosen.end(),
            [](const Member& a, const Member& b) { return a.id < b.id; });
  return chosen;
}

}  // namespace cohort::detail
