// What the GPU facts are read from (src/core/gpus, src/core/cpus.cpp): a
// CPU list from sysfs ("0-55,112-167"), and a CUDA_VISIBLE_DEVICES or
// SLURM_STEP_GPUS value from the environment, against an 8-GPU inventory;
// the input's first line is the CPU list, the second the GPU list.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/cpus.hpp"
#include "core/gpus/gpus.hpp"
#include "fuzz/fuzz_target.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(gpu_lists) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::size_t newline = std::min(text.find('\n'), text.size());
  if (const auto cpus = detail::parse_cpu_list(text.substr(0, newline))) {
    // What was read is written and read back alike.
    if (!std::is_sorted(cpus->begin(), cpus->end()) ||
        detail::parse_cpu_list(detail::format_cpu_list(*cpus)) != cpus) {
      std::abort();
    }
  }
  detail::GpuInventory inventory;
  for (int i = 0; i < 8; ++i) {
    detail::Gpu gpu;
    gpu.index = i;
    gpu.uuid = "GPU-" + std::to_string(i) + "0000000-aaaa";
    inventory.gpus.push_back(gpu);
  }
  const std::string list = newline < text.size() ? text.substr(newline + 1) : "";
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS"}) {
    const detail::GpuVisibility visible = detail::visible_gpus(inventory, {{name, list}});
    if (visible.gpus.size() != visible.tokens.size()) std::abort();
    for (int gpu : visible.gpus) {
      if (gpu < 0 || gpu >= 8) std::abort();
    }
  }
  return 0;
}

}  // namespace cohort::fuzz
