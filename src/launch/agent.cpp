// The agent behind `cohort run` (agent.hpp): the run, its events, and
// cohort::run / cohort::spawn.
#include "launch/agent.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cohort/errors.hpp>
#include <cohort/launch.hpp>
#include <cohort/store.hpp>

#include "core/cpus.hpp"
#include "core/fd.hpp"
#include "core/log.hpp"
#include "core/socket.hpp"
#include "core/strings.hpp"
#include "launch/console.hpp"
#include "launch/error_file.hpp"
#include "launch/event_loop.hpp"
#include "launch/exit_status.hpp"
#include "launch/gpu_failures.hpp"
#include "launch/guardian.hpp"
#include "launch/job_files.hpp"
#include "launch/launcher_variables.hpp"
#include "launch/lifecycle.hpp"
#include "launch/node_group.hpp"
#include "launch/node_plan.hpp"
#include "launch/orphans.hpp"
#include "launch/output.hpp"
#include "launch/process_set.hpp"
#include "launch/program_check.hpp"
#include "launch/report.hpp"
#include "launch/signal_guard.hpp"
#include "launch/spawn.hpp"
#include "launch/ssh_launch.hpp"
#include "launch/thread_budget.hpp"
#include "launch/worker_setup.hpp"

namespace cohort {
namespace detail {
namespace {

// This process adopts what its workers orphan, for as long as it runs them
// (cohort::spawn runs inside a user's program: that is given back after).
class SubreaperScope {
 public:
  SubreaperScope() {
    int was = 0;
    prctl(PR_GET_CHILD_SUBREAPER, &was);
    was_ = was != 0;
    if (!was_ && !detail::adopt_orphans()) {
      detail::log(detail::LogLevel::info, "run",
                  "cannot become the workers' subreaper: a daemonized worker may outlive the job");
    }
  }
  ~SubreaperScope() {
    if (!was_) prctl(PR_SET_CHILD_SUBREAPER, 0);
  }
  SubreaperScope(const SubreaperScope&) = delete;
  SubreaperScope& operator=(const SubreaperScope&) = delete;

