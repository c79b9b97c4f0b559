#include "launch/stop_record.hpp"

#include <vector>

#include "core/strings.hpp"

namespace cohort::detail {

std::string StopRecord::encode() const {
  std::string clean = summary;
  for (char& c : clean)
    if (c == '\t' || c == '\n') c = ' ';
  return cat(node, '\t', host, '\t', rank, '\t', exit_code, '\t',
             node_lost    ? 1
             : membership ? 2
                          : 0,
             '\t', clean);
}

std::optional<StopRecord> StopRecord::decode(const std::string& text) {
  const std::vector<std::string> fields = split_at(text, '\t');
  if (fields.size() != 6) return std::nullopt;
  auto node = parse_int(fields[0]);
  auto rank = parse_int(fields[2]);
  auto code = parse_int(fields[3]);
  if (!node || !rank || !code) return std::nullopt;
  StopRecord record;
  record.node = static_cast<int>(*node);
  record.host = fields[1];
  record.rank = static_cast<int>(*rank);
  record.exit_code = static_cast<int>(*code);
  record.node_lost = fields[4] == "1";
  record.membership = fields[4] == "2";
  record.summary = fields[5];
  return record;
}

bool RestartBudget::restartable(const StopRecord& stop, int used, int round_size) const noexcept {
  if (stop.membership) return elastic;
  if (stop.node_lost) return elastic && round_size - 1 >= min_nodes;
  return stop.rank >= 0 && used < max_restarts;
}

}  // namespace cohort::detail
