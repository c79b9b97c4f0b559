#include "launch/report.hpp"

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
    if (failed.stderr_tail.empty()) {
      row("stderr", cat("(rank ", failed.rank, " wrote nothing to stderr)"));
    } else {
      const std::size_t count = failed.stderr_tail.size();
      row("stderr", count == 1 ? cat("last line of rank ", failed.rank, ":")
                               : cat("last ", count, " lines of rank ", failed.rank, ":"));
      for (const std::string& text : failed.stderr_tail)
        line("    | " + text);
    }
    if (input.master_port != 0 && (says(failed.stderr_tail, "Address already in use") ||
                                   says(failed.stderr_tail, "EADDRINUSE"))) {
      row("why", cat("MASTER_PORT ", input.master_port, " on ", input.host,
                     " is taken by another process, so rank 0 could not listen there: drop "
                     "--master-port (cohort picks a free port) or choose another"));
    }
    // A .py PROGRAM run by the first python3 on PATH, which may not be the
    // one with PyTorch (a venv, pyenv, conda ...).
    if (!input.interpreter.empty() && says(failed.stderr_tail, "ModuleNotFoundError")) {
      row("why", cat("the script ran with ", input.interpreter,
                     ", which lacks a module it imports: give --python with the interpreter "
                     "that has it (Debian's PyTorch is /usr/bin/python3's)"));
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
  if (input.restarting) {
    line(cat("cohort run: restarting all ", input.workers.size(), " workers (restart ",
             input.attempt + 1, " of ", input.max_restarts, ")"));
  } else {
    if (!input.other_nodes.empty()) row("other nodes", input.other_nodes);
    row("exit status", std::to_string(input.exit_code));
  }
  return out;
}

}  // namespace cohort::detail