 private:
  bool was_ = false;
};

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace

Agent::Agent(const RunOptions& options, AgentRole role, detail::AgentPlan plan)
    : options_(options), role_(std::move(role)), plan_(std::move(plan)) {
  if (options_.nproc_per_node < 1) {
    throw InvalidArgument(
        cat("cohort run: --nproc-per-node ", options_.nproc_per_node, " must be at least 1"));
  }
  started_usec_ = detail::kernel_log_now();
  if (!detail::parse_cpu_bind(options_.cpu_bind)) {
    throw InvalidArgument(
        cat("cohort run: --cpu-bind '", options_.cpu_bind, "': expected none, numa, gpu or cores"));
  }
  if (options_.gpus_per_proc < 0) {
    throw InvalidArgument(
        cat("cohort run: --gpus-per-proc ", options_.gpus_per_proc, " must be 0 or more"));
  }
  if (options_.signals.empty()) options_.signals = {"TERM", "INT", "HUP", "QUIT", "USR1", "USR2"};
  for (const std::string& name : options_.signals) {
    const int signal = detail::parse_signal(name);
    if (signal == 0 || signal == SIGKILL || signal == SIGSTOP || signal == SIGCHLD) {
      throw InvalidArgument(
          cat("cohort run: '", name, "' is not a signal cohort can forward (e.g. TERM, USR1)"));
    }
    signals_.push_back(signal);
  }
  // One budget for the whole job: every node restarts together.
  plan_.group.max_restarts = options_.max_restarts;
  plan_.group.say = [this](const std::string& text) { print(text); };
  plan_.group.check_interrupt = [] {
    // The event loop does not turn while the rendezvous waits: take a
    // pending stop signal here (taken, it cannot kill this process once
    // the loop unblocks it on the way out).
    const sigset_t stops = detail::signals_that_stop_the_job();
    const timespec now{};
    const int signal = sigtimedwait(&stops, nullptr, &now);
    if (signal > 0) throw StoppedWhileWaiting{signal};
  };
  if (options_.run_id.empty()) options_.run_id = detail::random_hex(8);
  host_ = options_.local_addr.empty() ? host_name() : options_.local_addr;
}

int Agent::run() {
  const int code = run_job();
  if (timeline_) finish_trace(code);
  return code;
}

int Agent::run_job() {
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  for (int signal : signals_)
    sigaddset(&handled, signal);
  // Blocked before the store's thread starts, so that it inherits the mask
  // and every one of these reaches the signalfd, not a thread.
  loop_ = std::make_unique<detail::EventLoop>(handled);
  // First, while this process is small and has one thread (guardian.hpp).
  guardian_ = std::make_unique<detail::Guardian>();
  processes_ =
      std::make_unique<detail::ProcessSet>(*loop_, detail::system_processes(), kGraceDeadline);
  loop_->on_signal([this](int signal) { on_signal(signal); });
  if (options_.timeout.count() > 0) {
    // The whole job's limit, restarts included, from here.
    loop_->set_deadline(kJobDeadline, options_.timeout, [this] { on_job_timeout(); });
  }

  plan_.group.on_unservable = [this](const std::string& why) {  // on the store's thread
    unservable_.post(why);
  };
  loop_->watch(unservable_.fd(), [this] { act(lifecycle_->unservable(unservable_.take())); });
  // This agent and its workers meet the job's store through the node's
  // relay (docs/rendezvous.md), unless it serves that store itself or the
  // relay is off (COHORT_STORE_RELAY=0). Python's workers speak PyTorch's
  // protocol: to the relay's TCPStore port (their MASTER_ADDR:MASTER_PORT,
  // master_of()) unless they are to reach node 0's store
  // (COHORT_TORCH_STORE_RELAY=0), or rank 0 serves its own.
  plan_.group.relay = multi_node() && options_.store_relay;
  plan_.group.tree_width = options_.tree_width;
  const bool torch_relayed =
      detail::runs_with_python(options_) && options_.agent_store && options_.torch_store_relay;
  plan_.group.relay_torch_port = torch_relayed ? 0 : -1;
  // Until the loop turns, a stop signal ends the join through this watch.
  if (multi_node()) {
    join_watch_ = std::make_unique<detail::JoinWatch>(
        [this](const std::string& text) { print(text); }, plan_.group.rendezvous_timeout);
    plan_.group.join_watch = join_watch_.get();
  }
  const auto stopped_joining = [this](int signal) {
    print(cat("cohort run: stopped by ", detail::signal_name(signal),
              " while waiting to join the job\n"));
    return detail::stop_exit_code(signal);
  };
  const auto joining = detail::Timeline::Clock::now();
  try {
    group_ = std::make_unique<detail::NodeGroup>(plan_.group);
    // Nothing reaches the lifecycle before the loop turns, after the join.
    lifecycle_ = std::make_unique<detail::Lifecycle>(
        detail::Lifecycle::Facts{0, host_, multi_node(), options_.timeout, group_->budget()});
    placement_ = group_->join(options_.nproc_per_node, host_, node_name(), options_.run_id);
  } catch (const StoppedWhileWaiting& stopped) {
    return stopped_joining(stopped.signal);
  } catch (const Error& error) {
    // The watch ended the join's calls: whatever they threw, a signal stopped it.
    if (const int signal = join_watch_ ? join_watch_->finish() : 0) return stopped_joining(signal);
    if (dynamic_cast<const detail::JobEndedWhileWaiting*>(&error) == nullptr) throw;
    print(cat(error.what(), "\n"));
    return 0;
  }
  if (const int signal = join_watch_ ? join_watch_->finish() : 0) return stopped_joining(signal);
  lifecycle_->begin_attempt(group_->node_rank());
  if (traces()) {
    timeline_ = std::make_unique<detail::Timeline>(group_->member_id(), host_);
    timeline_->span("rendezvous", detail::Timeline::kAgentTrack, joining,
                    detail::Timeline::Clock::now(),
                    {{"world_size", cat(placement_.world_size)},
                     {"ranks", my_ranks()},
                     {"node_rank", cat(group_->node_rank())}});
  }
  if (multi_node()) loop_->watch(group_->event_fd(), [this] { on_group_event(); });
  if (role_.stop_on_stdin_eof) loop_->watch(STDIN_FILENO, [this] { on_stdin(); });
  choose_prefix();
  for (int rank : options_.console_ranks) {
    if (rank >= placement_.world_size) {
      throw InvalidArgument(cat("--ranks: rank ", rank, " is not in the job, whose ranks are 0-",
                                placement_.world_size - 1));
    }
  }
  const Environment env = process_environment();
  if (multi_node() && !role_.entry) {
    // Each node checks PROGRAM where it runs; a node that cannot run it
    // stops the job for everyone at once.
    try {
      detail::check_program(options_, env);
    } catch (const ProgramError& error) {
      print(cat(error.what(), "\n"));
      act(lifecycle_->program_unrunnable(error.exit_code(),
                                         cat(error.what(), " (on ", host_, ")")));
      return finish_node();
    }
  }
  const bool keep_logs = !options_.redirects.empty() || !options_.tee.empty();
  files_ = std::make_unique<detail::JobFiles>(options_.log_dir, placement_.run_id, keep_logs);
  if (keep_logs && files_->made_for_the_job()) {
    print(cat("cohort run: redirected output goes to ", files_->dir(), "\n"));
  }
  const detail::WorkerPlace& first = placement_.layout.mine.front();
  threads_ = detail::thread_budget(env, detail::probe_cpu_facts(), options_.nproc_per_node,
                                   first.local_world_size);
  const detail::CpuBind bind = *detail::parse_cpu_bind(options_.cpu_bind);
  if (options_.gpus_per_proc > 0 || bind != detail::CpuBind::none) {
    // Before any worker starts: a node that cannot meet the request stops
    // the job for everyone at once.
    try {
      const detail::NodeGpus node = detail::read_node_gpus(env, false);
      devices_ = detail::place_workers(
          node.inventory, node.visible,
          {first.local_world_size, options_.gpus_per_proc, bind, detail::affinity_cpus()});
    } catch (const InvalidArgument& error) {
      if (!multi_node()) throw;
      print(cat(error.what(), " (on ", host_, ")\n"));
      act(lifecycle_->program_unrunnable(2, cat(error.what(), " (on ", host_, ")")));
      return finish_node();
    }
  }
  if (files_->goes_with_the_job()) guardian_->remove_at_end(files_->dir(), files_->names_prefix());
  const SubreaperScope subreaper;

  for (int attempt = 0;; ++attempt) {
    // An agent that joined an elastic job late starts at its attempt.
    if (multi_node()) attempt = group_->attempt();
    run_attempt(attempt);
    if (multi_node()) {
      // Done here while others may still fail: wait for the job's verdict.
      if (lifecycle_->cause() == StopCause::none && group_->may_restart()) await_attempt_end();
      if (!lifecycle_->first_stop()) return finish_node();
      // Cut off from the store, a node hears no verdict and joins no round.
      if (group_->store_lost()) return finish_node();
      if (group_->elastic() ? !settle_attempt() : !group_->restartable(*lifecycle_->first_stop()))
        return finish_node();
      if (!restart_with_the_others(attempt)) return finish_node();
      continue;
    }
    if (lifecycle_->cause() == StopCause::none) return 0;
    const bool restart = lifecycle_->restarts_alone(attempt);
    print(detail::failure_report(report_input(attempt, restart)));
    if (!restart) return exit_code();
    if (timeline_) {
      timeline_->instant(
          "restart", detail::Timeline::kAgentTrack,
          {{"next_attempt", cat(attempt + 1)}, {"reason", lifecycle_->own_record()->summary}});
    }
    group_->forget_torch_keys();  // the old workers are gone; the new start afresh
  }
}

// Where the job's store is served, the timeline is written (--trace there)
// and every other agent's events gathered into it, --trace or not.
bool Agent::traces() {
  if (!multi_node() || group_->serves_store()) return !options_.trace.empty();
  if (!options_.trace.empty() && !placement_.traced) {
    print(cat("cohort run [", host_, "]: --trace ", options_.trace, ": nothing is written here: ",
              "the job's timeline is written where its store is served (", plan_.group.store_host,
              "), whose cohort run has no --trace; give it --trace FILE to gather every ",
              plan_.group.unit, "'s events there\n"));
  }
  return placement_.traced;
}

std::string Agent::node_name() const {
  switch (plan_.node_name) {
    case detail::AgentPlan::NodeName::host:
      return cat("host ", host_);
    case detail::AgentPlan::NodeName::launcher_node:
      return cat("node ", plan_.launcher_node);
    case detail::AgentPlan::NodeName::agent:
      break;
  }
  return cat("agent ", group_->member_id());
}

void Agent::choose_prefix() {
  if (options_.prefix) return;
  const std::set<std::string> hosts(placement_.hosts.begin(), placement_.hosts.end());
  options_.prefix = hosts.size() > 1            ? "[{host}:{rank}] "
                    : placement_.world_size > 1 ? "[{rank}] "
                                                : "";
}

std::pair<std::string, int> Agent::master_of() const {
  const bool agent_store = options_.agent_store;
  if (!multi_node()) {
    // One node: a port free now for each attempt (a restart must not meet
    // the last attempt's rank 0 still closing it), unless the agent serves it.
    return {options_.master_addr, agent_store                 ? group_->torch_port()
                                  : options_.master_port != 0 ? options_.master_port
                                                              : detail::pick_free_port()};
  }
  const StoreServer* relay = group_->relay();
  if (relay != nullptr && relay->torch_port() >= 0) return {"127.0.0.1", relay->torch_port()};
  const std::string& addr =
      agent_store || plan_.master_addr.empty() ? group_->store_host() : plan_.master_addr;
  return {addr, placement_.master_port};
}

void Agent::run_attempt(int attempt) {
  lifecycle_->begin_attempt(group_->node_rank());
  attempt_ = attempt;
  stop_traced_ = false;
  const auto began = detail::Timeline::Clock::now();
  spawn_all(attempt);
  while (processes_->any_running() || any_pipe_open())
    loop_->turn();
  loop_->cancel_deadline(kDrainDeadline);
  if (timeline_) {
    timeline_->span(cat("attempt ", attempt), detail::Timeline::kAgentTrack, began,
                    detail::Timeline::Clock::now(),
                    {{"ranks", my_ranks()}, {"exit_status", cat(exit_code())}});
  }
}

void Agent::trace_stop() {
  if (!timeline_ || stop_traced_ || lifecycle_->cause() == StopCause::none) return;
  stop_traced_ = true;
  const bool elsewhere = lifecycle_->cause() == StopCause::elsewhere;
  const auto& record = elsewhere ? lifecycle_->first_stop() : lifecycle_->own_record();
  timeline_->instant(
      elsewhere ? "stopped from elsewhere" : "stop", detail::Timeline::kAgentTrack,
      {{"reason", record ? record->summary : std::string()}, {"attempt", cat(attempt_)}});
}

void Agent::finish_trace(int code) {
  timeline_->instant("exit", detail::Timeline::kAgentTrack, {{"exit_status", cat(code)}});
  if (role_.store_served_elsewhere && !multi_node()) {
    // One host of --hosts: this agent keeps a store of its own; the
    // launcher's, which writes the file, is the plan's.
    NodeGroup::publish_trace_to({options_.rdzv_host, options_.rdzv_port, options_.job_token},
                                group_->member_id(), timeline_->events());
    return;
  }
  if (multi_node() && !group_->serves_store()) {
    group_->publish_trace(timeline_->events());
    return;
  }
  std::vector<std::string> parts{timeline_->events()};
  if (multi_node()) {
    std::vector<int> others;
    for (int id : group_->members())
      if (id != group_->member_id()) others.push_back(id);
    const std::vector<std::string> theirs = group_->gather_traces(
        others,
        std::min<std::chrono::milliseconds>(options_.heartbeat_timeout, std::chrono::seconds(5)));
    parts.insert(parts.end(), theirs.begin(), theirs.end());
  }
  detail::write_job_trace(options_.trace, parts, placement_.run_id, options_.command, code);
}

void Agent::act(const detail::LifecycleActions& actions) {
  using Kind = detail::LifecycleAction::Kind;
  for (const detail::LifecycleAction& action : actions) {
    switch (action.kind) {
      case Kind::forward_signal:
        processes_->signal_all(action.signal, false);
        break;
      case Kind::stop_workers:
        processes_->stop(action.signal, options_.grace);
        break;
      case Kind::note_running:
        for (std::size_t i = 0; i < workers_.size(); ++i)
          workers_[i].running_at_timeout = (*processes_)[i].running;
        break;
      case Kind::tell_other_nodes:
        lifecycle_->declared(group_->declare_stop(action.record), action.record);
        break;
    }
  }
  trace_stop();
}

void Agent::on_signal(int signal) {
  if (signal == SIGCHLD) {
    reap();
  } else {
    act(lifecycle_->signal(signal));
  }
}

void Agent::reap() {
  processes_->reap([this](std::size_t i) { guardian_->forget((*processes_)[i].pid); },
                   [this](std::size_t i) {
                     const int status = (*processes_)[i].wait_status;
                     const auto ended = detail::Timeline::Clock::now();
                     act(lifecycle_->worker_exited(static_cast<int>(i), workers_[i].rank, status));
                     if (timeline_) {
                       timeline_->span(
                           cat("attempt ", attempt_), workers_[i].rank, workers_[i].started, ended,
                           {{"pid", cat((*processes_)[i].pid)},
                            {"local_rank", cat(workers_[i].local_rank)},
                            {"exit", detail::describe_exit_briefly(status)},
                            {"stopped_by_cohort", (*processes_)[i].signalled ? "yes" : "no"}});
                     }
                   });
  if (processes_->any_running()) return;
  stop_left_behind();
  if (any_pipe_open() && !loop_->has_deadline(kDrainDeadline)) arm_drain();
}

// Pipes still open once every worker ended (a daemon the worker left holds
// them) are closed after kDrainTimeout; output held back for a reader that
// is still taking it is not lost to that.
void Agent::arm_drain() {
  loop_->set_deadline(kDrainDeadline, kDrainTimeout, [this] {
    if (output_held_back()) return arm_drain();
    for (Worker& worker : workers_) {
      close_pipe(worker, 0);
      close_pipe(worker, 1);
    }
  });
}

void Agent::stop_left_behind() {
  std::set<pid_t> groups;
  for (std::size_t i = 0; i < processes_->size(); ++i)
    groups.insert((*processes_)[i].pid);
  const std::vector<detail::Orphan> stopped =
      detail::stop_orphans({guardian_->pid()}, groups, options_.grace);
  if (stopped.empty()) return;
  std::string list;
  for (std::size_t i = 0; i < stopped.size() && i < 5; ++i)
    list += cat(i ? ", " : "", "pid ", stopped[i].pid, " (", stopped[i].command, ")");
  if (stopped.size() > 5) list += cat(" and ", stopped.size() - 5, " more");
  print(cat("cohort run", multi_node() ? cat(" [", host_, "]") : std::string(), ": stopped ",
            stopped.size(), stopped.size() == 1 ? " process" : " processes",
            " the workers left running outside their process groups: ", list, "\n"));
}

void Agent::on_group_event() {
  std::uint64_t count = 0;
  (void)!::read(group_->event_fd(), &count, sizeof(count));
  if (auto record = group_->stop_record()) act(lifecycle_->stopped_elsewhere(*record));
}

void Agent::on_stdin() {
  char buffer[256];
  const ssize_t n =
      detail::retry_eintr([&] { return ::read(STDIN_FILENO, buffer, sizeof(buffer)); });
  if (n > 0 || (n < 0 && errno == EAGAIN)) return;
  loop_->unwatch(STDIN_FILENO);
  // The launcher that started this agent over ssh is gone (its connection closed).
  act(lifecycle_->launcher_gone());
}

int Agent::exit_code() const {
  const int first_failure = lifecycle_->first_failure();
  return lifecycle_->exit_code(
      first_failure >= 0 ? (*processes_)[static_cast<std::size_t>(first_failure)].wait_status : 0);
}

}  // namespace detail

using detail::cat;

int run(const RunOptions& options) {
  return detail::run_agent_job(options, {});
}

int spawn(int nprocs, std::function<int()> fn, RunOptions options) {
  if (!fn) throw InvalidArgument("cohort::spawn: no function to run");
  options.nproc_per_node = nprocs;
  if (options.command.empty()) options.command = {"cohort::spawn"};
  detail::AgentRole role;
  role.entry = std::move(fn);
  return detail::run_agent_job(options, std::move(role));
}

namespace detail {

int run_agent_job(const RunOptions& options, AgentRole role) {
  if (options.command.empty()) throw InvalidArgument("cohort run: no PROGRAM to run");
  if (!options.hosts.empty()) {
    if (role.entry) {
      throw InvalidArgument(
          "cohort::spawn: workers are forks of this process, so they cannot "
          "start on other hosts; start one process per host instead");
    }
    return run_over_ssh(options);
  }
  // Started by another launcher (srun, mpirun): one agent per task, placed
  // by it; else alone, or one of several nodes placed by flags or at the
  // rendezvous.
  const Environment env = process_environment();
  AgentPlan plan = plan_agent(options, role, detect_launch(env), env);
  // PROGRAM is checked here on one node, on each node after the rendezvous
  // on several (so that the others hear of it at once).
  if (plan.group.nnodes == 1 && !role.entry) check_program(options, env);
  const int code = Agent(options, std::move(role), std::move(plan)).run();
  // The workers' last lines and the report reach a console that reads; one
  // that stalls gets --grace to take them, then the job ends regardless.
  console_flush(options.grace + std::chrono::seconds(1));
  return code;
}

}  // namespace detail
}  // namespace cohort
