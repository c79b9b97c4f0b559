// What each worker is started with: its command line and its environment.
// Pure functions of the options, so every case is a unit test.
#pragma once

#include <string>
#include <vector>

#include <cohort/launch.hpp>
#include <cohort/launch_env.hpp>

namespace cohort::detail {

/// Who a worker is and how it reaches the others.
struct WorkerIdentity {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int node_rank = 0;  ///< GROUP_RANK: its node
  int num_nodes = 1;  ///< GROUP_WORLD_SIZE
  int restart_count = 0;
  int max_restarts = 0;
  std::string run_id;
  std::string role = "default";
  std::string master_addr;
  int master_port = 0;
  bool agent_store = false;  ///< MASTER_ADDR:MASTER_PORT is the agent's TCPStore
  std::string store_addr;    ///< the agent's cohort store
  int store_port = 0;
  std::string job_token;
  bool store_munge = false;  ///< workers prove themselves with MUNGE (COHORT_STORE_MUNGE=1)
  /// The store's process when it runs on the worker's host
  /// (COHORT_STORE_PROCESS, core/peer_owner.hpp's process_identity); "" elsewhere.
  std::string store_process;
  /// A socket of the store's it inherits, already trusted
  /// (StoreServer::trusted_socket, COHORT_STORE_FD); -1 for none.
  int store_fd = -1;
  std::string error_file;  ///< TORCHELASTIC_ERROR_FILE; "" for none
  int omp_threads = 0;     ///< OMP_NUM_THREADS when it is unset; 0 leaves it unset
  /// The network interface that reaches the job's other nodes (the one
  /// cohort uses to reach MASTER_ADDR): GLOO_SOCKET_IFNAME,
  /// NCCL_SOCKET_IFNAME and TP_SOCKET_IFNAME, each when unset; "" leaves them.
  std::string socket_interface;
  /// CUDA_VISIBLE_DEVICES of its own (--gpus-per-proc), with
  /// CUDA_DEVICE_ORDER=PCI_BUS_ID when unset, so that indices mean what
  /// nvidia-smi and cohort env show; "" leaves both.
  std::string cuda_visible_devices;
  /// The CPUs it is bound to (--cpu-bind), as COHORT_CPUS; "" for none.
  std::string cpus;
};

/// PROGRAM ARGS: `python PROGRAM ARGS` for a .py program (or with
/// `run_path`), `python -m PROGRAM ARGS` with `module`, PROGRAM as it is with
/// `no_python`; the local rank appended under `local_rank_arg`.
std::vector<std::string> worker_argv(const RunOptions& options, int local_rank);

/// Whether worker_argv runs PROGRAM with the Python interpreter.
bool runs_with_python(const RunOptions& options);

/// `base` plus torchrun's variables (RANK LOCAL_RANK WORLD_SIZE
/// LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE ROLE_RANK ROLE_WORLD_SIZE
/// ROLE_NAME MASTER_ADDR MASTER_PORT TORCHELASTIC_RUN_ID
/// TORCHELASTIC_RESTART_COUNT TORCHELASTIC_MAX_RESTARTS
/// TORCHELASTIC_USE_AGENT_STORE TORCHELASTIC_ERROR_FILE, and
/// TORCH_NCCL_ASYNC_ERROR_HANDLING=1 unless it or NCCL_ASYNC_ERROR_HANDLING
/// is set) and cohort's (COHORT_RUN_ID COHORT_STORE_ADDR
/// COHORT_STORE_PORT COHORT_STORE_FD COHORT_JOB_TOKEN COHORT_STORE_MUNGE); OMP_NUM_THREADS and
/// the *_SOCKET_IFNAME variables when unset.
Environment worker_environment(const Environment& base, const WorkerIdentity& worker);

}  // namespace cohort::detail
