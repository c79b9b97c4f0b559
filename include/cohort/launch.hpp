// Launching: `cohort run`'s agent as a library call. It starts the job's
// rendezvous store, spawns the workers with torchrun's environment plus
// cohort's, routes their output, supervises them (the first failure stops
// them all), reports the failure, and restarts the group when asked.
// docs/run.md describes the behaviour in full.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cohort {

struct RunOptions {
  /// PROGRAM and its arguments. A PROGRAM ending in ".py" runs with `python`
  /// (see `module`, `no_python`, `run_path` for torchrun's other forms).
  std::vector<std::string> command;
  int nproc_per_node = 1;
  /// MASTER_ADDR / MASTER_PORT on one node. With `agent_store` the agent
  /// serves PyTorch's TCPStore protocol there (port 0: a free port); without,
  /// it is rank 0's to bind, as under torchrun 1.x (port 0: one free at start).
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  /// TORCHELASTIC_USE_AGENT_STORE=True: the agent's store serves the workers'
  /// PyTorch rendezvous (every rank a client, so none races rank 0's listen).
  bool agent_store = true;
  /// GPUs of its own for each worker (cohort run --gpus-per-proc): its
  /// CUDA_VISIBLE_DEVICES is its slice of what the node allows. 0: every
  /// worker sees them all, as under torchrun (set_device(LOCAL_RANK)).
  int gpus_per_proc = 0;
  /// "none", "numa", "gpu" or "cores" (cohort run --cpu-bind): the CPUs each
  /// worker is bound to, near its GPU or a fair share of this task's.
  std::string cpu_bind = "none";
  /// Restarts of the whole worker group after a failure, for the whole job.
  int max_restarts = 0;
  /// Between SIGTERM and SIGKILL, on every stop path.
  std::chrono::milliseconds grace{5000};
  /// The whole job's time limit, restarts included (mpirun's --timeout); 0:
  /// none. Past it the job stops with exit status 124 and a report of what
  /// each rank still running printed last.
  std::chrono::milliseconds timeout{0};
  /// Signals forwarded to the workers, by name ("TERM", "SIGUSR1") or number.
  /// TERM, INT, HUP and QUIT also stop the job (SIGKILL after `grace`); the
  /// others (USR1, USR2) are only passed on. Empty: TERM INT HUP QUIT USR1 USR2.
  std::vector<std::string> signals;
  /// Per-rank files DIR/attempt_<k>/rank_<r>/{stdout,stderr}.log; "" for none.
  std::string log_dir;
  /// The job's timeline, gathered from every node into this file as Chrome
  /// trace-event JSON (ui.perfetto.dev, chrome://tracing); "" for none.
  std::string trace;
  /// Console line prefix with {rank}, {local_rank}, {host}; nullopt: "[{rank}] "
  /// when there is more than one worker on one node, "[{host}:{rank}] " on
  /// several nodes, none for a single worker; "" for none.
  std::optional<std::string> prefix;
  /// Ranks whose output reaches the console; empty: all. Log files get all.
  std::set<int> console_ranks;
  /// The same by local rank (torchrun's --local-ranks-filter); empty: all.
  std::set<int> console_local_ranks;
  /// torchrun's --redirects / --tee, by local rank (-1: every local rank not
  /// named): 1 stdout, 2 stderr, 3 both. A redirected stream goes to its log
  /// file only, a teed one to the console and its file (log_dir, or a
  /// directory made for the job when log_dir is "").
  std::map<int, int> redirects;
  std::map<int, int> tee;
  /// Legacy torch.distributed.launch: append the local rank to the arguments,
  /// as `--local_rank=N` (PyTorch 1.x) or `--local-rank=N` (2.x).
  enum class LocalRankArg { none, underscore, dash };
  LocalRankArg local_rank_arg = LocalRankArg::none;
  /// ROLE_NAME of the workers.
  std::string role = "default";
  /// COHORT_RUN_ID / TORCHELASTIC_RUN_ID; "": a random id.
  std::string run_id;
  /// Interpreter for .py programs.
  std::string python = "python3";
  /// `python -m PROGRAM` (torchrun -m); PROGRAM run as it is, .py or not
  /// (torchrun --no-python); `python PROGRAM` whatever its name (--run-path).
  bool module = false;
  bool no_python = false;
  bool run_path = false;

