// The launch-environment detectors, one file each. detect.cpp tries them in
// order, innermost launcher first (see include/cohort/launch_env.hpp).
#pragma once

#include <optional>
#include <string_view>

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

struct Detector {
  std::string_view name;  ///< for messages: "cohort/torchrun", "Open MPI", ...
  /// The detector whose variables this launcher sets itself, as part of its
  /// own machinery (Open MPI sets PMIX_RANK; srun --mpi=pmix sets SLURM_*):
  /// not worth a note when they are present. "" if none.
  std::string_view also_sets;
  /// The variable showing that this launcher started the process, "" if none.
  std::string_view (*evidence)(const EnvReader& env);
  /// Reads the LaunchInfo; called only when `evidence` is not empty. Throws
  /// LaunchEnvError on partial input. Consistency checks common to every
  /// launcher (rank < world size, ...) happen afterwards, in detect.cpp.
  Detection (*read)(const EnvReader& env);
};

std::string_view torchrun_evidence(const EnvReader& env);
Detection read_torchrun(const EnvReader& env);

std::string_view openmpi_evidence(const EnvReader& env);
Detection read_openmpi(const EnvReader& env);

std::string_view mpich_evidence(const EnvReader& env);
Detection read_mpich(const EnvReader& env);

std::string_view pmix_evidence(const EnvReader& env);
Detection read_pmix(const EnvReader& env);

std::string_view slurm_step_evidence(const EnvReader& env);
Detection read_slurm_step(const EnvReader& env);

/// No launcher: one process, rank 0 of 1 (notes an enclosing Slurm allocation).
Detection read_single(const EnvReader& env);

/// Fills what every MPI launcher's ranks derive alike once rank, world size,
/// local rank and local size (and the node count, where the launcher exports
/// it) are read: the node layout (one node when every rank is local, else
/// unknown until init), master address, job id, master port (derived from the
/// job id, else picked at init) and restart count.
void fill_mpi_common(LaunchInfo& info, std::string_view launcher_name,
                     std::optional<Sourced<std::string>> job);

}  // namespace cohort::detail
