// The decisions of one agent about its workers' attempt, as a pure policy:
// events in (a worker exited, a signal arrived, the time limit passed, the
// launcher's connection closed, the store met a client it cannot serve,
// another node stopped the job), actions out (pass a signal on, stop the
// workers, tell the other nodes), and at the end of the attempt: restart or
// not, and the exit status. No clock, no processes, no store: the agent
// (agent.cpp) feeds it what its event loop sees and carries out what it
// says, and unit tests drive it through every scenario in microseconds.
//
// The first stop of an attempt wins; later ones change nothing but a second
// stop request, which takes the grace away (SIGKILL).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <signal.h>

#include "launch/stop_record.hpp"

namespace cohort::detail {

/// What ended (or is ending) the attempt here.
enum class StopCause {
  none,           ///< every worker is running, or all succeeded
  worker_failed,  ///< a worker exited non-zero or was killed
  signal,         ///< a stop signal (TERM, INT, HUP, QUIT), or the launcher went away
  elsewhere,      ///< another node stopped the job
  timeout,        ///< --timeout passed
  unservable,     ///< a worker can never rendezvous (the store cannot serve it)
};

struct LifecycleAction {
  enum class Kind {
    forward_signal,    ///< pass `signal` to every worker; the job goes on
    stop_workers,      ///< `signal` to every worker, SIGKILL after the grace (now if stopping)
    note_running,      ///< remember which workers still run (the timeout's report)
    tell_other_nodes,  ///< declare `record` as the job's stop (the first declared wins)
  };
  Kind kind = Kind::stop_workers;
  int signal = 0;
  StopRecord record;

  static LifecycleAction forward(int signal) { return make(Kind::forward_signal, signal); }
  static LifecycleAction stop(int signal) { return make(Kind::stop_workers, signal); }
  static LifecycleAction note_running() { return make(Kind::note_running, 0); }
  static LifecycleAction tell(StopRecord record) {
    LifecycleAction action = make(Kind::tell_other_nodes, 0);
    action.record = std::move(record);
    return action;
  }

  bool operator==(const LifecycleAction& other) const {
    return kind == other.kind && signal == other.signal && record.encode() == other.record.encode();
  }

 private:
  static LifecycleAction make(Kind kind, int signal) {
    LifecycleAction action;
    action.kind = kind;
    action.signal = signal;
    return action;
  }
};
using LifecycleActions = std::vector<LifecycleAction>;

class Lifecycle {
 public:
  struct Facts {
    int node_rank = 0;                     ///< in the attempt under way
    std::string host;                      ///< this agent's, for messages
    bool multi_node = false;               ///< other nodes exist to tell
    std::chrono::milliseconds timeout{0};  ///< --timeout, for messages
    RestartBudget budget;
  };
  explicit Lifecycle(Facts facts) : facts_(std::move(facts)) {}

  /// A new attempt: nothing has stopped yet. `node_rank` may have changed
  /// (elastic membership).
  void begin_attempt(int node_rank);

  // --- events ---------------------------------------------------------------
  /// A signal from outside (not SIGCHLD). Whether it stops the job:
  /// TERM, INT, HUP, QUIT; the others are passed on.
  LifecycleActions signal(int signal);
  /// Worker `index` (local), global `rank`, ended with `wait_status`.
  LifecycleActions worker_exited(int index, int rank, int wait_status);
  LifecycleActions timed_out();
  /// Standard input ended: the --hostfile launcher that started this agent is gone.
  LifecycleActions launcher_gone();
  LifecycleActions unservable(const std::string& why);
  /// Another node declared the job's stop.
  LifecycleActions stopped_elsewhere(const StopRecord& record);
  /// A stop signal while no worker runs (between attempts, or after this
  /// node's succeeded): the other nodes are told, whatever came before.
  LifecycleActions stopped_between_attempts(int signal);
  /// PROGRAM cannot run on this node (exit status 126 or 127).
  LifecycleActions program_unrunnable(int exit_code, const std::string& why);
  /// What the store kept as the job's stop after this agent declared `mine`.
  void declared(const StopRecord& winner, const StopRecord& mine);
  /// The job's stop, heard after this node's workers were done.
  void heard(const StopRecord& record) { first_stop_ = record; }
  /// Elastic membership: what the node serving the store decided ended the
  /// attempt (a lost node outranks the failures it caused).
  void settled(const StopRecord& verdict);

  // --- what it decided --------------------------------------------------
  StopCause cause() const noexcept { return cause_; }
  int stop_signal() const noexcept { return stop_signal_; }
  /// Local index of the worker whose failure stopped the attempt, -1 for none.
  int first_failure() const noexcept { return first_failure_; }
  const std::string& unservable_why() const noexcept { return unservable_why_; }
  /// The job's stop as every node knows it (several nodes), once declared or heard.
  const std::optional<StopRecord>& first_stop() const noexcept { return first_stop_; }
  /// Whether that stop was this node's own.
  bool own_stop() const noexcept { return own_stop_; }
  /// This agent's own stop of the attempt, declared or not.
  const std::optional<StopRecord>& own_record() const noexcept { return own_record_; }
  /// One node: whether the job restarts after this attempt (`attempt`
  /// restarts used so far).
  bool restarts_alone(int attempt) const noexcept;
  /// The exit status: the job's stop's, or this node's; the failed
  /// worker's needs its wait status (`first_failure_status`).
  int exit_code(int first_failure_status) const noexcept;

 private:
  LifecycleActions stop(StopCause cause, int signal, int rank, int exit_code,
                        const std::string& summary);
  // This agent's stop record; the action that tells the other nodes.
  void tell(int rank, int exit_code, const std::string& summary, LifecycleActions& actions);

  Facts facts_;
  StopCause cause_ = StopCause::none;
  int stop_signal_ = 0;
  int first_failure_ = -1;
  std::string unservable_why_;
  std::optional<StopRecord> own_record_;
  std::optional<StopRecord> first_stop_;
  bool own_stop_ = false;
};

/// The exit status of a job stopped by --timeout, as GNU timeout's.
inline constexpr int kTimeoutExitCode = 124;

/// TERM, INT, HUP and QUIT stop the job; other signals are passed on.
bool stops_the_job(int signal) noexcept;
/// Those four as a set (to block, wait for or read from a signalfd).
sigset_t signals_that_stop_the_job() noexcept;

}  // namespace cohort::detail
