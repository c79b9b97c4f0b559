// What workers leave behind. A worker that daemonizes (setsid and a double
// fork) leaves its own process group, so killing the worker's group misses
// it, and it is reparented to init: it would outlive the job. An agent that
// is its descendants' subreaper gets them as children instead, finds them
// at the end of the job and stops them.
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include <sys/types.h>

namespace cohort::detail {

/// Makes this process the subreaper of its descendants
/// (PR_SET_CHILD_SUBREAPER). Returns false when the kernel refused.
bool adopt_orphans() noexcept;

struct Orphan {
  pid_t pid = 0;
  std::string command;  ///< /proc/<pid>/comm: "sleep"
  pid_t group = 0;      ///< its process group
};

/// This process's children that are not in `known` (its workers, helpers
/// of its own): what was handed over to it. Reads /proc.
std::vector<Orphan> adopted_orphans(const std::set<pid_t>& known);

/// Stops every adopted orphan: SIGTERM, then SIGKILL for those still there
/// after `grace`, reaping each; again while new ones arrive (a parent that
/// exits hands its children over). Orphans of `stopped_groups` (worker
/// groups already SIGKILLed, whose members may not have died yet) are only
/// reaped. Returns the others: what had left its worker's group.
std::vector<Orphan> stop_orphans(const std::set<pid_t>& known,
                                 const std::set<pid_t>& stopped_groups,
                                 std::chrono::milliseconds grace);

}  // namespace cohort::detail
