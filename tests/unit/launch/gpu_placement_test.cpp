// Which GPUs and CPUs each worker gets (launch/gpu_placement): a pure
// function, on hand-made inventories of 0, 1, 4 and 8 GPUs on 1 or 2 NUMA
// nodes.
#include "launch/gpu_placement.hpp"

#include <gtest/gtest.h>

#include <cohort/errors.hpp>

#include "core/cpus.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

std::vector<int> cpus(const char* list) {
  return *parse_cpu_list(list);
}

// `count` GPUs, the first half on NUMA node 0 (CPUs 0-7), the rest on node
// 1 (CPUs 8-15) when `two_nodes`; numa_node -1 when `numa` is false.
GpuInventory inventory(int count, bool two_nodes, bool numa = true) {
  GpuInventory out;
  out.numa_cpus[0] = two_nodes ? cpus("0-7") : cpus("0-15");
  if (two_nodes) out.numa_cpus[1] = cpus("8-15");
  for (int i = 0; i < count; ++i) {
    Gpu gpu;
    gpu.index = i;
    gpu.bus_id = cat("0000:", 10 + i, ":00.0");
    gpu.numa_node = !numa ? -1 : two_nodes && i >= count / 2 ? 1 : 0;
    gpu.local_cpus = gpu.numa_node < 0 ? std::vector<int>{} : out.numa_cpus[gpu.numa_node];
    out.gpus.push_back(gpu);
  }
  return out;
}

GpuVisibility all(const GpuInventory& gpus) {
  return visible_gpus(gpus, {});
}

std::string what_it_throws(const GpuInventory& gpus, const GpuVisibility& visible,
                           const PlacementRequest& request) {
  try {
    place_workers(gpus, visible, request);
  } catch (const InvalidArgument& error) {
    return error.what();
  }
  return "nothing";
}

TEST(GpuPlacement, ByDefaultEachLocalRankWouldUseItsOwnIndexAndNothingIsSet) {
  const GpuInventory four = inventory(4, false);
  const auto placed = place_workers(four, all(four), {4, 0, CpuBind::none, cpus("0-15")});
  for (int local = 0; local < 4; ++local) {
    EXPECT_EQ(placed[local].gpus, std::vector<int>{local});
    EXPECT_EQ(placed[local].cuda_visible_devices, "");
    EXPECT_TRUE(placed[local].cpus.empty());
  }
  // More workers than GPUs: the others have none (a CPU job, or set_device fails there).
  EXPECT_TRUE(place_workers(four, all(four), {6, 0, CpuBind::none, {}})[5].gpus.empty());
  const GpuInventory none = inventory(0, false);
  EXPECT_TRUE(place_workers(none, all(none), {2, 0, CpuBind::none, {}})[0].gpus.empty());
}

TEST(GpuPlacement, GpusPerProcSlicesWhatTheNodeAllowsInItsOwnNames) {
  const GpuInventory eight = inventory(8, true);
  const GpuVisibility some = visible_gpus(eight, {{"CUDA_VISIBLE_DEVICES", "2,3,6,7"}});
  const auto placed = place_workers(eight, some, {2, 2, CpuBind::none, cpus("0-15")});
  EXPECT_EQ(placed[0].cuda_visible_devices, "2,3");
  EXPECT_EQ(placed[1].cuda_visible_devices, "6,7");
  EXPECT_EQ(placed[1].gpus, (std::vector<int>{6, 7}));
  const GpuVisibility uuids = {
      {0, 1}, {"GPU-aa", "GPU-bb"}, "CUDA_VISIBLE_DEVICES=GPU-aa,GPU-bb", {}};
  EXPECT_EQ(place_workers(eight, uuids, {2, 1, CpuBind::none, {}})[1].cuda_visible_devices,
            "GPU-bb");
}

