// The failure report `cohort run` prints on stderr when a job stops: who
// failed first (host, rank, local rank, pid, time), why (exit code or signal,
// with hints), that rank's last stderr lines, what became of the others, and
// the exit status.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "launch/error_file.hpp"

namespace cohort::detail {

struct ReportInput {
  struct WorkerEnd {
    int rank = 0;
    int local_rank = 0;
    pid_t pid = 0;
    int wait_status = 0;
    std::chrono::system_clock::time_point ended;
    bool stopped_by_cohort = false;  ///< cohort signalled it before it ended
    std::vector<std::string> stderr_tail;
    bool running_at_timeout = false;  ///< still running when --timeout passed
    std::string last_line;            ///< its last line of output, either stream
  };
  std::string host;
  int attempt = 0;
  int max_restarts = 0;
  bool restarting = false;
  int stop_signal = 0;                   ///< the signal that stopped the job, or 0
  std::chrono::milliseconds timeout{0};  ///< the --timeout that stopped the job, or 0
  /// Why a worker can never rendezvous (the agent's store cannot serve its
  /// PyTorch client), when that stopped the job; "" otherwise.
  std::string unservable;
  int first_failure = -1;  ///< index into `workers` of the first failure, or -1
  std::chrono::milliseconds grace{0};
  int exit_code = 0;
  std::vector<WorkerEnd> workers;
  std::string other_nodes;         ///< what became of the job's other nodes; "" on one node
  int master_port = 0;             ///< the workers' MASTER_PORT, for the hint when it was taken
  bool master_port_given = false;  ///< ... and the user chose it (--master-port)
  bool agent_store = false;        ///< ... and the agent serves it (TORCHELASTIC_USE_AGENT_STORE)
  std::string ephemeral_ports;     ///< "32768-60999" (net.ipv4.ip_local_port_range), for hints
  long open_files_limit = 0;       ///< the workers' RLIMIT_NOFILE, for hints
  /// The agent is one task of mpirun and used its rank's PMI connection, so
  /// a worker that is itself an MPI program cannot (the hint when MPI_Init fails).
  bool under_mpirun = false;
  std::string
      interpreter;  ///< what ran a .py PROGRAM ("python3"), for the hint when it lacks a module
  /// What the first failed worker wrote to its TORCHELASTIC_ERROR_FILE (@record):
  /// quoted instead of its stderr lines.
  std::optional<RecordedError> recorded;
  /// What is known of the first failed worker's GPUs: its CUDA error, the
  /// driver's kernel-log lines during the job (gpu_failures.hpp).
  std::vector<std::string> gpu_lines;
};

/// The report, several lines, each ending in '\n'.
std::string failure_report(const ReportInput& input);

/// "2026-11-21 21:30:01.234 UTC".
std::string format_utc(std::chrono::system_clock::time_point time);

}  // namespace cohort::detail
