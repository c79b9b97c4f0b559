// Why a job stops, as the first agent (or launcher) to know wrote it in
// the job's store, where every node reads it; and the job's restart budget,
// which decides from it whether every node restarts.
#pragma once

#include <optional>
#include <string>

namespace cohort::detail {

/// Why the job stops, as the first agent to know wrote it. Encoded in the
/// store as tab-separated fields.
struct StopRecord {
  int node = -1;  ///< node rank where it happened; -1 for the coordinator
  std::string host;
  int rank = -1;            ///< the failed worker's global rank, -1 when no worker failed
  int exit_code = 1;        ///< what every agent exits with
  bool node_lost = false;   ///< `node` itself is gone (no heartbeat): nobody waits for it
  bool membership = false;  ///< an agent waits to join: the job restarts to take it in
  std::string summary;      ///< one line: "rank 5 failed: exit code 3"

  std::string encode() const;
  static std::optional<StopRecord> decode(const std::string& text);
};

/// The job's restart rules, one for every form (one node, several, elastic):
/// the same answer on every node.
struct RestartBudget {
  int max_restarts = 0;  ///< --max-restarts, for the whole job
  bool elastic = false;  ///< --nnodes MIN:MAX
  int min_nodes = 0;

  /// Whether the job restarts after `stop`, its attempt's first stop, with
  /// `used` restarts for failures so far and `round_size` nodes in the
  /// attempt: a worker failed (not a signal, the timeout, a node) and the
  /// budget has one left; or, elastic, a node waits to join, or one was lost
  /// and at least min_nodes remain (neither uses the budget).
  bool restartable(const StopRecord& stop, int used, int round_size) const noexcept;
  /// Whether a stop may still restart the job: then every agent waits for
  /// the others at the end of an attempt.
  bool may_restart(int used) const noexcept { return elastic || used < max_restarts; }
};

}  // namespace cohort::detail
