#include "launch/gpu_failures.hpp"

#include <cerrno>
#include <ctime>

#include <fcntl.h>
#include <unistd.h>

#include "core/fd.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

constexpr std::size_t kMaxLogBytes = 8 << 20;
constexpr std::size_t kMaxKernelLines = 5;

constexpr std::string_view kCudaErrors[] = {
    "CUDA error",         "CUDA out of memory", "cudaError",     "CUBLAS_STATUS_",
    "CUDNN_STATUS_",      "NCCL error",         "ncclUnhandled", "illegal memory access",
    "device-side assert", "uncorrectable ECC"};

constexpr std::string_view kDriverTroubles[] = {"NVRM: Xid", "fallen off the bus",
                                                "NVRM: GPU at PCI", "ECC error"};

bool mentions(std::string_view text, std::span<const std::string_view> words) {
  for (std::string_view word : words) {
    if (text.find(word) != std::string_view::npos) return true;
  }
  return false;
}

std::string gpu_name(const Gpu& gpu) {
  return cat("GPU ", gpu.index, " (", gpu.bus_id, ")");
}

// The GPU a driver line names ("NVRM: Xid (PCI:0000:17:00): 79, ..."), as
// "GPU 0 (0000:17:00.0)"; "a GPU" when it names none this node has.
std::string gpu_of(std::string_view text, const GpuInventory& inventory) {
  const std::size_t pci = text.find("PCI:");
  if (pci != std::string_view::npos) {
    std::string_view bus = text.substr(pci + 4);
    bus = bus.substr(0, bus.find_first_of("): ,", 10));  // "0000:17:00"
    for (const Gpu& gpu : inventory.gpus) {
      if (!bus.empty() && gpu.bus_id.rfind(bus, 0) == 0) return gpu_name(gpu);
    }
  }
  return "a GPU";
}

}  // namespace

std::vector<KernelLine> parse_kmsg(std::string_view text) {
  std::vector<KernelLine> lines;
  for (const std::string& record : split_at(std::string(text), '\n')) {
    const std::size_t semicolon = record.find(';');
    if (record.empty() || record[0] == ' ' || semicolon == std::string::npos) continue;
    const std::vector<std::string> fields = split_at(record.substr(0, semicolon), ',');
    if (fields.size() < 3) continue;
    const auto usec = parse_int(fields[2]);
    if (!usec || *usec < 0) continue;
    lines.push_back({*usec, record.substr(semicolon + 1)});
  }
  return lines;
}

std::string read_kernel_log(const std::string& root) {
  const std::string path = root == "/" ? "/dev/kmsg" : cat(root, "/dev/kmsg");
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return {};
  std::string text;
  char buffer[8192];
  while (text.size() < kMaxLogBytes) {
    // /dev/kmsg gives one record per read (EPIPE: some were overwritten
    // meanwhile, read on); a file, its bytes.
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EPIPE) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.back() != '\n') text += '\n';
  }
  return text;
}

std::int64_t kernel_log_now() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1000000 + now.tv_nsec / 1000;
}

std::vector<std::string> gpu_failure_lines(const std::vector<std::string>& stderr_tail,
                                           const std::vector<KernelLine>& kernel,
                                           std::int64_t since, const GpuInventory& inventory,
                                           const std::vector<int>& worker_gpus) {
  std::vector<std::string> out;
  std::vector<std::string> used;
  for (int gpu : worker_gpus) {
    if (gpu >= 0 && static_cast<std::size_t>(gpu) < inventory.gpus.size()) {
      used.push_back(gpu_name(inventory.gpus[static_cast<std::size_t>(gpu)]));
    }
  }
  for (const std::string& line : stderr_tail) {
    if (!mentions(line, kCudaErrors)) continue;
    out.push_back(cat("CUDA error on ", used.empty() ? "its GPU" : join(used, ", "), ": ", line));
    break;
  }
  std::size_t shown = 0;
  std::size_t troubles = 0;
  for (const KernelLine& record : kernel) {
    if (record.usec < since || !mentions(record.text, kDriverTroubles)) continue;
    ++troubles;
    if (shown == kMaxKernelLines) continue;
    ++shown;
    out.push_back(cat("kernel log, ", gpu_of(record.text, inventory), ": ", record.text));
  }
  if (troubles > shown) {
    out.push_back(cat("kernel log: ", troubles - shown, " more such lines (dmesg shows them)"));
  }
  return out;
}

}  // namespace cohort::detail
