// Which of the node's GPUs this process may use, from its environment.
#include <algorithm>

#include "core/cpus.hpp"
#include "core/gpus/gpus.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

// The inventory position of the GPU whose index is `index`; -1 for none.
int gpu_with_index(const GpuInventory& inventory, std::int64_t index) {
  for (std::size_t i = 0; i < inventory.gpus.size(); ++i) {
    if (inventory.gpus[i].index == index) return static_cast<int>(i);
  }
  return -1;
}

// The inventory position of the GPU `token` names: an index, or a prefix of
// a UUID ("GPU-8f6c"), as CUDA reads them; -1 when it names none.
int named_gpu(const GpuInventory& inventory, const std::string& token) {
  if (token.rfind("GPU-", 0) == 0) {
    int found = -1;
    for (std::size_t i = 0; i < inventory.gpus.size(); ++i) {
      if (inventory.gpus[i].uuid.rfind(token, 0) != 0) continue;
      if (found >= 0) return -1;  // ambiguous: CUDA refuses it too
      found = static_cast<int>(i);
    }
    return found;
  }
  const auto index = parse_int(token);
  return index ? gpu_with_index(inventory, *index) : -1;
}

// CUDA_VISIBLE_DEVICES' rules: entries in order, up to the first that names
// no GPU (CUDA ignores it and every one after it), each GPU once.
void read_device_list(const GpuInventory& inventory, const std::string& name,
                      const std::string& list, GpuVisibility& out) {
  out.source = cat(name, "=", list);
  for (std::string token : split_at(list, ',')) {
    token.erase(0, token.find_first_not_of(' '));
    token.erase(token.find_last_not_of(' ') + 1);
    const int gpu = named_gpu(inventory, token);
    if (gpu < 0) {
      out.notes.push_back(cat(name, ": '", token,
                              "' names no GPU of this node, so CUDA ignores it and every entry "
                              "after it"));
      return;
    }
    if (std::find(out.gpus.begin(), out.gpus.end(), gpu) != out.gpus.end()) {
      out.notes.push_back(cat(name, ": '", token,
                              "' names a GPU listed before; CUDA then "
                              "finds no GPU at all"));
      out.gpus.clear();
      out.tokens.clear();
      return;
    }
    out.gpus.push_back(gpu);
    out.tokens.push_back(token);
  }
}

}  // namespace

GpuVisibility visible_gpus(const GpuInventory& inventory, const Environment& env) {
  GpuVisibility out;
  const auto value = [&env](const char* name) -> const std::string* {
    auto found = env.find(name);
    return found == env.end() ? nullptr : &found->second;
  };
  if (const std::string* list = value("CUDA_VISIBLE_DEVICES")) {
    if (!list->empty()) read_device_list(inventory, "CUDA_VISIBLE_DEVICES", *list, out);
    if (list->empty()) out.source = "CUDA_VISIBLE_DEVICES is empty: no GPU";
    return out;
  }
  for (const char* name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    const std::string* list = value(name);
    if (list == nullptr || list->empty()) continue;
    out.source = cat(name, "=", *list);
    const auto indices = parse_cpu_list(*list);  // the same form: "0,1", "0-3"
    if (!indices) {
      out.notes.push_back(cat(name, "='", *list, "' is not a list of GPU indices"));
      return out;
    }
    // One note for every index missing, however many: "0-65535" is one line.
    std::vector<int> missing;
    for (int index : *indices) {
      const int gpu = gpu_with_index(inventory, index);
      if (gpu < 0) {
        missing.push_back(index);
        continue;
      }
      out.gpus.push_back(gpu);
      out.tokens.push_back(cat(index));
    }
    if (!missing.empty()) {
      out.notes.push_back(cat(name, ": GPU", missing.size() == 1 ? " " : "s ",
                              format_cpu_list(missing), missing.size() == 1 ? " is" : " are",
                              " not on this node"));
    }
    return out;
  }
  if (const std::string* list = value("GPU_DEVICE_ORDINAL"); list != nullptr && !list->empty()) {
    read_device_list(inventory, "GPU_DEVICE_ORDINAL", *list, out);
    return out;
  }
  out.source = "every GPU of the node";
  for (std::size_t i = 0; i < inventory.gpus.size(); ++i) {
    out.gpus.push_back(static_cast<int>(i));
    out.tokens.push_back(cat(inventory.gpus[i].index));
  }
  return out;
}

}  // namespace cohort::detail
