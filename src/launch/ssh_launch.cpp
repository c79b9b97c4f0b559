#include "launch/ssh_launch.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"
#include "core/net_interfaces.hpp"
#include "core/strings.hpp"
#include "launch/console.hpp"
#include "launch/event_loop.hpp"
#include "launch/exit_status.hpp"
#include "launch/node_group.hpp"
#include "launch/output.hpp"
#include "launch/process_set.hpp"
#include "launch/run_plan.hpp"
#include "launch/spawn.hpp"
#include "launch/thread_message.hpp"
#include "launch/timeline.hpp"

namespace cohort::detail {
namespace {

std::vector<std::string> split_words(std::string_view text, std::string_view separators) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find_first_of(separators, start), text.size());
    if (end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

int parse_slots(std::string_view text, std::string_view where) {
  auto slots = parse_int(text);
  if (!slots || *slots < 1 || *slots > 4096) {
    throw InvalidArgument(cat(where, ": slots '", text, "' is not a number from 1 to 4096"));
  }
  return static_cast<int>(*slots);
}

// 'text' for a POSIX shell, whatever it holds.
std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// A remote agent, beside its ssh process (the process set's member of the
// same index).
struct Agent {
  std::string host;
  Fd stdin_pipe;  // write end: closing it tells the remote agent to stop
};

// The launcher's deadlines: hang up on the agents, then SIGKILL their ssh;
// the job's --timeout, should the agents not keep it themselves.
constexpr int kKillDeadline = 0;
constexpr int kTimeoutDeadline = 1;
// What an agent gets beyond the grace to stop, report and exit.
constexpr std::chrono::seconds kAgentSlack{5};

// The plan into the agent's empty pipe, made large enough that writing it
// never waits for ssh (which reads it only once connected). Best effort: a
// pipe that stays small blocks until that agent's ssh takes the rest.
void write_plan(int fd, const std::string& text) {
  if (text.size() > 65536) (void)fcntl(fd, F_SETPIPE_SZ, static_cast<int>(text.size()));
  write_fully(fd, text);
}

}  // namespace

std::vector<RunOptions::Host> parse_hostfile(std::string_view text, std::string_view source) {
  std::vector<RunOptions::Host> hosts;
  int number = 0;
  // Line by line, empty ones included: errors name the line as an editor does.
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string raw(text.substr(start, end - start));
    start = end + 1;
    ++number;
    const std::string line = raw.substr(0, raw.find('#'));
    const std::vector<std::string> words = split_words(line, " \t\r");
    if (words.empty()) continue;
    RunOptions::Host host{words[0], 0};
    const std::string where = cat(source, " line ", number);
    for (std::size_t i = 1; i < words.size(); ++i) {
      const std::string& word = words[i];
      if (word.rfind("slots=", 0) == 0) {
        host.slots = parse_slots(word.substr(6), where);
      } else if (word.rfind("max_slots=", 0) != 0) {
        throw InvalidArgument(
            cat(where, ": '", word, "' is not understood (expected `host [slots=N]`)"));
      }
    }
    hosts.push_back(host);
  }
  if (hosts.empty()) {
    throw InvalidArgument(cat(source, " names no host (expected lines `host [slots=N]`)"));
  }
  return hosts;
}

std::vector<RunOptions::Host> parse_host_list(std::string_view list) {
  std::vector<RunOptions::Host> hosts;
  for (const std::string& item : split_words(list, ",")) {
    const std::size_t colon = item.rfind(':');
    RunOptions::Host host{item.substr(0, colon), 0};
    if (colon != std::string::npos) host.slots = parse_slots(item.substr(colon + 1), "--hosts");
    if (host.name.empty()) throw InvalidArgument(cat("--hosts '", list, "': empty host name"));
    hosts.push_back(host);
  }
  if (hosts.empty()) throw InvalidArgument("--hosts is empty (expected h1:2,h2:2)");
  return hosts;
}

