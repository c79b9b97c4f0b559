// The guardian: a small process forked by the agent that outlives it for one
// purpose. PR_SET_PDEATHSIG kills a worker when the agent dies, but not what
// the worker started (a shell's children, a data loader's processes); those
// stay in the worker's process group. The guardian holds the list of worker
// process groups and, when the agent dies for any reason (SIGKILL included:
// its end of a pipe closes), SIGKILLs every one of them, removes the job's
// files when the agent would have (a SIGKILLed agent cannot), and exits.
//
// The agent forks it first, before its threads start and before it maps
// libraries and fills its heap: a fork then copies few page tables, sends
// no other CPU a TLB flush, and leaves few pages for the agent to copy on
// its next write to them (4 agents on 4 namespace nodes: 220 page faults
// fewer per start, docs/run.md).
#pragma once

#include <string>

#include <sys/types.h>

#include "core/fd.hpp"

namespace cohort::detail {

class Guardian {
 public:
  /// Forks the guardian. Call with the signals the agent handles blocked:
  /// the guardian keeps them blocked, so a Ctrl-C meant for the job does not
  /// end it early. Throws cohort::Error when fork or pipe fails.
  Guardian();
  /// Closes the pipe (the guardian exits) and reaps it.
  ~Guardian();
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;

  /// The worker leading process group `pgid` started / is gone (reaped, and
  /// its group killed): the guardian adds / forgets the group. watch is one
  /// write(2), safe in a forked child before exec: a worker calls it for
  /// itself (spawn_worker), so the group is listed before the worker runs.
  void watch(pid_t pgid) noexcept;
  void forget(pid_t pgid) noexcept;

  /// The job's files, removed at its end (JobFiles::goes_with_the_job), are
  /// the entries of `dir` whose names begin with `prefix`, and `dir` itself
  /// when `prefix` is "": the guardian removes them once the agent is gone.
  /// Once, before the first worker starts (a worker's watch() must not fall
  /// inside this message). Throws cohort::Error for a `dir` longer than
  /// PATH_MAX or a `prefix` longer than NAME_MAX.
  void remove_at_end(const std::string& dir, const std::string& prefix);

  pid_t pid() const noexcept { return pid_; }

 private:
  void send(int message) noexcept;
  pid_t pid_ = -1;
  Fd pipe_;  // write end, close-on-exec so no worker holds it
};

}  // namespace cohort::detail
