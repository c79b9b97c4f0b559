#include "launch/gpu_placement.hpp"

#include <algorithm>
#include <iterator>

#include <cohort/errors.hpp>

#include "core/cpus.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

constexpr std::string_view kBindNames[] = {"none", "numa", "gpu", "cores"};

std::string gpu_name(const Gpu& gpu) {
  return cat("GPU ", gpu.index, " (", gpu.bus_id, ")");
}

std::vector<int> within(const std::vector<int>& cpus, const std::vector<int>& allowed) {
  std::vector<int> both;
  std::set_intersection(cpus.begin(), cpus.end(), allowed.begin(), allowed.end(),
                        std::back_inserter(both));
  return both;
}

// The CPUs near `gpu` that this process may use, by NUMA node or by the
// GPU's own PCI device.
std::vector<int> near(const GpuInventory& inventory, const Gpu& gpu, CpuBind bind,
                      const std::vector<int>& allowed, std::string& why) {
  std::vector<int> cpus;
  if (bind == CpuBind::numa) {
    const auto node = inventory.numa_cpus.find(gpu.numa_node);
    if (gpu.numa_node < 0 || node == inventory.numa_cpus.end()) {
      throw InvalidArgument(cat("cohort run: --cpu-bind numa: ", gpu_name(gpu),
                                " has no NUMA node (sysfs numa_node is ", gpu.numa_node,
                                "): use --cpu-bind gpu, cores or none"));
    }
    cpus = node->second;
    why = cat("NUMA node ", gpu.numa_node, " of ", gpu_name(gpu));
  } else {
    if (gpu.local_cpus.empty()) {
      throw InvalidArgument(cat("cohort run: --cpu-bind gpu: sysfs gives ", gpu_name(gpu),
                                " no local CPUs (local_cpulist): use --cpu-bind cores or none"));
    }
    cpus = gpu.local_cpus;
    why = cat("the CPUs near ", gpu_name(gpu));
  }
  std::vector<int> usable = within(cpus, allowed);
  if (usable.empty()) {
    throw InvalidArgument(cat("cohort run: --cpu-bind ", to_string(bind), ": none of the CPUs ",
                              bind == CpuBind::numa ? "of " : "near ", gpu_name(gpu),
                              bind == CpuBind::numa ? cat("'s NUMA node ", gpu.numa_node) : "",
                              " (", format_cpu_list(cpus), ") is among this process's CPUs (",
                              format_cpu_list(allowed),
                              "; the launcher's binding, taskset or the cgroup): use --cpu-bind "
                              "cores or none, or bind the task near its GPU"));
  }
  return usable;
}

}  // namespace

std::optional<CpuBind> parse_cpu_bind(std::string_view word) {
  for (std::size_t i = 0; i < std::size(kBindNames); ++i) {
    if (word == kBindNames[i]) return static_cast<CpuBind>(i);
  }
  return std::nullopt;
}

std::string_view to_string(CpuBind bind) {
  return kBindNames[static_cast<std::size_t>(bind)];
}

std::vector<WorkerDevices> place_workers(const GpuInventory& inventory,
                                         const GpuVisibility& visible,
                                         const PlacementRequest& request) {
  const int workers = std::max(1, request.workers);
  const int per_proc = request.gpus_per_proc;
  const int allowed_gpus = static_cast<int>(visible.gpus.size());
  if (per_proc > 0 && workers * per_proc > allowed_gpus) {
    throw InvalidArgument(cat("cohort run: ", workers, " workers with --gpus-per-proc ", per_proc,
                              " need ", workers * per_proc, " GPUs on this node, but it allows ",
                              allowed_gpus, " (", visible.source,
                              inventory.gpus.empty() ? cat("; ", inventory.absent) : std::string(),
                              "): start at most ", allowed_gpus / per_proc,
                              allowed_gpus / per_proc == 1 ? " worker" : " workers",
                              " here, or ask the launcher for more GPUs (srun --gpus-per-node, "
                              "CUDA_VISIBLE_DEVICES)"));
  }
  std::vector<WorkerDevices> out(static_cast<std::size_t>(workers));
  for (int local = 0; local < workers; ++local) {
    WorkerDevices& worker = out[static_cast<std::size_t>(local)];
    if (per_proc > 0) {
      std::vector<std::string> tokens;
      for (int k = local * per_proc; k < (local + 1) * per_proc; ++k) {
        worker.gpus.push_back(visible.gpus[static_cast<std::size_t>(k)]);
        tokens.push_back(visible.tokens[static_cast<std::size_t>(k)]);
      }
      worker.cuda_visible_devices = join(tokens, ",");
    } else if (local < allowed_gpus) {
      worker.gpus.push_back(
          visible.gpus[static_cast<std::size_t>(local)]);  // set_device(LOCAL_RANK)
    }
  }
  const std::vector<int>& allowed = request.allowed_cpus;
  switch (request.cpu_bind) {
    case CpuBind::none:
      break;
    case CpuBind::cores: {
      const int cpus = static_cast<int>(allowed.size());
      if (cpus < workers) {
        throw InvalidArgument(cat("cohort run: --cpu-bind cores gives each of the ", workers,
                                  " workers CPUs of its own, but this process may use ", cpus, " (",
                                  format_cpu_list(allowed),
                                  "): start fewer workers, or use --cpu-bind none"));
      }
      for (int local = 0; local < workers; ++local) {
        const auto begin = allowed.begin() + static_cast<long>(local) * cpus / workers;
        const auto end = allowed.begin() + static_cast<long>(local + 1) * cpus / workers;
        WorkerDevices& worker = out[static_cast<std::size_t>(local)];
        worker.cpus.assign(begin, end);
        worker.why = cat("share ", local + 1, " of ", workers, " of this process's CPUs");
      }
      break;
    }
    case CpuBind::numa:
    case CpuBind::gpu:
      for (int local = 0; local < workers; ++local) {
        WorkerDevices& worker = out[static_cast<std::size_t>(local)];
        if (worker.gpus.empty()) {
          throw InvalidArgument(cat("cohort run: --cpu-bind ", to_string(request.cpu_bind),
                                    " binds each worker near its GPU, but local rank ", local,
                                    " has none: this node allows ", allowed_gpus, " GPU",
                                    allowed_gpus == 1 ? "" : "s", " (", visible.source, ") for ",
                                    workers, workers == 1 ? " worker" : " workers",
                                    ". Use --cpu-bind cores, or start one worker per GPU "
                                    "(-n gpu)"));
        }
        const Gpu& gpu = inventory.gpus[static_cast<std::size_t>(worker.gpus.front())];
        worker.cpus = near(inventory, gpu, request.cpu_bind, allowed, worker.why);
      }
      break;
  }
  return out;
}

}  // namespace cohort::detail
