// The agent behind `cohort run` (internal): one per node, on the
// supervisor's event loop (SIGCHLD and the forwarded signals, the grace,
// drain and --timeout deadlines, the workers' output pipes) with its
// workers in a process set. What its events mean is the lifecycle's
// (lifecycle.hpp); it carries out what that decides. Its parts:
// agent.cpp (the run and its events), agent_workers.cpp (starting the
// workers, their output, the report), agent_nodes.cpp (the end of an
// attempt across nodes: waiting, restarting with the others, finishing).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <cohort/launch.hpp>

#include "core/fd.hpp"
#include "launch/agent_role.hpp"
#include "launch/console.hpp"
#include "launch/event_loop.hpp"
#include "launch/gpu_placement.hpp"
#include "launch/guardian.hpp"
#include "launch/job_files.hpp"
#include "launch/lifecycle.hpp"
#include "launch/node_group.hpp"
#include "launch/node_plan.hpp"
#include "launch/output.hpp"
#include "launch/process_set.hpp"
#include "launch/report.hpp"
#include "launch/thread_budget.hpp"
#include "launch/thread_message.hpp"
#include "launch/timeline.hpp"

namespace cohort::detail {

// The agent's deadlines on its event loop.
constexpr int kGraceDeadline = 0;   // SIGKILL for the workers still running
constexpr int kDrainDeadline = 1;   // output pipes still open after every worker ended
constexpr int kJobDeadline = 2;     // --timeout
constexpr int kOutputDeadline = 3;  // output held back for a slow reader: read on?
// How long output pipes may stay open after every worker exited (a
// grandchild that left the process group may hold them).
constexpr std::chrono::milliseconds kDrainTimeout{2000};
// How often output held back for a slow reader looks whether it may go on:
// the console's 4 MiB ahead keep a reader of up to 200 MB/s busy meanwhile.
constexpr std::chrono::milliseconds kOutputRecheck{20};

// A stop signal that came while the agent waited at the rendezvous.
struct StoppedWhileWaiting {
  int signal = 0;
};

// What the agent knows of a worker beside its process (the process set's
// member of the same index).
struct Worker {
  int rank = 0;
  int local_rank = 0;
  bool running_at_timeout = false;
  std::string error_file;           // its TORCHELASTIC_ERROR_FILE
  Fd pipes[2];                      // read ends: stdout, stderr (invalid once at EOF)
  bool paused[2] = {false, false};  // not read while the console's reader is behind
  std::unique_ptr<OutputStream> streams[2];
  Timeline::Clock::time_point started;  // for the trace
};

class Agent {
 public:
  Agent(const RunOptions& options, AgentRole role, AgentPlan plan);

  // With workers still running only when the agent itself fails (an
  // exception): the process set SIGKILLs them, none outlives the agent.
  ~Agent() = default;
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;
  int run();

 private:
  int run_job();
  // Whether this agent keeps a timeline: --trace where the store is
  // served, else whether that agent asked for every node's events (said
  // once after the join, where this one has --trace and it does not ask).
  bool traces();
  // cohort run --trace: the stop of the attempt, once, on this node's track.
  void trace_stop();
  // This node's events to whoever writes the file; or, here, every node's
  // into the file.
  void finish_trace(int exit_code);

  bool multi_node() const { return plan_.group.nnodes > 1; }

  // What this agent calls its node at the rendezvous (see AgentPlan).
  std::string node_name() const;

  // "[{host}:{rank}] " when the job spans hosts, "[{rank}] " for several
  // workers on one, nothing for one worker.
  void choose_prefix();

  // MASTER_ADDR and MASTER_PORT of the workers in this attempt.
  std::pair<std::string, int> master_of() const;

  void print(const std::string& text) { console_write(STDERR_FILENO, text); }

  void spawn_all(int attempt);
  void run_attempt(int attempt);
  bool any_pipe_open() const;
  void on_output(std::size_t local, int stream);
  void watch_output(std::size_t local, int stream);
  void resume_output();
  bool output_held_back() const;
  void arm_drain();
  void close_pipe(Worker& worker, int stream);

  // Carries out what the lifecycle decided.
  void act(const LifecycleActions& actions);
  void on_signal(int signal);
  void reap();

  // Every worker is gone: what they left running outside their process
  // groups (a daemon; this agent is their subreaper) ends with them.
  void stop_left_behind();
  void on_group_event();

  // The store met a worker's PyTorch client that it cannot serve: that
  // worker would retry until its own timeout (30 minutes), so the job ends
  // now, saying why.

  // --timeout passed: the job is hung or too slow. What each rank still
  // running printed last goes into the report, then every worker is stopped.
  void on_job_timeout() { act(lifecycle_->timed_out()); }

  void on_stdin();

  // This node's workers of the attempt all succeeded, and the job may still
  // restart: wait until every node's did, or the attempt stops elsewhere
  // (on_group_event then records why).
  void await_attempt_end();

  // Elastic membership: node 0's verdict on the attempt, for every node
  // alike (a node lost may have made a worker fail first). Whether the job
  // restarts; the job's stop becomes what decided it.
  bool settle_attempt();

  // The attempt stopped for a worker's failure with restarts left (or, with
  // elastic membership, a node lost or one waiting to join): say so, wait
  // for every node's workers to be gone, and take the next attempt's
  // MASTER_PORT (elastic: its placement). False (the job ends) when the
  // nodes did not meet in time.
  bool restart_with_the_others(int attempt);
  std::string my_ranks() const;

  // After this node's workers are gone: report, and (node 0) keep serving the
  // store until the other nodes are done with it.
  int finish_node();

  // Node 0 serves the store: it stays until every node is done, or, once the
  // job stops, until the others had time to stop (they may be gone).
  void await_other_nodes();
  ReportInput report_input(int attempt, bool restarting) const;
  std::vector<std::string> gpu_lines(const std::vector<std::string>& stderr_tail, int local_rank,
                                     int local_workers) const;
  int exit_code() const;

  RunOptions options_;
  AgentRole role_;
  AgentPlan plan_;
  std::vector<int> signals_;
  std::string host_;
  std::unique_ptr<EventLoop> loop_;
  // Before group_, whose store's thread writes them: they outlive it.
  ThreadMessage unservable_;  ///< from the store's thread: a client it cannot serve
  // While the agent joins; it outlives group_, which points to it until then.
  std::unique_ptr<JoinWatch> join_watch_;
  std::unique_ptr<NodeGroup> group_;
  Placement placement_;
  std::unique_ptr<Lifecycle> lifecycle_;  ///< what this attempt's events mean
  std::vector<std::string> attempts_;     ///< why each earlier attempt stopped
  int master_port_ = 0;                   ///< the workers' MASTER_PORT
  std::int64_t started_usec_ = 0;         ///< on the kernel log's clock: the job's window begins
  std::vector<WorkerDevices> devices_;    ///< by local rank (--gpus-per-proc, --cpu-bind); or none
  std::unique_ptr<JobFiles> files_;
  ThreadBudget threads_;
  std::unique_ptr<Guardian> guardian_;
  std::vector<Worker> workers_;
  // After the guardian: destroyed first, it SIGKILLs workers still running.
  std::unique_ptr<ProcessSet> processes_;
  std::unique_ptr<Timeline> timeline_;  ///< with --trace
  int attempt_ = 0;                     ///< the attempt under way
  bool stop_traced_ = false;            ///< its stop is on the timeline
};

}  // namespace cohort::detail
