// Environments that several test files use.
#pragma once

#include <cohort/launch_env.hpp>

namespace cohort::test {

/// Rank 5 of an 8-task Slurm step on 4 nodes: the foundation issue's
/// acceptance example, with nothing else set.
inline Environment slurm_step_example() {
  return {{"SLURM_JOB_ID", "1234"},
          {"SLURM_PROCID", "5"},
          {"SLURM_NTASKS", "8"},
          {"SLURM_LOCALID", "1"},
          {"SLURM_NODEID", "2"},
          {"SLURM_NNODES", "4"},
          {"SLURM_JOB_NODELIST", "n[1-4]"},
          {"SLURM_TASKS_PER_NODE", "2(x4)"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x4)"}};
}

/// Open MPI's variables for rank 2 of 4, two per node.
inline Environment openmpi_rank2_of4() {
  return {{"OMPI_COMM_WORLD_RANK", "2"},
          {"OMPI_COMM_WORLD_SIZE", "4"},
          {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
}

}  // namespace cohort::test