TEST(GpuPlacement, MoreGpusThanTheNodeAllowsIsOneClearError) {
  const GpuInventory one = inventory(1, false);
  const std::string said = what_it_throws(one, all(one), {2, 1, CpuBind::none, {}});
  EXPECT_NE(said.find("2 workers with --gpus-per-proc 1 need 2 GPUs on this node, but it allows 1 "
                      "(every GPU of the node)"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("start at most 1 worker here"), std::string::npos) << said;
  const GpuInventory none = inventory(0, false);
  EXPECT_NE(what_it_throws(none, all(none), {1, 1, CpuBind::none, {}}).find("allows 0"),
            std::string::npos);
}

TEST(GpuPlacement, NumaBindingFollowsEachWorkersGpuWithinTheAllowedCpus) {
  const GpuInventory eight = inventory(8, true);
  const GpuVisibility some = visible_gpus(eight, {{"CUDA_VISIBLE_DEVICES", "2,3,6,7"}});
  const auto placed = place_workers(eight, some, {4, 0, CpuBind::numa, cpus("0-15")});
  EXPECT_EQ(format_cpu_list(placed[0].cpus), "0-7");   // GPU 2: node 0
  EXPECT_EQ(format_cpu_list(placed[1].cpus), "0-7");   // GPU 3: node 0
  EXPECT_EQ(format_cpu_list(placed[2].cpus), "8-15");  // GPU 6: node 1
  EXPECT_EQ(placed[2].why, "NUMA node 1 of GPU 6 (0000:16:00.0)");
  // A task bound to CPUs 4-11 keeps to them.
  const auto narrowed = place_workers(eight, some, {4, 0, CpuBind::gpu, cpus("4-11")});
  EXPECT_EQ(format_cpu_list(narrowed[0].cpus), "4-7");
  EXPECT_EQ(format_cpu_list(narrowed[3].cpus), "8-11");
  // ... and a binding that leaves it no CPU near its GPU is refused.
  const std::string said = what_it_throws(eight, some, {4, 0, CpuBind::numa, cpus("0-3")});
  EXPECT_NE(said.find("none of the CPUs of GPU 6 (0000:16:00.0)'s NUMA node 1 (8-15) is among "
                      "this process's CPUs (0-3"),
            std::string::npos)
      << said;
}

TEST(GpuPlacement, AGpuWithoutANumaNodeOrAWorkerWithoutAGpuCannotBeBoundNearIt) {
  const GpuInventory vm = inventory(2, false, false);
  const std::string said = what_it_throws(vm, all(vm), {2, 0, CpuBind::numa, cpus("0-15")});
  EXPECT_NE(said.find("GPU 0 (0000:10:00.0) has no NUMA node (sysfs numa_node is -1)"),
            std::string::npos)
      << said;
  EXPECT_NE(what_it_throws(vm, all(vm), {2, 0, CpuBind::gpu, cpus("0-15")}).find("no local CPUs"),
            std::string::npos);
  const GpuInventory one = inventory(1, false);
  EXPECT_NE(what_it_throws(one, all(one), {2, 0, CpuBind::numa, cpus("0-15")})
                .find("local rank 1 has none"),
            std::string::npos);
}

TEST(GpuPlacement, CoresGivesEachWorkerAFairContiguousShare) {
  const GpuInventory none = inventory(0, false);
  const auto placed = place_workers(none, all(none), {3, 0, CpuBind::cores, cpus("0-7")});
  EXPECT_EQ(format_cpu_list(placed[0].cpus), "0-1");
  EXPECT_EQ(format_cpu_list(placed[1].cpus), "2-4");
  EXPECT_EQ(format_cpu_list(placed[2].cpus), "5-7");
  EXPECT_NE(what_it_throws(none, all(none), {3, 0, CpuBind::cores, cpus("0-1")})
                .find("this process may use 2"),
            std::string::npos);
}

TEST(GpuPlacement, TheBindingsAreSpelledAsOnTheCommandLine) {
  for (const char* word : {"none", "numa", "gpu", "cores"})
    EXPECT_EQ(to_string(*parse_cpu_bind(word)), word);
  EXPECT_FALSE(parse_cpu_bind("socket"));
}

}  // namespace
}  // namespace cohort::detail
