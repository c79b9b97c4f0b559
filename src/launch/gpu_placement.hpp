// Which GPUs and CPUs each worker of a node gets (cohort run
// --gpus-per-proc, --cpu-bind), as a pure function of the node's GPUs,
// what this process may use, and the request: every case is a unit test,
// and `cohort env` shows the same answer that `cohort run` applies.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/gpus/gpus.hpp"

namespace cohort::detail {

enum class CpuBind {
  none,   ///< the workers keep this process's CPUs
  numa,   ///< the CPUs of the NUMA node of the worker's (first) GPU
  gpu,    ///< the CPUs nearest the worker's GPU (its PCI device's local CPUs)
  cores,  ///< a fair, contiguous share of this process's CPUs
};

/// "none" ... "cores"; nullopt for another word.
std::optional<CpuBind> parse_cpu_bind(std::string_view word);
std::string_view to_string(CpuBind bind);

struct PlacementRequest {
  int workers = 1;        ///< on this node (its local world size)
  int gpus_per_proc = 0;  ///< 0: every worker sees what the node allows (torchrun's way)
  CpuBind cpu_bind = CpuBind::none;
  std::vector<int> allowed_cpus;  ///< this process's CPUs (affinity mask, ascending)
};

struct WorkerDevices {
  /// Positions in the inventory of the GPUs it uses: with gpus_per_proc its
  /// own; else the one set_device(LOCAL_RANK) picks (none beyond the GPUs).
  std::vector<int> gpus;
  /// CUDA_VISIBLE_DEVICES for it; "" leaves the variable as it is.
  std::string cuda_visible_devices;
  /// The CPUs it is bound to, ascending; empty: not bound.
  std::vector<int> cpus;
  std::string why;  ///< how the CPUs were chosen, for people
};

/// One entry per local rank. Throws InvalidArgument, naming what the node
/// has and what to do, when the request cannot be met: more GPUs than
/// visible, a GPU-relative binding without a GPU or for a GPU without a NUMA
/// node or CPUs, CPUs that fall outside this process's.
std::vector<WorkerDevices> place_workers(const GpuInventory& inventory,
                                         const GpuVisibility& visible,
                                         const PlacementRequest& request);

}  // namespace cohort::detail