RunPlan remote_agent_plan(const RunOptions& options, int node_rank, const StoreEndpoint& store) {
  const auto index = static_cast<std::size_t>(node_rank);
  RunPlan whole{options, {}};
  RunOptions& plan = whole.options;
  if (options.hosts[index].slots > 0) plan.nproc_per_node = options.hosts[index].slots;
  plan.nnodes = static_cast<int>(options.hosts.size());
  plan.node_rank = node_rank;
  plan.master_addr = options.hosts.front().name;
  plan.master_port = 0;  // node 0's agent picks the workers' MASTER_PORT
  plan.rdzv_host = store.host;
  plan.rdzv_port = store.port;
  whole.role.store_served_elsewhere = true;
  whole.role.stop_on_stdin_eof = true;
  whole.role.node_hosts.reserve(options.hosts.size());
  for (const RunOptions::Host& host : options.hosts)
    whole.role.node_hosts.push_back(host.name);
  plan.local_addr.clear();  // this host's, not the remote one's
  // The remote agent starts workers, not more agents.
  plan.hosts.clear();
  plan.ssh = RunOptions().ssh;
  plan.remote_cohort.clear();
  plan.forward_env.clear();
  plan.forward_env_prefixes.clear();
  return whole;
}

std::string remote_agent_command(const RunOptions& options, const std::string& cwd,
                                 const std::string& cohort_path, const Environment& env) {
  std::vector<std::string> words{"env"};
  for (const auto& [name, value] : env) {
    bool wanted = std::find(options.forward_env.begin(), options.forward_env.end(), name) !=
                  options.forward_env.end();
    for (const std::string& prefix : options.forward_env_prefixes)
      wanted = wanted || name.rfind(prefix, 0) == 0;
    if (wanted) words.push_back(cat(name, "=", value));
  }
  words.insert(words.end(), {cohort_path, "agent"});
  std::string command = cat("cd ", shell_quote(cwd), " && exec");
  for (const std::string& word : words)
    command += " " + shell_quote(word);
  return command;
}

namespace {

class SshLauncher {
 public:
  explicit SshLauncher(RunOptions options) : options_(std::move(options)) {
    if (options_.run_id.empty()) options_.run_id = random_hex(8);
    for (const RunOptions::Host& host : options_.hosts) {
      if (host.name.empty() || host.name[0] == '-') {
        throw InvalidArgument(cat("cohort run: '", host.name, "' is not a host name"));
      }
    }
  }

  int run() {
    sigset_t handled;
    sigemptyset(&handled);
    for (int signal : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT})
      sigaddset(&handled, signal);
    // Before the store's thread starts, which inherits the blocked signals.
    loop_ = std::make_unique<EventLoop>(handled);
    processes_ = std::make_unique<ProcessSet>(*loop_, system_processes(), kKillDeadline);
    loop_->on_signal([this](int signal) { on_signal(signal); });

    const Route route = route_to(options_.hosts.front().name);
    if (!route.found) {
      throw Error(cat("cohort run: cannot reach the first host, ", options_.hosts.front().name,
                      ": ", route.error));
    }
    NodeGroupOptions group;
    group.nnodes = static_cast<int>(options_.hosts.size());
    group.node_rank = -1;
    group.store_host = route.source_address;
    group.bind_host = route.source_address;            // where the agents reach it
    group.torch_port = options_.agent_store ? 0 : -1;  // the workers' MASTER_PORT
    group.token = random_hex(16);
    group.token_is_secret = true;  // it travels on ssh's standard input only
    group.rendezvous_timeout = options_.rendezvous_timeout;
    group.heartbeat_timeout = options_.heartbeat_timeout;
    group.trace = !options_.trace.empty();
    for (const RunOptions::Host& host : options_.hosts)
      group.node_hosts.push_back(host.name);
    group.max_restarts = options_.max_restarts;
    group.min_nodes = options_.min_nodes;
    group.last_call = options_.last_call;
    // A worker whose PyTorch this store cannot serve would wait out the
    // rendezvous timeout: stop the job now, saying why.
    group.on_unservable = [this](const std::string& why) { unservable_.post(why); };
    loop_->watch(unservable_.fd(), [this] {
      const std::string why = unservable_.take();
      if (!stopping_) stop(1, cat("a worker can never rendezvous: ", why));
    });
    group_ = std::make_unique<NodeGroup>(group);
    group_->start_watching(options_.run_id);