  // --- several nodes: one agent (one cohort::run) per node -------------------
  /// Agents in the job and this one's rank among them. With nnodes > 1 the
  /// agents meet at the job's store on rdzv_host:rdzv_port, served by node 0's
  /// agent (or, with store_served_elsewhere, by whoever started the agents);
  /// ranks are contiguous per node, in node order; the first failure on any
  /// node stops every node; master_addr is node 0's address as every node
  /// reaches it. node_rank -1: the rank comes from the launcher that started
  /// this process (srun, mpirun: one agent per task), else, with nnodes > 1,
  /// from the rendezvous (the agent on rdzv_host serves the store and is 0,
  /// the others follow in order of arrival: torchrun's c10d form).
  int nnodes = 1;
  int node_rank = -1;
  /// Elastic membership (torchrun's --nnodes MIN:MAX): with 0 < min_nodes <
  /// nnodes, the job starts once min_nodes agents joined (then waits up to
  /// `last_call` for up to nnodes), goes on without a lost node while at
  /// least min_nodes remain, and takes in a node that joins later; each such
  /// change restarts every node's workers with ranks renumbered
  /// (docs/run.md, "Elastic membership"). 0: exactly nnodes.
  int min_nodes = 0;
  std::chrono::milliseconds last_call{10000};
  std::string rdzv_host;  ///< "": master_addr
  int rdzv_port = 0;      ///< 0: 29500, or under Slurm a port derived from the job
  /// This host's address for the other nodes' messages (torchrun --local-addr).
  std::string local_addr;
  /// The secret every agent and worker of the job presents to the store
  /// (cohort run --token-file, COHORT_JOB_TOKEN); "": one made for the job
  /// where cohort can hand it out unseen (one node, --hostfile, mpirun's
  /// key-value service), MUNGE under Slurm, and otherwise none, which a job
  /// whose store is reached from other hosts refuses unless `insecure`.
  std::string job_token;
  /// Run across hosts without a secret: any peer that guesses the derived
  /// token may join the job (cohort run --insecure).
  bool insecure = false;
  /// How long node 0 waits for the others (and they for node 0).
  std::chrono::milliseconds rendezvous_timeout{300000};
  /// A node whose agent sends no heartbeat for this long is lost: the job stops.
  std::chrono::milliseconds heartbeat_timeout{10000};
  /// On a node that does not serve the job's store, the agent relays its
  /// workers' store traffic (docs/rendezvous.md, "The relay"); false: every
  /// worker connects to the store itself (COHORT_STORE_RELAY=0).
  bool store_relay = true;
  /// With `store_relay` and `agent_store`, Python's workers on such a node
  /// reach the store through the relay's TCPStore port too: their
  /// MASTER_ADDR:MASTER_PORT is 127.0.0.1 and that port, not node 0's
  /// store; false: node 0's (COHORT_TORCH_STORE_RELAY=0), for scripts that
  /// take MASTER_ADDR for rank 0's host.
  bool torch_store_relay = true;
  /// The agents' tree (docs/rendezvous.md): at most this many nodes' relays
  /// connect to one relay, or to the store; a job of more nodes forms a
  /// tree of relays (COHORT_TREE_WIDTH, 2 or more).
  int tree_width = 32;

  // --- many hosts from one command (cohort run --hostfile / --hosts) --------
  /// Non-empty: this process starts one agent per host over `ssh` (node rank
  /// = position in the list, `slots` workers there, nproc_per_node when 0),
  /// serves the job's store itself, and watches the agents' heartbeats. The
  /// remote agents run `remote_cohort` ("": this cohort's path) in this
  /// directory, and stop when this process or its ssh goes away.
  struct Host {
    std::string name;
    int slots = 0;
  };
  std::vector<Host> hosts;
  /// The ssh command, split at spaces ("ssh -p 2222").
  std::string ssh = "ssh";
  std::string remote_cohort;
  /// Environment variables passed on to the remote agents (and so to their
  /// workers), by name and by prefix ("NCCL_").
  std::vector<std::string> forward_env;
  std::vector<std::string> forward_env_prefixes;
};

/// Runs the job to its end and returns its exit status, shell convention:
/// 0, the first failed worker's code, 128+signal when it was killed, 130 after
/// Ctrl-C. Throws cohort::Error when the job cannot start (store, pipes ...).
int run(const RunOptions& options);

/// torch.multiprocessing.spawn for C++: forks `nprocs` workers of this
/// process, each running `fn` (its return value is the worker's exit code)
/// with the environment `cohort run` gives a worker, so that cohort::init()
/// inside `fn` joins the job. Supervised like cohort run's workers: output
/// prefixed, the first failure stops all, a report, the exit status.
/// A process started once per node (srun --ntasks-per-node=1, or with
/// `options.nnodes`/`node_rank` set) gives ranks node_rank * nprocs + i.
/// Call it before starting threads of your own: the workers are forks.
int spawn(int nprocs, std::function<int()> fn, RunOptions options = {});

}  // namespace cohort
