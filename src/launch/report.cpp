#include "launch/report.hpp"

#include <algorithm>
#include <ctime>

#include <signal.h>
#include <sys/wait.h>

#include "core/strings.hpp"
#include "launch/exit_status.hpp"

namespace cohort::detail {

std::string format_utc(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count() % 1000;
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &parts);
  char with_millis[48];
  std::snprintf(with_millis, sizeof(with_millis), "%s.%03d UTC", text, static_cast<int>(millis));
  return with_millis;
}

namespace {

// PyTorch's rank 0 binds MASTER_PORT for its TCPStore; when something else
// holds it, its RuntimeError says errno 98 deep in a traceback.
bool says(const std::vector<std::string>& tail, std::string_view what) {
  for (const std::string& line : tail) {
    if (line.find(what) != std::string::npos) return true;
  }
  return false;
}

// Why rank 0 could not listen on MASTER_PORT, and what to do.
std::string port_taken(const ReportInput& input) {
  if (input.agent_store) {
    return cat("MASTER_PORT ", input.master_port, " on ", input.host,
               " is served by cohort's agent (TORCHELASTIC_USE_AGENT_STORE=True), and the "
               "script tried to listen there itself (its own TCPStore server, or a tcp:// "
               "init_method): let every rank connect as a client, or run with --no-agent-store");
  }
  return cat("MASTER_PORT ", input.master_port, " on ", input.host,
             " is taken by another process, so rank 0 could not listen there",
             input.master_port_given
                 ? ": drop --master-port (cohort picks a free port) or choose another"
                 : ": another job, or a second rank 0 of this one (a script that takes its rank "
                   "from elsewhere than RANK?)");
}

}  // namespace

