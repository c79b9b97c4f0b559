// What cohort knows of each launcher, one file per launcher in this folder
// and one row per launcher in registry.cpp: how to tell that it started this
// process and read what it says (its detector), what its names are, how a
// `cohort run` started by it finds the job's other agents, how stores of its
// jobs authenticate, which variables describe a task and so are rewritten
// for each worker, and which MPI library's ranks it starts. Everything else
// (detect.cpp, the launch part's node plan and worker variables, the world's
// store, the mpi backend) asks the registry, never the enum.
//
// Adding a launcher: its enum value (include/cohort/launch_env.hpp), a file
// here defining `LauncherEntry <name>_launcher()`, and its row in
// registry.cpp, whose order is the detection order.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <cohort/launch_env.hpp>

#include "env/env_reader.hpp"

namespace cohort::detail {

/// What one detector read.
struct Detection {
  LaunchInfo info;
  /// The launcher always exports MASTER_ADDR and MASTER_PORT (torchrun,
  /// cohort): with more than one rank, their absence is an error.
  bool master_required = false;
};

/// How `cohort run`, started once per task by this launcher, takes part in
/// the job.
enum class AgentForm {
  /// No launcher: the agent is alone, or placed by --nnodes/--node-rank.
  alone,
  /// The launcher starts workers itself (torchrun, cohort run): every copy
  /// would start its own workers, which is refused.
  refused,
  /// A job step (srun): the step names rank 0's host and a port derived from
  /// the job; the agent's node is the launcher's node id.
  job_step,
  /// An MPI job (mpirun): rank 0's agent serves on a free port and tells the
  /// others through the launcher's key-value service (else MASTER_ADDR).
  mpi_job,
};

/// How clients of a store that the job's id names prove that they belong to
/// the job when the user gave it no secret.
enum class StoreProof {
  same_host_user,  ///< only this user's processes on the store's host get in
  munge,           ///< MUNGE credentials: this user, on any node of the cluster
};

/// The MPI libraries whose ranks a launcher starts (bit flags).
inline constexpr unsigned kNoMpi = 0;
inline constexpr unsigned kOpenMpi = 1U << 0;
inline constexpr unsigned kMpich = 1U << 1;

/// One worker of `cohort run` as a launcher that started one task per worker
/// would have described it.
struct WorkerSeat {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::span<const int> workers_per_node;  ///< indexed by node rank
  std::span<const int> ranks_on_my_node;  ///< ascending
};

/// One row of the registry.
struct LauncherEntry {
  Launcher launcher = Launcher::single;
  std::string_view name;         ///< for machines: to_string(), cohort env --json
  std::string_view description;  ///< for people: "Slurm's srun"
  /// For detection notes ("Slurm variables are set too"); launchers that
  /// share variables share it ("cohort/torchrun").
  std::string_view family;
  /// The family whose variables this launcher sets itself, as part of its
  /// own machinery (Open MPI sets PMIX_RANK; srun --mpi=pmix sets SLURM_*;
  /// cohort run sets torchrun's): not worth a note. "" if none.
  std::string_view also_sets;
  /// The variable showing that this launcher started the process, "" if
  /// none. Null for the row that holds when no other does (no launcher).
  std::string_view (*evidence)(const EnvReader& env) = nullptr;
  /// Reads the LaunchInfo; called only when `evidence` is not empty (or for
  /// the fallback row). Throws LaunchEnvError on partial input. Checks common
  /// to every launcher (rank < world size, ...) happen in detect.cpp.
  Detection (*read)(const EnvReader& env) = nullptr;
  /// Its variables are also what people export by hand (RANK, WORLD_SIZE):
  /// checked against mpirun's, which a RANK exported into every rank contradicts.
  bool hand_settable = false;

  AgentForm agents = AgentForm::alone;
  /// For refusals of a geometry: the commands that start `workers` workers
  /// on each of `nodes` nodes under this launcher. Null when none applies.
  std::string (*working_forms)(int nodes, int workers) = nullptr;
  StoreProof store_proof = StoreProof::same_host_user;
  /// Rewrites, in a worker's environment, this launcher's variables that
  /// describe a task so that they describe the worker; only variables
  /// already present. Null when it has none.
  void (*describe_worker)(Environment& env, const WorkerSeat& seat) = nullptr;
  unsigned starts_mpi = kNoMpi;
};

/// Every launcher, in detection order (innermost first), the fallback (no
/// launcher) last.
std::span<const LauncherEntry> launchers();

/// The row of `launcher`.
const LauncherEntry& launcher_entry(Launcher launcher);

/// "no launcher (a single process)", "Slurm's srun", "Open MPI's mpirun" ...
std::string_view launcher_description(Launcher launcher) noexcept;

// Shared by the launchers' files.

/// Slurm's job step, which srun --mpi=pmix's detector reads too.
std::string_view slurm_step_evidence(const EnvReader& env);
Detection read_slurm_step(const EnvReader& env);

/// Fills what every MPI launcher's ranks derive alike once rank, world size,
/// local rank and local size (and the node count, where the launcher exports
/// it) are read: the node layout (one node when every rank is local, else
/// unknown until init), master address, job id, master port (derived from the
/// job id, else picked at init) and restart count.
void fill_mpi_common(LaunchInfo& info, std::string_view launcher_name,
                     std::optional<Sourced<std::string>> job);

/// `srun` forms, for the Slurm launchers' working_forms.
std::string srun_forms(int nodes, int workers);

/// "mpirun -np N cohort run PROGRAM" or one agent per node (`one_per_node`,
/// e.g. "mpirun -np 2 -ppn 1"), for the MPI launchers' working_forms.
std::string mpirun_forms(int nodes, int workers, std::string_view one_per_node);

/// Sets `name` to `value` in `env` when it is there.
void rewrite_present(Environment& env, std::string_view name, const std::string& value);

}  // namespace cohort::detail
