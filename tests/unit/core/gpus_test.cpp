// The node's GPUs (core/gpus): read from the fixtures in tests/data/gpu/
// (sysfs, /proc/driver/nvidia) with and without the NVML test double
// (tests/gpu/fake_nvml.cpp, loaded as the real library is), and which of
// them a process may use under CUDA_VISIBLE_DEVICES and Slurm's variables.
#include "core/gpus/gpus.hpp"

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "core/cpus.hpp"

namespace cohort::detail {
namespace {

const std::string kFixtures = std::string(COHORT_SOURCE_DIR) + "/tests/data/gpu/";

GpuInventory node(const std::string& name, bool nvml) {
  ::setenv("COHORT_FAKE_NVML", (kFixtures + name + "/nvml.txt").c_str(), 1);
  return discover_gpus({kFixtures + name, nvml ? COHORT_FAKE_NVML_PATH : "none"});
}

TEST(CpuList, ParsesAndFormatsLinuxCpuLists) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list(""), std::vector<int>{});
  EXPECT_EQ(parse_cpu_list("3,1-2,2"), (std::vector<int>{1, 2, 3}));
  // Overlapping and nested ranges, and one that ends where the next begins.
  EXPECT_EQ(parse_cpu_list("4-9,0-5,2-3,9-10,12"),
            (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12}));
  EXPECT_EQ(parse_cpu_list("65535,0-65535")->size(), 65536u);
  for (const char* bad : {"a", "1-", "-1", "3-1", "1,,2", "99999999", "0-65536"})
    EXPECT_FALSE(parse_cpu_list(bad)) << bad;
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list({}), "");
}

TEST(DiscoverGpus, ANodeWithoutGpusSaysWhy) {
  const GpuInventory none = node("none", true);
  EXPECT_TRUE(none.gpus.empty());
  EXPECT_NE(none.absent.find("no NVIDIA GPU in "), std::string::npos) << none.absent;
  EXPECT_EQ(none.numa_cpus.at(0), (std::vector<int>{0, 1, 2, 3}));
}

