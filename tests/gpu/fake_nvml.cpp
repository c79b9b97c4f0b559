// A test double of libnvidia-ml, loaded by cohort exactly as the real one
// (COHORT_NVML_LIBRARY names it): it answers the calls cohort makes from a
// fixture's nvml.txt, named by COHORT_FAKE_NVML. Its first line is "driver
// VERSION", or "no driver" (then nvmlInit_v2 fails as without a driver);
// then one GPU per line: index|name|bus id|uuid|memory bytes.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct FakeGpu {
  std::string name, bus_id, uuid;
  unsigned long long memory = 0;
};

struct Answers {
  bool driver = false;
  std::string version;
  std::vector<FakeGpu> gpus;
};

Answers read_answers() {
  Answers out;
  const char* path = std::getenv("COHORT_FAKE_NVML");
  std::ifstream file(path != nullptr ? path : "");
  std::string line;
  if (std::getline(file, line) && line.rfind("driver ", 0) == 0) {
    out.driver = true;
    out.version = line.substr(7);
  }
  while (std::getline(file, line)) {
    std::vector<std::string> fields;
    std::size_t start = 0;
    for (std::size_t bar; (bar = line.find('|', start)) != std::string::npos; start = bar + 1)
      fields.push_back(line.substr(start, bar - start));
    fields.push_back(line.substr(start));
    if (fields.size() != 5) continue;
    out.gpus.push_back({fields[1], fields[2], fields[3], std::stoull(fields[4])});
  }
  return out;
}

// Read again at each nvmlInit_v2: one test process loads several fixtures.
Answers& answers() {
  static Answers loaded;
  return loaded;
}

int copy(const std::string& text, char* buffer, unsigned length) {
  if (text.size() + 1 > length) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  std::memcpy(buffer, text.c_str(), text.size() + 1);
  return 0;
}

const FakeGpu* gpu(void* device) {
  const auto index = reinterpret_cast<std::size_t>(device) - 1;
  return index < answers().gpus.size() ? &answers().gpus[index] : nullptr;
}

}  // namespace

extern "C" {

struct FakePciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct FakeMemory {  // nvmlMemory_t
  unsigned long long total, free, used;
};

int nvmlInit_v2() {
  answers() = read_answers();
  return answers().driver ? 0 : 9;  // 9: NVML_ERROR_DRIVER_NOT_LOADED
}
int nvmlShutdown() {
  return 0;
}
int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  return copy(answers().version, version, length);
}
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = static_cast<unsigned>(answers().gpus.size());
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index >= answers().gpus.size()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = reinterpret_cast<void*>(static_cast<std::size_t>(index) + 1);
  return 0;
}
int nvmlDeviceGetName(void* device, char* name, unsigned length) {
  return gpu(device) != nullptr ? copy(gpu(device)->name, name, length) : 2;
}
int nvmlDeviceGetUUID(void* device, char* uuid, unsigned length) {
  return gpu(device) != nullptr ? copy(gpu(device)->uuid, uuid, length) : 2;
}
int nvmlDeviceGetPciInfo_v3(void* device, FakePciInfo* pci) {
  if (gpu(device) == nullptr) return 2;
  std::memset(pci, 0, sizeof(*pci));
  return copy(gpu(device)->bus_id, pci->bus_id, sizeof(pci->bus_id));
}
int nvmlDeviceGetMemoryInfo(void* device, FakeMemory* memory) {
  if (gpu(device) == nullptr) return 2;
  *memory = {gpu(device)->memory, gpu(device)->memory, 0};
  return 0;
}

}  // extern "C"