std::string failure_report(const ReportInput& input) {
  std::string out;
  const auto line = [&out](const std::string& text) { out += text + "\n"; };
  const auto row = [&line](const char* label, const std::string& text) {
    line(cat("  ", label, std::string(14 - std::string(label).size(), ' '), text));
  };

  if (input.first_failure >= 0) {
    const ReportInput::WorkerEnd& failed =
        input.workers[static_cast<std::size_t>(input.first_failure)];
    line(cat("cohort run: rank ", failed.rank, " failed: ", describe_exit(failed.wait_status)));
    row("where", cat("host ", input.host, ", rank ", failed.rank, " (local rank ",
                     failed.local_rank, "), pid ", failed.pid, ", at ", format_utc(failed.ended)));
    if (input.recorded) {
      const RecordedError& recorded = *input.recorded;
      const std::size_t newline = recorded.message.find('\n');
      row("error", recorded.message.substr(0, newline));
      if (newline != std::string::npos) {
        for (std::size_t start = newline + 1; start < recorded.message.size();) {
          const std::size_t end =
              std::min(recorded.message.find('\n', start), recorded.message.size());
          line("    | " + recorded.message.substr(start, end - start));
          start = end + 1;
        }
      }
      if (!recorded.frames.empty()) {
        const std::size_t shown =
            std::count_if(recorded.frames.begin(), recorded.frames.end(),
                          [](const std::string& text) { return text.rfind("File ", 0) == 0; });
        row("traceback", cat(shown == static_cast<std::size_t>(recorded.frame_count)
                                 ? cat(shown == 1 ? "its frame" : cat("its ", shown, " frames"))
                                 : cat("last ", shown, " of ", recorded.frame_count, " frames"),
                             " (from TORCHELASTIC_ERROR_FILE, written by @record):"));
        for (const std::string& text : recorded.frames)
          line("    | " + text);
      }
    } else if (failed.stderr_tail.empty()) {
      row("stderr", cat("(rank ", failed.rank, " wrote nothing to stderr)"));
    } else {
      const std::size_t count = failed.stderr_tail.size();
      row("stderr", count == 1 ? cat("last line of rank ", failed.rank, ":")
                               : cat("last ", count, " lines of rank ", failed.rank, ":"));
      for (const std::string& text : failed.stderr_tail)
        line("    | " + text);
    }
    for (const std::string& gpu : input.gpu_lines)
      row("gpu", gpu);
    const bool in_use = says(failed.stderr_tail, "Address already in use") ||
                        says(failed.stderr_tail, "EADDRINUSE");
    // MASTER_PORT is rank 0's to listen on: a rank that names it, or rank 0.
    if (in_use && input.master_port != 0 &&
        (failed.rank == 0 || says(failed.stderr_tail, cat(input.master_port)))) {
      row("why", port_taken(input));
    } else if (in_use || says(failed.stderr_tail, "Cannot assign requested address") ||
               says(failed.stderr_tail, "EADDRNOTAVAIL")) {
      row("why", cat("this host ran out of ephemeral ports for the ranks' connections (",
                     input.ephemeral_ports.empty() ? std::string("net.ipv4.ip_local_port_range")
                                                   : "ports " + input.ephemeral_ports,
                     "; a full mesh of N ranks holds about N*N connections per node): widen "
                     "net.ipv4.ip_local_port_range, or run fewer ranks per node"));
    } else if (says(failed.stderr_tail, "Too many open files") ||
               says(failed.stderr_tail, "EMFILE")) {
      row("why", cat("rank ", failed.rank, " ran out of file descriptors (the limit is ",
                     input.open_files_limit,
                     " per process, ulimit -n): raise it (ulimit -n, or LimitNOFILE for a "
                     "service), or run fewer ranks per node"));
    }
    if (input.under_mpirun &&
        (says(failed.stderr_tail, "MPI_Init") || says(failed.stderr_tail, "MPI_INIT") ||
         says(failed.stderr_tail, "PMI_Init"))) {
      row("why",
          "PROGRAM is an MPI program, and cohort run, one task of mpirun, already used "
          "this rank's connection to mpirun to find rank 0: start MPI programs with "
          "mpirun alone (mpirun -np N PROGRAM); cohort run under mpirun is for programs "
          "that are not MPI processes (PyTorch over gloo or NCCL, cohort programs)");
    }
    if (says(failed.stderr_tail, "was build without libuv support") ||
        says(failed.stderr_tail, "was built without libuv support")) {
      row("why",
          "this PyTorch was built without libuv (as Debian 13's python3-torch is; pip's builds "
          "have it), and every TCPStore it makes, a client too, asks for libuv unless told "
          "use_libuv=False; its clients speak the same protocol either way: make "
          "TCPStore(..., use_libuv=False), or default it so in a sitecustomize.py on "
          "PYTHONPATH (cohort's tests/python/without-libuv/ has one)");
    }
    // A .py PROGRAM run by the first python3 on PATH, which may not be the
    // one with PyTorch (a venv, pyenv, conda ...).
    if (!input.interpreter.empty() && says(failed.stderr_tail, "ModuleNotFoundError")) {
      row("why", cat("the script ran with ", input.interpreter,
                     ", which lacks a module it imports: give --python with the interpreter "
                     "that has it (Debian's PyTorch is /usr/bin/python3's)"));
    }
  } else if (!input.unservable.empty()) {
    line(cat("cohort run: stopped the job at once: a worker can never rendezvous: ",
             input.unservable));
  } else if (input.timeout.count() > 0) {
    line(cat("cohort run: the job ran past --timeout ",
             static_cast<double>(input.timeout.count()) / 1000,
             " s; what each rank still running printed last:"));
    for (const ReportInput::WorkerEnd& worker : input.workers) {
      if (!worker.running_at_timeout) continue;
      row("running",
          cat("rank ", worker.rank, " (pid ", worker.pid, "): ",
              worker.last_line.empty() ? std::string("printed nothing") : "| " + worker.last_line));
    }
  } else if (input.stop_signal != 0) {
    line(cat("cohort run: stopped by ", signal_name(input.stop_signal),
             "; it was passed on to every worker, SIGKILL followed after ", input.grace.count(),
             " ms for those still running"));
  }

  const char* label = input.first_failure >= 0 ? "others" : "workers";
  for (std::size_t i = 0; i < input.workers.size(); ++i) {
    if (static_cast<int>(i) == input.first_failure) continue;
    const ReportInput::WorkerEnd& worker = input.workers[i];
    std::string fate = describe_exit(worker.wait_status);
    if (worker.stopped_by_cohort &&
        !(WIFEXITED(worker.wait_status) && WEXITSTATUS(worker.wait_status) == 0)) {
      fate = WIFSIGNALED(worker.wait_status)
                 ? cat("stopped by cohort (", signal_name(WTERMSIG(worker.wait_status)), ")")
                 : cat(fate, " after cohort asked it to stop");
    }
    row(label, cat("rank ", worker.rank, " (pid ", worker.pid, "): ", fate));
    label = "";
  }
  if (!input.other_nodes.empty()) row("other nodes", input.other_nodes);
  if (input.restarting) {
    line(cat("cohort run: restarting all ", input.workers.size(), " workers",
             input.other_nodes.empty() ? "" : " here and every other node's", " (restart ",
             input.attempt + 1, " of ", input.max_restarts, ")"));
  } else {
    row("exit status", std::to_string(input.exit_code));
  }
  return out;
}

}  // namespace cohort::detail