    loop_->watch(group_->event_fd(), [this] { on_group_event(); });
    if (!options_.trace.empty()) {
      timeline_ = std::make_unique<Timeline>(-1, route.source_address);
      std::vector<std::string> hosts;
      hosts.reserve(options_.hosts.size());
      for (const RunOptions::Host& host : options_.hosts)
        hosts.push_back(host.name);
      timeline_->instant("agents started", Timeline::kAgentTrack, {{"hosts", join(hosts, ",")}});
    }
    start_agents({route.source_address, group_->store_port()});
    if (options_.timeout.count() > 0) {
      // Each agent keeps the time limit and reports what its ranks printed
      // last; this is the backstop for agents that cannot.
      loop_->set_deadline(
          kTimeoutDeadline, options_.timeout + options_.grace + kAgentSlack, [this] {
            if (!stopping_) {
              stop(124, cat("the job ran past its time limit (--timeout ", options_.timeout.count(),
                            " ms) and its agents did not stop it"));
            }
          });
    }
    while (processes_->any_running())
      loop_->turn();
    if (record_ && (record_->node_lost || record_->node < 0 || record_->rank < 0)) {
      console_write(STDERR_FILENO, cat("cohort run: the job stopped: ", record_->summary,
                                       "; exit status ", record_->exit_code, "\n"));
    }
    const int code = exit_code();
    if (timeline_) write_trace(code);
    return code;
  }

 private:
  int exit_code() {
    if (record_) return record_->exit_code;
    // Elastic: the agents of the last round only (the job went on without
    // the others; each one's id is its host's index).
    const std::vector<int> last_round = group_->members();
    int code = 0;
    for (std::size_t node = 0; node < processes_->size(); ++node) {
      if (std::find(last_round.begin(), last_round.end(), static_cast<int>(node)) ==
          last_round.end()) {
        continue;
      }
      code = std::max(code, shell_exit_code((*processes_)[node].wait_status));
    }
    return code;
  }

