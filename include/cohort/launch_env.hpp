// Who is this process? The launch environment as cohort sees it.
//
// `detect_launch(env)` turns a process environment (a key-value map) into a
// `LaunchInfo`: rank, sizes, node, master address and port, and which launcher
// started the process. It is a pure function: it reads nothing but `env`, never
// touches the network, and is therefore testable with recorded environments.
//
// Detection order, innermost launcher first (docs/launch-env.md has the full
// rules, the variables each detector reads, and the port derivation):
//   1. cohort / torchrun   RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK
//                          GROUP_WORLD_SIZE TORCHELASTIC_RUN_ID COHORT_RUN_ID
//   2. Open MPI            OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}
//   3. MPICH / Hydra       PMI_RANK PMI_SIZE MPI_LOCALRANKID MPI_LOCALNRANKS
//   4. PMIx without MPI    PMIX_RANK with Slurm's step variables (srun --mpi=pmix)
//   5. Slurm job step      SLURM_PROCID SLURM_LOCALID SLURM_NODEID SLURM_NTASKS ...
//   6. a single process    none of the above
// Under `mpirun` inside a Slurm job the SLURM_* variables describe mpirun's
// helper step, not the rank: the MPI detectors come first and win.
//
// MASTER_ADDR and MASTER_PORT, when set, override the derived master address
// and port under every launcher.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

/// The launcher that started this process, as detected.
enum class Launcher { single, cohort, torchrun, slurm, openmpi, mpich, pmix };

/// "single", "cohort", "torchrun", "slurm", "openmpi", "mpich" or "pmix".
std::string_view to_string(Launcher launcher) noexcept;

/// A detected value and where it came from: the name of the variable it was
/// read from ("SLURM_PROCID"), or a short phrase saying how it was derived
/// ("first host of SLURM_JOB_NODELIST").
template <class T>
struct Sourced {
  T value{};
  std::string source;
};

/// Value of an integer field the environment does not determine (for example
/// the node index under Open MPI across several nodes, which Open MPI does not
/// export); it is settled at init by the ranks themselves.
inline constexpr int kUnknown = -1;

/// The launch environment of one process. Integer fields hold `kUnknown` where
/// the launcher does not say; `master_port` 0 means "any free port, chosen at
/// init". `notes` records what detection noticed and set aside, e.g. SLURM_*
/// variables ignored under mpirun.
struct LaunchInfo {
  Sourced<int> rank;
  Sourced<int> world_size;
  Sourced<int> local_rank;
  Sourced<int> local_world_size;
  Sourced<int> node_rank;
  Sourced<int> num_nodes;
  Sourced<std::string> master_addr;
  Sourced<int> master_port;
  Sourced<Launcher> launcher;
  Sourced<std::string> job_id;
  Sourced<int> restart_count;
  std::vector<std::string> notes;
};

/// A process environment: variable name to value.
using Environment = std::map<std::string, std::string, std::less<>>;

/// The launch environment described by `env`. Throws `LaunchEnvError` when the
/// variables are partial or inconsistent; the message names each variable
/// involved and its value.
LaunchInfo detect_launch(const Environment& env);

/// This process's environment (`environ`) as a map.
Environment process_environment();

/// `detect_launch(process_environment())`.
LaunchInfo detect_launch();

/// Slurm hostlist expressions ("node[001-003,010],login", "rack[1-2]-n[01-02]").
/// docs/hostlist.md gives the grammar and where it deliberately differs from
/// `scontrol`.
namespace hostlist {

/// Every host named by `expression`, in order, like `scontrol show hostnames`:
/// top-level items are separated by commas or whitespace; each bracket group
/// holds numbers and ranges (`1-3`, `01-10`, `001-003,010`), zero-padded to the
/// width of the range's lower bound; several groups in one name multiply in
/// scontrol's order (the last group varies fastest, then the first, the second
/// ...; with two groups the leftmost varies slowest); duplicates and order are
/// kept. Throws
/// `InvalidArgument`, naming the expression and the position, when it does not
/// parse or names more than `max_hosts` hosts (checked before they are made),
/// or more than 64 MiB of names.
std::vector<std::string> expand(std::string_view expression, std::size_t max_hosts);
std::vector<std::string> expand(std::string_view expression);

/// How many hosts `expression` names, and the first `keep` of them: checked
/// and counted as `expand` does (the same errors), without making the
/// strings of the others.
struct Summary {
  std::size_t count = 0;
  std::vector<std::string> hosts;  // the first min(keep, count)
};
Summary summarize(std::string_view expression, std::size_t keep);

/// The inverse of `expand`, like `scontrol show hostlist`: consecutive hosts
/// that differ only in a trailing number share one bracket group, and runs of
/// consecutive numbers become ranges. Order and duplicates are kept, so
/// `expand(compress(hosts)) == hosts` for every list of hosts without
/// delimiter characters (',', whitespace, '[' or ']').
std::string compress(std::span<const std::string> hosts);

/// Upper bound on the number of hosts one expression may expand to, and the
/// bound of `expand(expression)`.
inline constexpr std::size_t kMaxHosts = std::size_t{1} << 20;

}  // namespace hostlist
}  // namespace cohort
