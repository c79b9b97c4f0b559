// What a failure report says of GPUs: the CUDA error a worker died with, and
// what the NVIDIA driver logged in the kernel's log during the job (an Xid,
// a GPU fallen off the bus, an ECC error), each with the GPU's index and
// bus id. Parsing and matching are pure; reading the log is apart.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/gpus/gpus.hpp"

namespace cohort::detail {

/// One record of the kernel's log: microseconds since boot, and its text.
struct KernelLine {
  std::int64_t usec = 0;
  std::string text;
};

/// /dev/kmsg's records, "priority,sequence,usec,flags;text" one per line
/// (its continuation lines, which start with a space, and malformed ones are
/// skipped).
std::vector<KernelLine> parse_kmsg(std::string_view text);

/// What `<root>/dev/kmsg` holds now, read without waiting; "" when it cannot
/// be read (reading the kernel's log needs CAP_SYSLOG where
/// kernel.dmesg_restrict is 1).
std::string read_kernel_log(const std::string& root);

/// Microseconds since boot now, on the kernel log's clock.
std::int64_t kernel_log_now();

/// The report's GPU lines for a failed worker that used `worker_gpus`
/// (positions in `inventory`): the first CUDA or NCCL error among its last
/// stderr lines, then the driver's lines of the kernel log since `since`
/// (at most five), each naming the GPU it concerns.
std::vector<std::string> gpu_failure_lines(const std::vector<std::string>& stderr_tail,
                                           const std::vector<KernelLine>& kernel,
                                           std::int64_t since, const GpuInventory& inventory,
                                           const std::vector<int>& worker_gpus);

}  // namespace cohort::detail
