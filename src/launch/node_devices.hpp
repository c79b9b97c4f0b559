// This node's GPUs and what each local rank gets of them and of the CPUs:
// the facts (core/gpus) and the placement (gpu_placement.hpp) together, as
// `cohort run` applies them and `cohort env` shows them.
#pragma once

#include <vector>

#include <cohort/launch_env.hpp>

#include "core/gpus/gpus.hpp"
#include "launch/gpu_placement.hpp"

namespace cohort::detail {

struct NodeDevices {
  GpuInventory inventory;
  GpuVisibility visible;
  PlacementRequest request;
  std::vector<WorkerDevices> workers;  ///< by local rank
};

/// Reads the node's GPUs (sources from `env`: COHORT_SYSFS_ROOT,
/// COHORT_NVML_LIBRARY; NVML only when `use_nvml`) and places `request`.
/// Throws InvalidArgument when the node cannot meet it.
NodeDevices node_devices(const Environment& env, PlacementRequest request, bool use_nvml);

/// Whether `gpus_per_proc` and `cpu_bind` ask for anything at all: else
/// `cohort run` reads no GPU and changes nothing.
bool placement_asked(int gpus_per_proc, CpuBind cpu_bind);

}  // namespace cohort::detail
