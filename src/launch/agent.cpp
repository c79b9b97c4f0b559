// The agent behind `cohort run`: on the supervisor's event loop (SIGCHLD and
// the forwarded signals, the grace, drain and --timeout deadlines, the
// workers' output pipes) with its workers in a process set.
#include <algorithm>
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

#include "core/fd.hpp"
#include "core/log.hpp"
#include "core/socket.hpp"
#include "core/strings.hpp"
#include "launch/console.hpp"
#include "launch/error_file.hpp"
#include "launch/event_loop.hpp"
#include "launch/exit_status.hpp"
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

using detail::cat;
using detail::Fd;
using detail::StopCause;

namespace {

// The agent's deadlines on its event loop.
constexpr int kGraceDeadline = 0;  // SIGKILL for the workers still running
constexpr int kDrainDeadline = 1;  // output pipes still open after every worker ended
constexpr int kJobDeadline = 2;    // --timeout
// How long output pipes may stay open after every worker exited (a
// grandchild that left the process group may hold them).
constexpr std::chrono::milliseconds kDrainTimeout{2000};

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
constexpr std::size_t kTailLines = 20;
constexpr int kRecordedFrames = 3;  // traceback frames of an error file in the report

// A stop signal that came while the agent waited at the rendezvous.
struct StoppedWhileWaiting {
  int signal = 0;
};

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// torchrun's --redirects / --tee value for one local rank: 1 stdout, 2 stderr, 3 both.
int streams_for(const std::map<int, int>& spec, int local_rank) {
  if (auto found = spec.find(local_rank); found != spec.end()) return found->second;
  if (auto all = spec.find(-1); all != spec.end()) return all->second;
  return 0;
}

// What the agent knows of a worker beside its process (the process set's
// member of the same index).
struct Worker {
  int rank = 0;
  int local_rank = 0;
  bool running_at_timeout = false;
  std::string error_file;  // its TORCHELASTIC_ERROR_FILE
  Fd pipes[2];             // read ends: stdout, stderr (invalid once at EOF)
  std::unique_ptr<detail::OutputStream> streams[2];
};

class Agent {
 public:
  Agent(const RunOptions& options, detail::AgentPlan plan)
      : options_(options), plan_(std::move(plan)) {
    if (options_.nproc_per_node < 1) {
      throw InvalidArgument(
          cat("cohort run: --nproc-per-node ", options_.nproc_per_node, " must be at least 1"));
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
      sigset_t stops;
      sigemptyset(&stops);
      for (int signal : {SIGTERM, SIGINT, SIGHUP, SIGQUIT})
        sigaddset(&stops, signal);
      const timespec now{};
      const int signal = sigtimedwait(&stops, nullptr, &now);
      if (signal > 0) throw StoppedWhileWaiting{signal};
    };
    if (options_.run_id.empty()) options_.run_id = detail::random_hex(8);
    host_ = options_.local_addr.empty() ? host_name() : options_.local_addr;
    lifecycle_ = std::make_unique<detail::Lifecycle>(detail::Lifecycle::Facts{
        0, host_, multi_node(), options_.timeout,
        detail::RestartBudget{
            options_.max_restarts,
            plan_.group.min_nodes > 0 && plan_.group.min_nodes < plan_.group.nnodes,
            plan_.group.min_nodes}});
  }

