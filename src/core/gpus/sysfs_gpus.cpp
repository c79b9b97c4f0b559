// The GPUs that sysfs and /proc/driver/nvidia show, then NVML's answers;
// and which of them this process may use.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/cpus.hpp"
#include "core/gpus/gpus.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

namespace fs = std::filesystem;

std::string first_line(const fs::path& path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
    line.pop_back();
  return line;
}

// "Model:  NVIDIA H100" -> "NVIDIA H100", from a /proc/driver/nvidia file.
std::string field(const fs::path& path, std::string_view key) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (line.rfind(key, 0) != 0) continue;
    line.erase(0, key.size());
    line.erase(0, line.find_first_not_of(" \t"));
    return line;
  }
  return {};
}

std::vector<int> cpu_list_at(const fs::path& path) {
  return parse_cpu_list(first_line(path)).value_or(std::vector<int>{});
}

// A display controller (0x0300) or 3D controller (0x0302) of NVIDIA's (0x10de).
bool is_nvidia_gpu(const fs::path& device) {
  const std::string pci_class = first_line(device / "class");
  return first_line(device / "vendor") == "0x10de" &&
         (pci_class.rfind("0x0300", 0) == 0 || pci_class.rfind("0x0302", 0) == 0);
}

void read_numa_nodes(const fs::path& root, GpuInventory& inventory) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root / "sys/devices/system/node", error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) != 0) continue;
    const auto node = parse_int(name.substr(4));
    if (!node || *node < 0 || *node > 4096) continue;
    inventory.numa_cpus[static_cast<int>(*node)] = cpu_list_at(entry.path() / "cpulist");
  }
}

}  // namespace

GpuSources gpu_sources(const Environment& env) {
  GpuSources sources;
  if (auto root = env.find("COHORT_SYSFS_ROOT"); root != env.end() && !root->second.empty()) {
    sources.root = root->second;
  }
  if (auto nvml = env.find("COHORT_NVML_LIBRARY"); nvml != env.end() && !nvml->second.empty()) {
    sources.nvml = nvml->second;
  }
  return sources;
}

GpuInventory discover_gpus(const GpuSources& sources) {
  GpuInventory inventory;
  const fs::path root = sources.root;
  read_numa_nodes(root, inventory);
  std::error_code error;
  std::vector<fs::path> devices;
  for (const auto& entry : fs::directory_iterator(root / "sys/bus/pci/devices", error)) {
    if (is_nvidia_gpu(entry.path())) devices.push_back(entry.path());
  }
  std::sort(devices.begin(), devices.end());
  const fs::path driver = root / "proc/driver/nvidia";
  // "NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ..." -> "550.54.15"
  const std::string version = field(driver / "version", "NVRM version:");
  const std::size_t module = version.find("Kernel Module");
  const std::size_t start =
      module == std::string::npos ? module : version.find_first_not_of(' ', module + 13);
  inventory.driver = start == std::string::npos
                         ? version
                         : version.substr(start, version.find(' ', start) - start);
  for (const fs::path& device : devices) {
    Gpu gpu;
    gpu.index = static_cast<int>(inventory.gpus.size());
    gpu.bus_id = device.filename().string();
    const auto node = parse_int(first_line(device / "numa_node"));
    gpu.numa_node = node && *node >= 0 ? static_cast<int>(*node) : -1;
    gpu.local_cpus = cpu_list_at(device / "local_cpulist");
    const fs::path information = driver / "gpus" / gpu.bus_id / "information";
    gpu.name = field(information, "Model:");
    gpu.uuid = field(information, "GPU UUID:");
    if (gpu.name.empty()) gpu.name = cat("NVIDIA PCI device ", first_line(device / "device"));
    inventory.gpus.push_back(std::move(gpu));
  }
  inventory.source = inventory.driver.empty() ? "sysfs" : "sysfs and /proc/driver/nvidia";
  if (sources.nvml != "none") {
    const std::string why_not = add_nvml_answers(inventory, sources.nvml);
    if (why_not.empty()) inventory.source = "NVML and sysfs";
  }
  if (inventory.gpus.empty()) {
    inventory.absent = cat("no NVIDIA GPU in ", (root / "sys/bus/pci/devices").string(),
                           inventory.driver.empty() ? " and no NVIDIA driver loaded" : "");
  }
  return inventory;
}

NodeGpus read_node_gpus(const Environment& env, bool use_nvml) {
  GpuSources sources = gpu_sources(env);
  if (!use_nvml) sources.nvml = "none";
  NodeGpus node;
  node.inventory = discover_gpus(sources);
  node.visible = visible_gpus(node.inventory, env);
  return node;
}

}  // namespace cohort::detail
