// Elastic membership (`cohort run --nnodes MIN:MAX`): which agents take part
// in each round of the job, and how the agent that serves the store tells
// the others. Every restart is a new round; an agent that registers for a
// round after it closed waits for the next one.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cohort::detail {

/// An agent registered for a round: its stable id (its node rank at the
/// first rendezvous, or its order of arrival) and its rendezvous entry
/// ("nproc\thost\tpid\tnode").
struct Member {
  int id = 0;
  std::string entry;
};

/// A closed round, as the coordinator publishes it.
struct RoundTable {
  int restarts = 0;     ///< restarts for failures before this round (TORCHELASTIC_RESTART_COUNT)
  int master_port = 0;  ///< the workers' MASTER_PORT in this round
  std::string run_id;
  /// Whoever serves the store writes the job's timeline (--trace): every
  /// member records and publishes its events (Placement::traced).
  bool traced = false;
  std::vector<Member> members;  ///< in node rank order

  /// One line of "restarts\tmaster_port\trun_id", and "\ttraced" when
  /// traced, then one "id\tentry" per member. Tabs and newlines in run_id
  /// become spaces; an entry holds none.
  std::string encode() const;
  /// nullopt unless `text` is such a table (fuzzed: tests/fuzz).
  static std::optional<RoundTable> decode(const std::string& text);
  /// The node rank of agent `id` in this round, or -1 when it is not in it.
  int node_rank_of(int id) const;
};

/// Who takes part in a round from those `registered` (in order of
/// registration): the members of the round before (`previous`) first, then
/// newcomers in order of arrival, at most `max`; in id order, so that the
/// coordinator (id 0) is node 0 and the survivors keep their relative order.
std::vector<Member> choose_members(const std::vector<Member>& registered,
                                   const std::set<int>& previous, int max);

}  // namespace cohort::detail
