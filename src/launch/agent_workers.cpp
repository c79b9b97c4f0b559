// The agent's workers (agent.hpp): started with their environment and
// output pipes, their output routed, and what the report says of them.
#include <algorithm>
#include <fstream>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/cpus.hpp"
#include "core/net_interfaces.hpp"
#include "core/peer_owner.hpp"
#include "core/strings.hpp"
#include "launch/agent.hpp"
#include "launch/console.hpp"
#include "launch/error_file.hpp"
#include "launch/exit_status.hpp"
#include "launch/gpu_failures.hpp"
#include "launch/launcher_variables.hpp"
#include "launch/program_check.hpp"
#include "launch/spawn.hpp"
#include "launch/worker_setup.hpp"

namespace cohort::detail {
namespace {

constexpr std::size_t kTailLines = 20;
constexpr int kRecordedFrames = 3;  // traceback frames of an error file in the report

// torchrun's --redirects / --tee value for one local rank: 1 stdout, 2 stderr, 3 both.
int streams_for(const std::map<int, int>& spec, int local_rank) {
  if (auto found = spec.find(local_rank); found != spec.end()) return found->second;
  if (auto all = spec.find(-1); all != spec.end()) return all->second;
  return 0;
}

// The interface through which the workers' libraries should reach each
// other (WorkerIdentity::socket_interface): COHORT_IFNAME when set; else
// the one holding --local-addr; else the one the kernel takes to
// `master_addr`, node 0's ("lo" when every worker is on this node). "" when
// unknown.
std::string workers_interface(const Environment& env, const std::string& local_addr,
                              const std::string& master_addr) {
  if (auto named = env.find("COHORT_IFNAME"); named != env.end() && !named->second.empty()) {
    return named->second;
  }
  return route_to_resolving_in_place(local_addr.empty() ? master_addr : local_addr).interface;
}

}  // namespace

// Read only when a worker failed, and only on a node with GPUs: sysfs for
// which GPU it used, the kernel's log for what the driver said meanwhile.
std::vector<std::string> Agent::gpu_lines(const std::vector<std::string>& stderr_tail,
                                          int local_rank, int local_workers) const {
  const Environment env = process_environment();
  const NodeGpus node = read_node_gpus(env, false);
  if (node.inventory.gpus.empty()) return {};
  std::vector<int> used;
  if (!devices_.empty()) {
    used = devices_.at(static_cast<std::size_t>(local_rank)).gpus;
  } else {
    try {  // as set_device(LOCAL_RANK) would have it
      used = place_workers(node.inventory, node.visible, {local_workers, 0, CpuBind::none, {}})
                 .at(static_cast<std::size_t>(local_rank))
                 .gpus;
    } catch (const std::exception&) {
    }
  }
  return gpu_failure_lines(stderr_tail, parse_kmsg(read_kernel_log(gpu_sources(env).root)),
                           started_usec_, node.inventory, used);
}

void Agent::spawn_all(int attempt) {
  const auto [master_addr, master_port] = master_of();
  master_port_ = master_port;
  const Environment base = process_environment();
  // Where the other nodes are: node 0's address, for which a relay's
  // TCPStore port stands in as MASTER_ADDR (127.0.0.1).
  StoreServer* const relay = group_->relay();
  const bool master_is_relay = relay != nullptr && relay->torch_port() >= 0;
  const std::string interface = workers_interface(
      base, options_.local_addr, master_is_relay ? group_->store_host() : master_addr);
  const std::string own_identity = detail::process_identity(getpid());
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
    identity.store_addr = relay != nullptr ? relay->host() : group_->store_host();
    identity.store_port = relay != nullptr ? relay->port() : group_->store_port();
    identity.job_token = group_->token();
    identity.store_munge = relay == nullptr && group_->munge();
    if (relay != nullptr || group_->serves_store()) identity.store_process = own_identity;
    // A program (not Python's, which speaks PyTorch's protocol, nor
    // cohort::spawn's forks) inherits a connection its store already
    // trusts: no TCP, no handshake (docs/run.md, COHORT_STORE_FD).
    StoreServer* local_store = relay != nullptr ? relay : group_->server();
    const Fd store_socket(local_store != nullptr && !role_.entry &&
                                  !detail::runs_with_python(options_)
                              ? local_store->trusted_socket()
                              : -1);
    identity.store_fd = store_socket.get();
    identity.error_file = worker.error_file = files_->error_file(attempt, worker.rank);
    identity.omp_threads = threads_.threads;
    identity.socket_interface = interface;
    std::vector<int> bound;  // empty: not bound (--cpu-bind none)
    if (!devices_.empty()) {
      const WorkerDevices& devices = devices_.at(static_cast<std::size_t>(place.local_rank));
      identity.cuda_visible_devices = devices.cuda_visible_devices;
      identity.cpus = format_cpu_list(devices.cpus);
      bound = devices.cpus;
      if (!bound.empty()) {
        identity.omp_threads = std::min(identity.omp_threads, static_cast<int>(bound.size()));
      }
    }

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
      watch_output(static_cast<std::size_t>(local), stream);
    }
    Environment env = detail::worker_environment(base, identity);
    if (!plan_.one_worker_per_task) {
      detail::describe_worker_to_launchers(env, place, placement_.layout);
    }
    // The worker announces its group to the guardian itself (see spawn_worker).
    const pid_t pid = role_.entry
                          ? detail::spawn_function(role_.entry, env, write_ends[0].get(),
                                                   write_ends[1].get(), guardian_.get(), bound)
                          : detail::spawn_worker(detail::worker_argv(options_, local), env,
                                                 write_ends[0].get(), write_ends[1].get(), -1,
                                                 guardian_.get(), bound, store_socket.get());
    worker.started = Timeline::Clock::now();
    processes_->add(pid);  // index `local`, as in workers_
  }
}