  // With workers still running only when the agent itself fails (an
  // exception): the process set SIGKILLs them, none outlives the agent.
  ~Agent() = default;
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  int run() {
    sigset_t handled;
    sigemptyset(&handled);
    sigaddset(&handled, SIGCHLD);
    for (int signal : signals_)
      sigaddset(&handled, signal);
    // Blocked before the store's thread starts, so that it inherits the mask
    // and every one of these reaches the signalfd, not a thread.
    loop_ = std::make_unique<detail::EventLoop>(handled);
    processes_ =
        std::make_unique<detail::ProcessSet>(*loop_, detail::system_processes(), kGraceDeadline);
    loop_->on_signal([this](int signal) { on_signal(signal); });
    if (options_.timeout.count() > 0) {
      // The whole job's limit, restarts included, from here.
      loop_->set_deadline(kJobDeadline, options_.timeout, [this] { on_job_timeout(); });
    }

    unservable_event_ = Fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    plan_.group.on_unservable = [this](const std::string& why) {  // on the store's thread
      {
        const std::lock_guard<std::mutex> lock(unservable_mutex_);
        unservable_ = why;
      }
      const std::uint64_t one = 1;
      (void)!::write(unservable_event_.get(), &one, sizeof(one));
    };
    loop_->watch(unservable_event_.get(), [this] { on_unservable(); });
    group_ = std::make_unique<detail::NodeGroup>(plan_.group);
    try {
      placement_ = group_->join(options_.nproc_per_node, host_, node_name(), options_.run_id);
    } catch (const detail::JobEndedWhileWaiting& ended) {
      print(cat(ended.what(), "\n"));
      return 0;
    } catch (const StoppedWhileWaiting& stopped) {
      print(cat("cohort run: stopped by ", detail::signal_name(stopped.signal),
                " while waiting to join the job\n"));
      return detail::stop_exit_code(stopped.signal);
    }
    lifecycle_->begin_attempt(group_->node_rank());
    if (multi_node()) loop_->watch(group_->event_fd(), [this] { on_group_event(); });
    if (options_.stop_on_stdin_eof) loop_->watch(STDIN_FILENO, [this] { on_stdin(); });
    choose_prefix();
    for (int rank : options_.console_ranks) {
      if (rank >= placement_.world_size) {
        throw InvalidArgument(cat("--ranks: rank ", rank, " is not in the job, whose ranks are 0-",
                                  placement_.world_size - 1));
      }
    }
    const Environment env = process_environment();
    if (multi_node() && !options_.entry) {
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
    guardian_ = std::make_unique<detail::Guardian>();
    const SubreaperScope subreaper;

    for (int attempt = 0;; ++attempt) {
      // An agent that joined an elastic job late starts at its attempt.
      if (multi_node()) attempt = group_->attempt();
      run_attempt(attempt);
      if (multi_node()) {
        // Done here while others may still fail: wait for the job's verdict.
        if (lifecycle_->cause() == StopCause::none && group_->may_restart()) await_attempt_end();
        if (!lifecycle_->first_stop()) return finish_node();
        if (group_->elastic() ? !settle_attempt() : !group_->restartable(*lifecycle_->first_stop()))
          return finish_node();
        if (!restart_with_the_others(attempt)) return finish_node();
        continue;
      }
      if (lifecycle_->cause() == StopCause::none) return 0;
      const bool restart = lifecycle_->restarts_alone(attempt);
      print(detail::failure_report(report_input(attempt, restart)));
      if (!restart) return exit_code();
      group_->forget_torch_keys();  // the old workers are gone; the new start afresh
    }
  }

 private:
  bool multi_node() const { return plan_.group.nnodes > 1; }

  // What this agent calls its node at the rendezvous (see AgentPlan).
  std::string node_name() const {
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

  // "[{host}:{rank}] " when the job spans hosts, "[{rank}] " for several
  // workers on one, nothing for one worker.
  void choose_prefix() {
    if (options_.prefix) return;
    const std::set<std::string> hosts(placement_.hosts.begin(), placement_.hosts.end());
    options_.prefix = hosts.size() > 1            ? "[{host}:{rank}] "
                      : placement_.world_size > 1 ? "[{rank}] "
                                                  : "";
  }

  // MASTER_ADDR and MASTER_PORT of the workers in this attempt.
  std::pair<std::string, int> master_of() const {
    const bool agent_store = options_.agent_store;
    if (!multi_node()) {
      // One node: a port free now for each attempt (a restart must not meet
      // the last attempt's rank 0 still closing it), unless the agent serves it.
      return {options_.master_addr, agent_store                 ? group_->torch_port()
                                    : options_.master_port != 0 ? options_.master_port
                                                                : detail::pick_free_port()};
    }
    const std::string& addr =
        agent_store || plan_.master_addr.empty() ? group_->store_host() : plan_.master_addr;
    return {addr, placement_.master_port};
  }

  void print(const std::string& text) { detail::console_write(STDERR_FILENO, text); }

  void spawn_all(int attempt) {
    const auto [master_addr, master_port] = master_of();
    master_port_ = master_port;
    const Environment base = process_environment();
    workers_.clear();
    processes_->clear();
    workers_.resize(static_cast<std::size_t>(options_.nproc_per_node));
    for (int local = 0; local < options_.nproc_per_node; ++local) {
      Worker& worker = workers_[static_cast<std::size_t>(local)];
      const detail::WorkerPlace& place = placement_.layout.mine[static_cast<std::size_t>(local)];
      worker.rank = place.rank;
      worker.local_rank = place.local_rank;
      detail::WorkerIdentity identity;
      identity.rank = place.rank;
      identity.local_rank = place.local_rank;
      identity.world_size = placement_.world_size;
      identity.local_world_size = place.local_world_size;
      identity.node_rank = place.node_rank;
      identity.num_nodes = placement_.layout.num_nodes;
      identity.restart_count = attempt;
      identity.max_restarts = options_.max_restarts;
      identity.run_id = placement_.run_id;
      identity.role = options_.role;
      identity.master_addr = master_addr;
      identity.master_port = master_port;
      identity.agent_store = options_.agent_store;
      identity.store_addr = group_->store_host();
      identity.store_port = group_->store_port();
      identity.job_token = group_->token();
      identity.store_munge = group_->munge();
      identity.error_file = worker.error_file = files_->error_file(attempt, worker.rank);
      identity.omp_threads = threads_.threads;

      Fd write_ends[2];
      for (int stream = 0; stream < 2; ++stream) {
        int ends[2];
        if (pipe2(ends, O_CLOEXEC) != 0) {
          const int error = errno;
          rlimit files{};
          getrlimit(RLIMIT_NOFILE, &files);
          // The workers already started are stopped on the way out (~Agent).
          throw Error(cat("cohort run: cannot start rank ", worker.rank,
                          ": pipe2 failed: ", detail::errno_text(error),
                          error == EMFILE ? cat(" (the open-file limit is ", files.rlim_cur,
                                                " and each worker takes 4 descriptors: raise "
                                                "it with ulimit -n, or run fewer workers)")
                                          : std::string()));
        }
        worker.pipes[stream] = Fd(ends[0]);
        write_ends[stream] = Fd(ends[1]);
        const int bit = stream == 0 ? 1 : 2;
        const bool redirected = (streams_for(options_.redirects, local) & bit) != 0;
        const bool teed = (streams_for(options_.tee, local) & bit) != 0;
        const bool to_console =
            !redirected &&
            (options_.console_ranks.empty() || options_.console_ranks.count(worker.rank) != 0) &&
            (options_.console_local_ranks.empty() ||
             options_.console_local_ranks.count(worker.local_rank) != 0);
        const char* name = stream == 0 ? "stdout" : "stderr";
        worker.streams[stream] = std::make_unique<detail::OutputStream>(
            to_console ? (stream == 0 ? STDOUT_FILENO : STDERR_FILENO) : -1,
            detail::format_prefix(*options_.prefix, worker.rank, worker.local_rank, host_),
            !options_.log_dir.empty() || redirected || teed
                ? files_->open_log(attempt, worker.rank, name)
                : Fd(),
            stream == 1 ? kTailLines : 0);
        loop_->watch(worker.pipes[stream].get(),
                     [this, local, stream] { on_output(static_cast<std::size_t>(local), stream); });
      }
      Environment env = detail::worker_environment(base, identity);
      if (!plan_.one_worker_per_task) {
        detail::describe_worker_to_launchers(env, place, placement_.layout);
      }
      // The worker announces its group to the guardian itself (see spawn_worker).
      const pid_t pid =
          options_.entry
              ? detail::spawn_function(options_.entry, env, write_ends[0].get(),
                                       write_ends[1].get(), guardian_.get())
              : detail::spawn_worker(detail::worker_argv(options_, local), env, write_ends[0].get(),
                                     write_ends[1].get(), -1, guardian_.get());
      processes_->add(pid);  // index `local`, as in workers_
    }
  }

  void run_attempt(int attempt) {
    lifecycle_->begin_attempt(group_->node_rank());
    spawn_all(attempt);
    while (processes_->any_running() || any_pipe_open())
      loop_->turn();
    loop_->cancel_deadline(kDrainDeadline);
  }
  bool any_pipe_open() const {
    return std::any_of(workers_.begin(), workers_.end(),
                       [](const Worker& w) { return w.pipes[0].valid() || w.pipes[1].valid(); });
  }

  void on_output(std::size_t local, int stream) {
    Worker& worker = workers_[local];
    char buffer[65536];
    const ssize_t n = detail::retry_eintr(
        [&] { return ::read(worker.pipes[stream].get(), buffer, sizeof(buffer)); });
    if (n > 0) {
      worker.streams[stream]->feed(std::string_view(buffer, static_cast<std::size_t>(n)));
    } else if (n == 0 || errno != EAGAIN) {
      close_pipe(worker, stream);
    }
  }

  void close_pipe(Worker& worker, int stream) {
    if (!worker.pipes[stream].valid()) return;
    worker.streams[stream]->finish();
    loop_->unwatch(worker.pipes[stream].get());
    worker.pipes[stream].reset();
  }

  // Carries out what the lifecycle decided.
  void act(const detail::LifecycleActions& actions) {
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
  }

  void on_signal(int signal) {
    if (signal == SIGCHLD) {
      reap();
    } else {
      act(lifecycle_->signal(signal));
    }
  }

  void reap() {
    processes_->reap([this](std::size_t i) { guardian_->forget((*processes_)[i].pid); },
                     [this](std::size_t i) {
                       act(lifecycle_->worker_exited(static_cast<int>(i), workers_[i].rank,
                                                     (*processes_)[i].wait_status));
                     });
    if (processes_->any_running()) return;
    stop_left_behind();
    if (any_pipe_open() && !loop_->has_deadline(kDrainDeadline)) {
      loop_->set_deadline(kDrainDeadline, kDrainTimeout, [this] {
        for (Worker& worker : workers_) {
          close_pipe(worker, 0);
          close_pipe(worker, 1);
        }
      });
    }
  }

  // Every worker is gone: what they left running outside their process
  // groups (a daemon; this agent is their subreaper) ends with them.
  void stop_left_behind() {
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

  void on_group_event() {
    std::uint64_t count = 0;
    (void)!::read(group_->event_fd(), &count, sizeof(count));
    if (auto record = group_->stop_record()) act(lifecycle_->stopped_elsewhere(*record));
  }

  // The store met a worker's PyTorch client that it cannot serve: that
  // worker would retry until its own timeout (30 minutes), so the job ends
  // now, saying why.
  void on_unservable() {
    std::uint64_t count = 0;
    (void)!::read(unservable_event_.get(), &count, sizeof(count));
    std::string why;
    {
      const std::lock_guard<std::mutex> lock(unservable_mutex_);
      why = unservable_;
    }
    act(lifecycle_->unservable(why));
  }

  // --timeout passed: the job is hung or too slow. What each rank still
  // running printed last goes into the report, then every worker is stopped.
  void on_job_timeout() { act(lifecycle_->timed_out()); }

  void on_stdin() {
    char buffer[256];
    const ssize_t n =
        detail::retry_eintr([&] { return ::read(STDIN_FILENO, buffer, sizeof(buffer)); });
    if (n > 0 || (n < 0 && errno == EAGAIN)) return;
    loop_->unwatch(STDIN_FILENO);
    // The launcher that started this agent over ssh is gone (its connection closed).
    act(lifecycle_->launcher_gone());
  }

  // This node's workers of the attempt all succeeded, and the job may still
  // restart: wait until every node's did, or the attempt stops elsewhere
  // (on_group_event then records why).
  void await_attempt_end() {
    group_->finished();
    while (!lifecycle_->first_stop() && !group_->all_done())
      loop_->turn();
  }

  // Elastic membership: node 0's verdict on the attempt, for every node
  // alike (a node lost may have made a worker fail first). Whether the job
  // restarts; the job's stop becomes what decided it.
  bool settle_attempt() {
    detail::NodeGroup::Verdict verdict;
    try {
      verdict = group_->settle(*lifecycle_->first_stop(), options_.grace);
    } catch (const Error& error) {
      print(cat(error.what(), "\n"));
      return false;
    }
    lifecycle_->settled(verdict.stop);
    return verdict.restart;
  }

  // The attempt stopped for a worker's failure with restarts left (or, with
  // elastic membership, a node lost or one waiting to join): say so, wait
  // for every node's workers to be gone, and take the next attempt's
  // MASTER_PORT (elastic: its placement). False (the job ends) when the
  // nodes did not meet in time.
  bool restart_with_the_others(int attempt) {
    const detail::StopRecord stop = *lifecycle_->first_stop();
    const std::string where =
        stop.node >= 0 && !stop.node_lost
            ? cat(" (on ", stop.host, ", ", plan_.group.unit, " ", stop.node, ")")
            : "";
    const std::string next = group_->elastic()
                                 ? cat("attempt ", attempt + 2)
                                 : cat("attempt ", attempt + 2, " of ", options_.max_restarts + 1);
    if (lifecycle_->own_stop()) {
      detail::ReportInput input = report_input(attempt, true);
      input.other_nodes = cat("stopped: the ", group_->round_size() - 1, " other ",
                              plan_.group.unit, "s' workers, to restart with these");
      print(detail::failure_report(input));
    } else {
      print(cat("cohort run [", host_, "]: stopped ", my_ranks(), " here: ", stop.summary, where,
                "; restarting: ", next, "\n"));
    }
    attempts_.push_back(cat("attempt ", attempt + 1, ": ", stop.summary, where));
    try {
      if (group_->elastic()) {  // settled: the next round's placement
        // A new round: who takes part, and so every rank, may have changed.
        const int world = placement_.world_size;
        placement_ = group_->join(options_.nproc_per_node, host_, node_name(), options_.run_id);
        if (placement_.world_size != world || group_->node_rank() == 0) {
          const int nodes = group_->round_size();
          print(cat("cohort run [", host_, "]: attempt ", attempt + 2, " runs on ", nodes, " ",
                    plan_.group.unit, nodes == 1 ? ", " : "s, ", placement_.world_size,
                    " workers; ", my_ranks(), " here (", plan_.group.unit, " ", group_->node_rank(),
                    ")\n"));
        }
      } else {
        const int port = group_->begin_next_attempt(stop, options_.grace);
        // Workers that meet in the agent's store keep its port (PyTorch puts
        // each attempt's keys under /worker/attempt_K); else rank 0 listens
        // on a fresh one, never the last attempt's.
        if (!options_.agent_store) placement_.master_port = port;
      }
    } catch (const Error& error) {  // the nodes did not meet in time, or the store is gone
      print(cat(error.what(), "\n"));
      return false;
    } catch (const StoppedWhileWaiting& stopped) {  // told to stop between two attempts
      act(lifecycle_->stopped_between_attempts(stopped.signal));
      return false;
    }
    return true;
  }

  std::string my_ranks() const {
    return options_.nproc_per_node == 1 ? cat("rank ", placement_.rank_base)
                                        : cat("ranks ", placement_.rank_base, "-",
                                              placement_.rank_base + options_.nproc_per_node - 1);
  }

  // After this node's workers are gone: report, and (node 0) keep serving the
  // store until the other nodes are done with it.
  int finish_node() {
    group_->finished();
    const std::optional<detail::StopRecord>& first_stop = lifecycle_->first_stop();
    const std::string mine = my_ranks();
    // The attempts before this one, once, where the job's store is served.
    if (!attempts_.empty() && group_->node_rank() == 0) {
      const std::string budget =
          group_->elastic() ? cat(group_->restarts(), " for failures, of --max-restarts ",
                                  options_.max_restarts, "; the others for elastic membership")
                            : cat("--max-restarts ", options_.max_restarts, " for the whole job");
      print(cat("cohort run: the job restarted ", attempts_.size(),
                attempts_.size() == 1 ? " time" : " times", " (", budget, "):\n  ",
                detail::join(attempts_, "\n  "), "\n  attempt ", attempts_.size() + 1, ": ",
                first_stop ? cat(first_stop->summary, " on ", first_stop->host)
                           : std::string("every rank succeeded"),
                "\n"));
    }
    if (lifecycle_->cause() == StopCause::worker_failed && lifecycle_->own_stop()) {
      detail::ReportInput input = report_input(group_->attempt(), false);
      input.other_nodes =
          cat("told to stop: ", group_->round_size() - 1, " other ", plan_.group.unit,
              "s, the ranks other than ", mine.substr(mine.find(' ') + 1));
      print(detail::failure_report(input));
    } else if (first_stop && !lifecycle_->own_stop()) {
      print(cat(
          "cohort run [", host_, "]: stopped ", mine, " here: ", first_stop->summary,
          first_stop->rank >= 0 && first_stop->node != group_->node_rank()
              ? cat(" (on ", first_stop->host, ", ", plan_.group.unit, " ", first_stop->node, ")")
              : std::string(),
          "; exit status ", first_stop->exit_code, "\n"));
    }
    if (group_->serves_store()) await_other_nodes();
    return exit_code();
  }

  // Node 0 serves the store: it stays until every node is done, or, once the
  // job stops, until the others had time to stop (they may be gone).
  void await_other_nodes() {
    const auto bound = options_.grace + 2 * options_.heartbeat_timeout;
    if (lifecycle_->first_stop()) {
      group_->linger(bound);
      return;
    }
    bool stopped = false;
    loop_->watch(group_->event_fd(), [&] {
      std::uint64_t count = 0;
      (void)!::read(group_->event_fd(), &count, sizeof(count));
      if (auto record = group_->stop_record()) {
        lifecycle_->heard(*record);
        stopped = true;
      }
    });
    loop_->on_signal([&](int signal) {
      if (stopped || !detail::stops_the_job(signal)) return;
      act(lifecycle_->stopped_between_attempts(signal));
      stopped = true;
    });
    loop_->cancel_deadline(kJobDeadline);  // the workers are done
    while (!stopped && !group_->all_done())
      loop_->turn();
    if (stopped) group_->linger(bound);
  }

  detail::ReportInput report_input(int attempt, bool restarting) const {
    detail::ReportInput input;
    input.host = host_;
    input.attempt = attempt;
    input.max_restarts = options_.max_restarts;
    input.restarting = restarting;
    const StopCause cause = lifecycle_->cause();
    const int first_failure = lifecycle_->first_failure();
    input.stop_signal = cause == StopCause::signal ? lifecycle_->stop_signal() : 0;
    if (cause == StopCause::timeout) input.timeout = options_.timeout;
    if (cause == StopCause::unservable) input.unservable = lifecycle_->unservable_why();
    input.first_failure = first_failure;
    input.grace = options_.grace;
    input.exit_code = exit_code();
    input.master_port = master_port_;
    input.master_port_given = options_.master_port != 0;
    input.agent_store = options_.agent_store;
    input.under_mpirun = plan_.used_mpi_service;
    std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
    int low = 0;
    int high = 0;
    if (range >> low >> high) input.ephemeral_ports = cat(low, "-", high);
    rlimit files{};
    if (getrlimit(RLIMIT_NOFILE, &files) == 0)
      input.open_files_limit = static_cast<long>(files.rlim_cur);
    if (!options_.entry && detail::runs_with_python(options_)) input.interpreter = options_.python;
    if (first_failure >= 0) {
      input.recorded = detail::read_error_file(
          workers_[static_cast<std::size_t>(first_failure)].error_file, kRecordedFrames);
    }
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      const Worker& worker = workers_[i];
      const detail::ProcessSet::Member& process = (*processes_)[i];
      detail::ReportInput::WorkerEnd end;
      end.rank = worker.rank;
      end.local_rank = worker.local_rank;
      end.pid = process.pid;
      end.wait_status = process.wait_status;
      end.ended = process.ended;
      end.stopped_by_cohort = process.signalled;
      const auto& tail = worker.streams[1]->tail();
      end.stderr_tail.assign(tail.begin(), tail.end());
      end.running_at_timeout = worker.running_at_timeout;
      const bool stderr_later =
          worker.streams[1]->last_line_at() > worker.streams[0]->last_line_at();
      end.last_line = worker.streams[stderr_later ? 1 : 0]->last_line();
      input.workers.push_back(std::move(end));
    }
    return input;
  }

  int exit_code() const {
    const int first_failure = lifecycle_->first_failure();
    return lifecycle_->exit_code(
        first_failure >= 0 ? (*processes_)[static_cast<std::size_t>(first_failure)].wait_status
                           : 0);
  }

  RunOptions options_;
  detail::AgentPlan plan_;
  std::vector<int> signals_;
  std::string host_;
  std::unique_ptr<detail::EventLoop> loop_;
  // Before group_, whose store's thread writes them: they outlive it.
  Fd unservable_event_;          ///< readable once the store met a client it cannot serve
  std::mutex unservable_mutex_;  ///< guards unservable_, written on the store's thread
  std::string unservable_;
  std::unique_ptr<detail::NodeGroup> group_;
  detail::Placement placement_;
  std::unique_ptr<detail::Lifecycle> lifecycle_;  ///< what this attempt's events mean
  std::vector<std::string> attempts_;             ///< why each earlier attempt stopped
  int master_port_ = 0;                           ///< the workers' MASTER_PORT
  std::unique_ptr<detail::JobFiles> files_;
  detail::ThreadBudget threads_;
  std::unique_ptr<detail::Guardian> guardian_;
  std::vector<Worker> workers_;
  // After the guardian: destroyed first, it SIGKILLs workers still running.
  std::unique_ptr<detail::ProcessSet> processes_;
};

}  // namespace

int run(const RunOptions& options) {
  if (options.command.empty()) throw InvalidArgument("cohort run: no PROGRAM to run");
  if (!options.hosts.empty()) {
    if (options.entry) {
      throw InvalidArgument(
          "cohort::spawn: workers are forks of this process, so they cannot "
          "start on other hosts; start one process per host instead");
    }
    return detail::run_over_ssh(options);
  }
  // Started by another launcher (srun, mpirun): one agent per task, placed
  // by it; else alone, or one of several nodes placed by flags or at the
  // rendezvous.
  const Environment env = process_environment();
  detail::AgentPlan plan = detail::plan_agent(options, detect_launch(env), env);
  // PROGRAM is checked here on one node, on each node after the rendezvous
  // on several (so that the others hear of it at once).
  if (plan.group.nnodes == 1 && !options.entry) detail::check_program(options, env);
  const int code = Agent(options, std::move(plan)).run();
  // The workers' last lines and the report reach a console that reads; one
  // that stalls gets --grace to take them, then the job ends regardless.
  detail::console_flush(options.grace + std::chrono::seconds(1));
  return code;
}

int spawn(int nprocs, std::function<int()> fn, RunOptions options) {
  if (!fn) throw InvalidArgument("cohort::spawn: no function to run");
  options.nproc_per_node = nprocs;
  options.entry = std::move(fn);
  if (options.command.empty()) options.command = {"cohort::spawn"};
  return run(options);
}

}  // namespace cohort
