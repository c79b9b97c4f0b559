// What the failure report says of GPUs (launch/gpu_failures): a worker's
// CUDA error and the driver's kernel-log lines, each with its GPU.
#include "launch/gpu_failures.hpp"

#include <gtest/gtest.h>

namespace cohort::detail {
namespace {

GpuInventory two_gpus() {
  GpuInventory inventory;
  for (const char* bus : {"0000:17:00.0", "0000:65:00.0"}) {
    Gpu gpu;
    gpu.index = static_cast<int>(inventory.gpus.size());
    gpu.bus_id = bus;
    inventory.gpus.push_back(gpu);
  }
  return inventory;
}

TEST(GpuFailures, TheKernelLogsRecordsAreReadWithTheirTimes) {
  const auto lines = parse_kmsg(
      "4,1201,5000000,-;NVRM: Xid (PCI:0000:65:00): 79, pid=4242, name=python, GPU has fallen "
      "off the bus.\n"
      " SUBSYSTEM=pci\n"
      "garbage\n"
      "6,1202,x,-;not a time\n"
      "6,1203,7000000,c;eth0: link up\n");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].usec, 5000000);
  EXPECT_EQ(lines[0].text.rfind("NVRM: Xid (PCI:0000:65:00): 79", 0), 0u);
  EXPECT_EQ(lines[1].text, "eth0: link up");
}

TEST(GpuFailures, TheCudaErrorAndTheDriversLinesDuringTheJobNameTheirGpus) {
  const std::vector<KernelLine> kernel = {
      {1000, "NVRM: Xid (PCI:0000:17:00): 13, before the job started"},
      {6000, "NVRM: Xid (PCI:0000:65:00): 79, pid=4242, GPU has fallen off the bus."},
      {6500, "eth0: link up"},
      {7000, "NVRM: Xid (PCI:0000:ff:00): 48, a GPU this node does not list"}};
  const auto lines =
      gpu_failure_lines({"Traceback (most recent call last):",
                         "RuntimeError: CUDA error: an illegal memory access was encountered"},
                        kernel, 5000, two_gpus(), {1});
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "CUDA error on GPU 1 (0000:65:00.0): RuntimeError: CUDA error: an illegal memory "
            "access was encountered");
  EXPECT_EQ(lines[1],
            "kernel log, GPU 1 (0000:65:00.0): NVRM: Xid (PCI:0000:65:00): 79, pid=4242, GPU has "
            "fallen off the bus.");
  EXPECT_EQ(lines[2].rfind("kernel log, a GPU: NVRM: Xid (PCI:0000:ff:00): 48", 0), 0u);
}

TEST(GpuFailures, NothingToSayWithoutACudaErrorOrADriverLine) {
  EXPECT_TRUE(
      gpu_failure_lines({"ValueError: bad shape"}, {{9, "eth0: link up"}}, 0, two_gpus(), {0})
          .empty());
  // Many driver lines: five, then how many more.
  std::vector<KernelLine> storm;
  for (int i = 0; i < 9; ++i)
    storm.push_back({100 + i, "NVRM: Xid (PCI:0000:17:00): 31, page fault"});
  const auto lines = gpu_failure_lines({}, storm, 0, two_gpus(), {});
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[5], "kernel log: 4 more such lines (dmesg shows them)");
}

}  // namespace
}  // namespace cohort::detail