TEST(DiscoverGpus, EightGpusOnTwoNumaNodesFromSysfsAlone) {
  const GpuInventory dgx = node("dgx-h100-x8", false);
  ASSERT_EQ(dgx.gpus.size(), 8u);
  EXPECT_EQ(dgx.source, "sysfs and /proc/driver/nvidia");
  EXPECT_EQ(dgx.driver, "550.54.15");
  EXPECT_EQ(dgx.gpus[2].index, 2);
  EXPECT_EQ(dgx.gpus[2].bus_id, "0000:52:00.0");
  EXPECT_EQ(dgx.gpus[2].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(dgx.gpus[2].uuid, "GPU-00000002-0000-4000-8000-000000000052");
  EXPECT_EQ(dgx.gpus[2].numa_node, 0);
  EXPECT_EQ(dgx.gpus[6].numa_node, 1);
  EXPECT_EQ(format_cpu_list(dgx.gpus[6].local_cpus), "56-111,168-223");
  EXPECT_EQ(format_cpu_list(dgx.numa_cpus.at(1)), "56-111,168-223");
  EXPECT_EQ(dgx.gpus[2].memory_bytes, 0u);  // sysfs does not say
}

TEST(DiscoverGpus, NvmlAddsMemoryAndKeepsWhereEachGpuSits) {
  const GpuInventory dgx = node("dgx-h100-x8", true);
  ASSERT_EQ(dgx.gpus.size(), 8u);
  EXPECT_EQ(dgx.source, "NVML and sysfs");
  EXPECT_EQ(dgx.driver, "550.54.15");
  EXPECT_EQ(dgx.gpus[7].bus_id, "0000:df:00.0");  // NVML's "00000000:DF:00.0", as sysfs writes it
  EXPECT_EQ(dgx.gpus[7].memory_bytes, 81559ull * 1024 * 1024);
  EXPECT_EQ(dgx.gpus[7].numa_node, 1);  // from sysfs, by bus id
}

TEST(DiscoverGpus, WithoutADriverNvmlFailsAndSysfsStillNamesTheDevices) {
  const GpuInventory vm = node("vm-no-numa-x2", true);
  ASSERT_EQ(vm.gpus.size(), 2u);
  EXPECT_EQ(vm.source, "sysfs");
  EXPECT_EQ(vm.gpus[0].name, "NVIDIA PCI device 0x2330");
  EXPECT_EQ(vm.gpus[0].numa_node, -1);
  // A library that is not there: sysfs alone, no error.
  const GpuInventory h100 = discover_gpus({kFixtures + "h100-x1", "/nonexistent/libnvidia-ml.so"});
  ASSERT_EQ(h100.gpus.size(), 1u);
  EXPECT_EQ(h100.source, "sysfs and /proc/driver/nvidia");
}

TEST(VisibleGpus, CudaVisibleDevicesByIndexAndByUuidInItsOrder) {
  const GpuInventory dgx = node("dgx-h100-x8", false);
  const GpuVisibility some = visible_gpus(dgx, {{"CUDA_VISIBLE_DEVICES", "2,3,6,7"}});
  EXPECT_EQ(some.gpus, (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(some.source, "CUDA_VISIBLE_DEVICES=2,3,6,7");
  const GpuVisibility by_uuid =
      visible_gpus(dgx, {{"CUDA_VISIBLE_DEVICES", "GPU-00000005,1"}});  // a prefix is enough
  EXPECT_EQ(by_uuid.gpus, (std::vector<int>{5, 1}));
  EXPECT_EQ(by_uuid.tokens, (std::vector<std::string>{"GPU-00000005", "1"}));
  // CUDA stops at the first entry that names no GPU.
  const GpuVisibility cut = visible_gpus(dgx, {{"CUDA_VISIBLE_DEVICES", "0,9,1"}});
  EXPECT_EQ(cut.gpus, (std::vector<int>{0}));
  ASSERT_EQ(cut.notes.size(), 1u);
  EXPECT_NE(cut.notes[0].find("'9' names no GPU"), std::string::npos) << cut.notes[0];
  EXPECT_TRUE(visible_gpus(dgx, {{"CUDA_VISIBLE_DEVICES", ""}}).gpus.empty());
  EXPECT_TRUE(visible_gpus(dgx, {{"CUDA_VISIBLE_DEVICES", "-1"}}).gpus.empty());
  EXPECT_TRUE(visible_gpus(dgx, {{"CUDA_VISIBLE_DEVICES", "1,1"}}).gpus.empty());
  EXPECT_EQ(visible_gpus(dgx, {}).gpus.size(), 8u);
}

TEST(VisibleGpus, SlurmsAllocatedGpusWhenCudaVisibleDevicesIsUnset) {
  const GpuInventory dgx = node("dgx-h100-x8", false);
  const GpuVisibility step =
      visible_gpus(dgx, {{"SLURM_STEP_GPUS", "4,5"}, {"SLURM_JOB_GPUS", "0-7"}});
  EXPECT_EQ(step.gpus, (std::vector<int>{4, 5}));
  EXPECT_EQ(step.source, "SLURM_STEP_GPUS=4,5");
  EXPECT_EQ(visible_gpus(dgx, {{"SLURM_JOB_GPUS", "0-1"}}).gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(visible_gpus(dgx, {{"GPU_DEVICE_ORDINAL", "3"}}).gpus, (std::vector<int>{3}));
  // CUDA_VISIBLE_DEVICES, which Slurm also sets, is what CUDA reads: it wins.
  EXPECT_EQ(visible_gpus(dgx, {{"SLURM_STEP_GPUS", "4,5"}, {"CUDA_VISIBLE_DEVICES", "0"}}).gpus,
            (std::vector<int>{0}));
}

// Indices Slurm names that the node lacks are one note, however many.
TEST(VisibleGpus, SlurmIndicesTheNodeLacksAreOneNote) {
  const GpuInventory dgx = node("dgx-h100-x8", false);
  const GpuVisibility wide = visible_gpus(dgx, {{"SLURM_STEP_GPUS", "6-65535"}});
  EXPECT_EQ(wide.gpus, (std::vector<int>{6, 7}));
  EXPECT_EQ(wide.notes,
            (std::vector<std::string>{"SLURM_STEP_GPUS: GPUs 8-65535 are not on this node"}));
  EXPECT_EQ(visible_gpus(dgx, {{"SLURM_JOB_GPUS", "1,9"}}).notes,
            (std::vector<std::string>{"SLURM_JOB_GPUS: GPU 9 is not on this node"}));
}

}  // namespace
}  // namespace cohort::detail