  // Every agent has ended: their events are in the store, or never will be.
  void write_trace(int code) {
    timeline_->instant("exit", Timeline::kAgentTrack, {{"exit_status", cat(code)}});
    std::vector<int> ids(options_.hosts.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::vector<std::string> parts = group_->gather_traces(ids, std::chrono::seconds(1));
    parts.push_back(timeline_->events());
    write_job_trace(options_.trace, parts, options_.run_id, options_.command, code);
  }

  // Each attempt's stop, once.
  void trace_stop(const StopRecord& record) {
    if (!timeline_ || traced_stop_ == cat(group_->attempt(), record.encode())) return;
    traced_stop_ = cat(group_->attempt(), record.encode());
    timeline_->instant("stop", Timeline::kAgentTrack,
                       {{"reason", record.summary},
                        {"node", cat(record.node)},
                        {"attempt", cat(group_->attempt())}});
  }

  void start_agents(const StoreEndpoint& store) {
    const Environment env = process_environment();
    const std::string cwd = current_directory();
    std::string cohort =
        options_.remote_cohort.empty() ? executable_path() : options_.remote_cohort;
    if (cohort.empty()) cohort = "cohort";
    const std::vector<std::string> ssh = split_words(options_.ssh, " ");
    if (ssh.empty()) throw InvalidArgument("cohort run: --ssh is empty");
    agents_.resize(options_.hosts.size());
    for (std::size_t node = 0; node < options_.hosts.size(); ++node) {
      Agent& agent = agents_[node];
      agent.host = options_.hosts[node].name;
      int ends[2];
      if (pipe2(ends, O_CLOEXEC) != 0) {
        throw Error(cat("cohort run: pipe2 failed: ", errno_text(errno)));
      }
      Fd read_end(ends[0]);
      agent.stdin_pipe = Fd(ends[1]);
      std::vector<std::string> argv = ssh;
      argv.push_back(agent.host);
      argv.push_back(remote_agent_command(options_, cwd, cohort, env));
      RunPlan plan = remote_agent_plan(options_, static_cast<int>(node), store);
      // On the agent's standard input only, never on a command line, which
      // every local user can read.
      plan.options.job_token = group_->token();
      const std::string text = encode_run_plan(plan);
      processes_->add(spawn_worker(argv, env, STDOUT_FILENO, STDERR_FILENO, read_end.get()));
      write_plan(agent.stdin_pipe.get(), text);
    }
  }

  void on_signal(int signal) {
    if (signal == SIGCHLD) {
      reap();
    } else if (!stopping_) {
      stop(stop_exit_code(signal),
           cat("cohort run --hostfile was stopped by ", signal_name(signal)));
    } else {
      hang_up();  // asked twice: no more grace
    }
  }

  void stop(int code, const std::string& summary) {
    StopRecord mine;
    mine.node = -1;
    mine.exit_code = code;
    mine.summary = summary;
    record_ = group_->declare_stop(mine);
    trace_stop(*record_);
    begin_stopping();
  }

  // The agents stop their workers on their own (grace included); if they do
  // not end in time, their ssh connections are closed, then killed.
  void begin_stopping() {
    if (stopping_) return;
    stopping_ = true;
    loop_->set_deadline(kKillDeadline, options_.grace + kAgentSlack, [this] {
      hang_up();
      loop_->set_deadline(kKillDeadline, kAgentSlack,
                          [this] { processes_->signal_all(SIGKILL, true); });
    });
  }

  void hang_up() {
    for (Agent& agent : agents_)
      agent.stdin_pipe.reset();
  }

  void on_group_event() {
    std::uint64_t count = 0;
    (void)!::read(group_->event_fd(), &count, sizeof(count));
    auto record = group_->stop_record();
    if (!record) return;
    trace_stop(*record);
    if (!record_ && !stopping_ && group_->elastic()) {
      // This launcher serves the store: it decides how the attempt ended
      // for every agent, and closes the next round (elastic membership).
      try {
        const NodeGroup::Verdict verdict = group_->settle(*record, options_.grace);
        if (verdict.restart) return;
        record = verdict.stop;
      } catch (const Error& error) {
        console_write(STDERR_FILENO, cat(error.what(), "\n"));
      }
    } else if (!record_ && !stopping_ && group_->restartable(*record)) {
      // The agents restart their workers together; this launcher follows
      // them into the next attempt (they report it).
      try {
        group_->begin_next_attempt(*record, options_.grace);
        return;
      } catch (const Timeout& error) {
        console_write(STDERR_FILENO, cat(error.what(), "\n"));
      }
    }
    if (!record_) record_ = record;
    begin_stopping();
  }

  void reap() {
    processes_->reap([](std::size_t) {}, [this](std::size_t node) { on_agent_ended(node); });
  }

  // The agent ended badly without telling the others (ssh could not
  // connect, cohort is missing there ...): stop the job.
  void on_agent_ended(std::size_t node) {
    const std::string& host = agents_[node].host;
    const int exit_code = shell_exit_code((*processes_)[node].wait_status);
    if (exit_code == 0 || record_) return;
    if (group_->elastic()) {
      // The heartbeats tell the others (a member of the attempt under way is
      // lost; one not taken in yet is left out of the next round).
      console_write(STDERR_FILENO, cat("cohort run: the agent on ", host, " (node ", node,
                                       ") ended with exit status ", exit_code,
                                       "; the job goes on without it while at least ",
                                       options_.min_nodes, " nodes remain\n"));
      return;
    }
    StopRecord lost;
    lost.node = static_cast<int>(node);
    lost.host = host;
    lost.node_lost = true;
    lost.exit_code = exit_code;
    lost.summary =
        cat("the agent on ", host, " (node ", node, ") ended with exit status ", exit_code,
            exit_code == 255 ? cat(": ssh failed; check that `", options_.ssh, " ", host,
                                   " true` works without a password")
                             : std::string());
    record_ = group_->declare_stop(lost);
    trace_stop(*record_);
    begin_stopping();
  }

  RunOptions options_;
  std::unique_ptr<EventLoop> loop_;
  ThreadMessage unservable_;  // from the store's thread; before group_, which it outlives
  std::unique_ptr<NodeGroup> group_;
  std::vector<Agent> agents_;
  // Destroyed first: it SIGKILLs the ssh processes still running.
  std::unique_ptr<ProcessSet> processes_;
  std::optional<StopRecord> record_;
  bool stopping_ = false;
  std::unique_ptr<Timeline> timeline_;  // with --trace
  std::string traced_stop_;             // the attempt and stop last traced
};

}  // namespace

int run_over_ssh(const RunOptions& options) {
  const int code = SshLauncher(options).run();
  console_flush(options.grace + std::chrono::seconds(1));
  return code;
}

}  // namespace cohort::detail