bool Agent::any_pipe_open() const {
  return std::any_of(workers_.begin(), workers_.end(),
                     [](const Worker& w) { return w.pipes[0].valid() || w.pipes[1].valid(); });
}

void Agent::watch_output(std::size_t local, int stream) {
  loop_->watch(workers_[local].pipes[stream].get(),
               [this, local, stream] { on_output(local, stream); });
}

void Agent::on_output(std::size_t local, int stream) {
  Worker& worker = workers_[local];
  if (detail::console_behind(worker.streams[stream]->console_fd())) {
    // The reader is slow: the worker waits in write(2) once its pipe is
    // full, as on a slow terminal, instead of its lines being dropped.
    loop_->unwatch(worker.pipes[stream].get());
    worker.paused[stream] = true;
    if (!loop_->has_deadline(kOutputDeadline)) {
      loop_->set_deadline(kOutputDeadline, kOutputRecheck, [this] { resume_output(); });
    }
    return;
  }
  char buffer[65536];
  const ssize_t n = detail::retry_eintr(
      [&] { return ::read(worker.pipes[stream].get(), buffer, sizeof(buffer)); });
  if (n > 0) {
    worker.streams[stream]->feed(std::string_view(buffer, static_cast<std::size_t>(n)));
  } else if (n == 0 || errno != EAGAIN) {
    close_pipe(worker, stream);
  }
}

void Agent::resume_output() {
  bool still = false;
  for (std::size_t local = 0; local < workers_.size(); ++local) {
    for (int stream = 0; stream < 2; ++stream) {
      Worker& worker = workers_[local];
      if (!worker.paused[stream]) continue;
      if (detail::console_behind(worker.streams[stream]->console_fd())) {
        still = true;
        continue;
      }
      worker.paused[stream] = false;
      watch_output(local, stream);
    }
  }
  if (still) loop_->set_deadline(kOutputDeadline, kOutputRecheck, [this] { resume_output(); });
}

bool Agent::output_held_back() const {
  return std::any_of(workers_.begin(), workers_.end(),
                     [](const Worker& w) { return w.paused[0] || w.paused[1]; });
}

void Agent::close_pipe(Worker& worker, int stream) {
  if (!worker.pipes[stream].valid()) return;
  worker.paused[stream] = false;
  worker.streams[stream]->finish();
  loop_->unwatch(worker.pipes[stream].get());  // (or not watched: paused)
  worker.pipes[stream].reset();
}

detail::ReportInput Agent::report_input(int attempt, bool restarting) const {
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
  if (!role_.entry && detail::runs_with_python(options_)) input.interpreter = options_.python;
  if (first_failure >= 0) {
    const Worker& failed = workers_[static_cast<std::size_t>(first_failure)];
    input.recorded = detail::read_error_file(failed.error_file, kRecordedFrames);
    const auto& tail = failed.streams[1]->tail();
    input.gpu_lines = gpu_lines(std::vector<std::string>(tail.begin(), tail.end()),
                                failed.local_rank, placement_.layout.mine.front().local_world_size);
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
    const bool stderr_later = worker.streams[1]->last_line_at() > worker.streams[0]->last_line_at();
    end.last_line = worker.streams[stderr_later ? 1 : 0]->last_line();
    input.workers.push_back(std::move(end));
  }
  return input;
}

}  // namespace cohort::detail
