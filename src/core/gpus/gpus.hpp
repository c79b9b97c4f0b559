// This node's GPUs: what they are, where they sit (PCI bus, NUMA node, the
// CPUs near them), and which of them this process may use. Read from NVML
// when the NVIDIA driver is there (libnvidia-ml loaded at run time: no
// link-time dependency) and from sysfs and /proc/driver/nvidia otherwise;
// the two are merged by PCI bus id. Reading is kept apart from deciding:
// `visible_gpus` is a pure function of an inventory and an environment.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <cohort/launch_env.hpp>

namespace cohort::detail {

struct Gpu {
  int index = 0;                   ///< NVML's and nvidia-smi's: PCI bus order
  std::string name;                ///< "NVIDIA H100 80GB HBM3"
  std::string bus_id;              ///< "0000:17:00.0", as sysfs names it
  std::string uuid;                ///< "GPU-8f6c0e1a-...", "" when unknown
  std::uint64_t memory_bytes = 0;  ///< 0 when unknown
  int numa_node = -1;              ///< -1: the platform gives it none
  std::vector<int> local_cpus;     ///< the CPUs near it (sysfs local_cpulist)
};

struct GpuInventory {
  std::vector<Gpu> gpus;  ///< by index
  std::string driver;     ///< "550.54.15", "" without a driver
  std::string source;     ///< "NVML and sysfs", "sysfs and /proc/driver/nvidia", "sysfs"
  std::string absent;     ///< why there is no GPU, when there is none
  std::map<int, std::vector<int>> numa_cpus;  ///< each NUMA node's CPUs
};

/// Where to read: `root` stands for / (COHORT_SYSFS_ROOT, for recorded
/// trees); `nvml` is the library to load (COHORT_NVML_LIBRARY; "none": not
/// NVML).
struct GpuSources {
  std::string root = "/";
  std::string nvml = "libnvidia-ml.so.1";
};
GpuSources gpu_sources(const Environment& env);

/// The GPUs the sources describe. Never throws: what cannot be read is left
/// out, and `absent` says why when nothing is found.
GpuInventory discover_gpus(const GpuSources& sources);

/// What NVML answered, merged into `inventory` by bus id (discover_gpus
/// calls it; nvml_gpus.cpp). Returns "" or why NVML was not used.
std::string add_nvml_answers(GpuInventory& inventory, const std::string& library);

/// The GPUs this process may use, in the order CUDA numbers them.
struct GpuVisibility {
  std::vector<int> gpus;            ///< positions in GpuInventory::gpus; CUDA ordinal i is gpus[i]
  std::vector<std::string> tokens;  ///< how each is named in CUDA_VISIBLE_DEVICES
  std::string source;               ///< "CUDA_VISIBLE_DEVICES=2,3,6,7", "every GPU of the node"
  std::vector<std::string> notes;   ///< entries that name no GPU here, and why
};

/// CUDA_VISIBLE_DEVICES (indices or GPU-UUID prefixes; CUDA stops at the
/// first entry that names no GPU, and so does this), else Slurm's
/// SLURM_STEP_GPUS or SLURM_JOB_GPUS (the indices it allocated), else
/// GPU_DEVICE_ORDINAL (as CUDA_VISIBLE_DEVICES), else every GPU.
GpuVisibility visible_gpus(const GpuInventory& inventory, const Environment& env);

/// This node's GPUs and which of them this process may use, read from where
/// `env` says (COHORT_SYSFS_ROOT, COHORT_NVML_LIBRARY); NVML only when
/// `use_nvml` (starting the driver costs time: `cohort run` counts and
/// places from sysfs alone).
struct NodeGpus {
  GpuInventory inventory;
  GpuVisibility visible;
};
NodeGpus read_node_gpus(const Environment& env, bool use_nvml);

}  // namespace cohort::detail
