// NVML, loaded at run time (dlopen): the build needs neither CUDA nor the
// driver, and a node without them goes on with sysfs. Only the few calls
// and types below are used, declared here as NVML's nvml.h declares them.
#include <algorithm>
#include <cctype>

#include <dlfcn.h>

#include "core/gpus/gpus.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

using NvmlReturn = int;  // nvmlReturn_t; NVML_SUCCESS is 0
using NvmlDevice = struct NvmlDeviceOpaque*;

struct NvmlPciInfo {  // nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  char bus_id[32];  // "00000000:17:00.0"
};

struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct Library {
  void* handle = nullptr;
  ~Library() {
    if (handle != nullptr) dlclose(handle);
  }
  template <class Function>
  Function* find(const char* name) const {
    return reinterpret_cast<Function*>(dlsym(handle, name));
  }
};

// NVML's "00000000:17:00.0" as sysfs writes it: "0000:17:00.0".
std::string sysfs_bus_id(std::string id) {
  std::transform(id.begin(), id.end(), id.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::size_t colon = id.find(':');
  if (colon != std::string::npos && colon > 4) id.erase(0, colon - 4);
  return id;
}

std::string text(const char* buffer, std::size_t size) {
  return std::string(buffer, std::find(buffer, buffer + size, '\0'));
}

}  // namespace

std::string add_nvml_answers(GpuInventory& inventory, const std::string& library) {
  Library nvml;
  nvml.handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (nvml.handle == nullptr) return cat("cannot load ", library, ": ", dlerror());
  const auto init = nvml.find<NvmlReturn()>("nvmlInit_v2");
  const auto shutdown = nvml.find<NvmlReturn()>("nvmlShutdown");
  const auto driver = nvml.find<NvmlReturn(char*, unsigned)>("nvmlSystemGetDriverVersion");
  const auto count = nvml.find<NvmlReturn(unsigned*)>("nvmlDeviceGetCount_v2");
  const auto handle = nvml.find<NvmlReturn(unsigned, NvmlDevice*)>("nvmlDeviceGetHandleByIndex_v2");
  const auto name = nvml.find<NvmlReturn(NvmlDevice, char*, unsigned)>("nvmlDeviceGetName");
  const auto uuid = nvml.find<NvmlReturn(NvmlDevice, char*, unsigned)>("nvmlDeviceGetUUID");
  const auto pci = nvml.find<NvmlReturn(NvmlDevice, NvmlPciInfo*)>("nvmlDeviceGetPciInfo_v3");
  const auto memory = nvml.find<NvmlReturn(NvmlDevice, NvmlMemory*)>("nvmlDeviceGetMemoryInfo");
  if (init == nullptr || shutdown == nullptr || count == nullptr || handle == nullptr ||
      name == nullptr || pci == nullptr) {
    return cat(library, " lacks the NVML calls cohort uses (nvmlInit_v2 ...)");
  }
  if (const NvmlReturn status = init(); status != 0) {
    return cat(library, ": nvmlInit_v2 failed (NVML error ", status, ")");
  }
  unsigned devices = 0;
  if (count(&devices) != 0) devices = 0;
  char buffer[256] = {};
  if (driver != nullptr && driver(buffer, sizeof(buffer)) == 0) {
    inventory.driver = text(buffer, sizeof(buffer));
  }
  std::vector<Gpu> answered;
  for (unsigned index = 0; index < devices && index < 1024; ++index) {
    NvmlDevice device = nullptr;
    NvmlPciInfo info{};
    if (handle(index, &device) != 0 || pci(device, &info) != 0) continue;
    const std::string bus = sysfs_bus_id(text(info.bus_id, sizeof(info.bus_id)));
    auto known = std::find_if(inventory.gpus.begin(), inventory.gpus.end(),
                              [&bus](const Gpu& gpu) { return gpu.bus_id == bus; });
    Gpu gpu = known != inventory.gpus.end() ? *known : Gpu{};
    gpu.index = static_cast<int>(index);
    gpu.bus_id = bus;
    if (name(device, buffer, sizeof(buffer)) == 0) gpu.name = text(buffer, sizeof(buffer));
    if (uuid != nullptr && uuid(device, buffer, sizeof(buffer)) == 0) {
      gpu.uuid = text(buffer, sizeof(buffer));
    }
    NvmlMemory bytes{};
    if (memory != nullptr && memory(device, &bytes) == 0) gpu.memory_bytes = bytes.total;
    answered.push_back(std::move(gpu));
  }
  shutdown();
  if (!answered.empty()) inventory.gpus = std::move(answered);
  return {};
}

}  // namespace cohort::detail
