#include "launch/node_devices.hpp"

#include "core/cpus.hpp"

namespace cohort::detail {

NodeDevices node_devices(const Environment& env, PlacementRequest request, bool use_nvml) {
  NodeDevices out;
  GpuSources sources = gpu_sources(env);
  if (!use_nvml) sources.nvml = "none";
  out.inventory = discover_gpus(sources);
  out.visible = visible_gpus(out.inventory, env);
  if (request.allowed_cpus.empty()) request.allowed_cpus = affinity_cpus();
  out.request = request;
  out.workers = place_workers(out.inventory, out.visible, request);
  return out;
}

bool placement_asked(int gpus_per_proc, CpuBind cpu_bind) {
  return gpus_per_proc > 0 || cpu_bind != CpuBind::none;
}

}  // namespace cohort::detail
