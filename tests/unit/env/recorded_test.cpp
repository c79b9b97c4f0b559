// detect_launch on environments recorded from the real launchers on this kind
// of machine (tests/data/envdumps, written by tests/tools/record-envdumps).
#include <map>
#include <set>

#include <gtest/gtest.h>

#include <cohort/launch_env.hpp>

#include "support/env_dump.hpp"

namespace cohort {
namespace {

struct Expected {
  std::string dump;
  Launcher launcher;
  int world_size;
  int num_nodes;  ///< kUnknown where the launcher does not say
  std::string master_addr;
  bool port_derived;  ///< a job-derived port (else 0 or MASTER_PORT)
  std::string note;   ///< a phrase every rank's notes contain, or ""
};

std::ostream& operator<<(std::ostream& out, const Expected& expected) {
  return out << expected.dump;
}

class RecordedLaunch : public ::testing::TestWithParam<Expected> {};

// Every rank of a recorded job is detected, and together the ranks form one
// consistent world: ranks 0..W-1 once each, the same master, port, job and
// node count everywhere, (node, local rank) pairs unique, and each node's
// rank count equal to its local world size.
TEST_P(RecordedLaunch, RanksFormOneConsistentWorld) {
  const Expected& expected = GetParam();
  const auto ranks =
      test::read_env_dump(test::test_data_dir() + "/envdumps/" + expected.dump + ".txt");
  ASSERT_FALSE(ranks.empty());

  std::set<int> seen_ranks;
  std::set<std::pair<int, int>> seen_slots;
  std::map<int, int> per_node;
  std::map<int, int> local_sizes;
  std::set<std::string> masters, jobs;
  std::set<int> ports;
  for (const auto& [label, env] : ranks) {
    SCOPED_TRACE("rank label " + std::to_string(label));
    const LaunchInfo info = detect_launch(env);
    EXPECT_EQ(info.launcher.value, expected.launcher);
    EXPECT_EQ(info.world_size.value, expected.world_size);
    EXPECT_EQ(info.num_nodes.value, expected.num_nodes);
    if (expected.launcher != Launcher::single) {
      EXPECT_EQ(info.rank.value, label);
    }
    EXPECT_TRUE(seen_ranks.insert(info.rank.value).second);
    EXPECT_TRUE(seen_slots.insert({info.node_rank.value, info.local_rank.value}).second);
    ++per_node[info.node_rank.value];
    local_sizes[info.node_rank.value] = info.local_world_size.value;
    masters.insert(info.master_addr.value);
    jobs.insert(info.job_id.value);
    ports.insert(info.master_port.value);
    for (const auto& field :
         {info.rank.source, info.world_size.source, info.local_rank.source,
          info.local_world_size.source, info.node_rank.source, info.num_nodes.source,
          info.master_addr.source, info.master_port.source, info.launcher.source}) {
      EXPECT_FALSE(field.empty()) << "a field without a source";
    }
    if (!expected.note.empty()) {
      bool noted = false;
      for (const std::string& note : info.notes)
        noted = noted || note.find(expected.note) != std::string::npos;
      EXPECT_TRUE(noted) << "no note containing '" << expected.note << "'";
    } else {
      EXPECT_TRUE(info.notes.empty()) << info.notes.front();
    }
  }
  if (expected.launcher != Launcher::single) {
    EXPECT_EQ(static_cast<int>(ranks.size()), expected.world_size);
  }
  EXPECT_EQ(masters, std::set<std::string>{expected.master_addr});
  EXPECT_EQ(jobs.size(), 1u);
  ASSERT_EQ(ports.size(), 1u);
  EXPECT_EQ(*ports.begin() >= 12000 && *ports.begin() < 32000, expected.port_derived)
      << "port " << *ports.begin();
  if (expected.num_nodes != kUnknown && expected.launcher != Launcher::single) {
    EXPECT_EQ(static_cast<int>(per_node.size()), expected.num_nodes);
    for (const auto& [node, count] : per_node)
      EXPECT_EQ(local_sizes[node], count) << "node " << node;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Launchers, RecordedLaunch,
    ::testing::Values(
        Expected{"slurm-srun-n4", Launcher::slurm, 4, 1, "localhost", true, ""},
        Expected{"slurm-srun-pmix-n4", Launcher::pmix, 4, 1, "localhost", true, ""},
        Expected{"slurm-srun-N2-per-node1", Launcher::slurm, 2, 2, "n1", true, ""},
        Expected{"slurm-srun-N2-n5", Launcher::slurm, 5, 2, "n1", true, ""},
        Expected{"slurm-sbatch-script", Launcher::single, 1, 1, "127.0.0.1", false,
                 "not in a job step"},
        Expected{"openmpi-mpirun-np4", Launcher::openmpi, 4, 1, "127.0.0.1", true, ""},
        Expected{"openmpi-sbatch-np4", Launcher::openmpi, 4, 1, "127.0.0.1", true,
                 "Slurm variables are set too (SLURM_PROCID=0)"},
        Expected{"mpich-hydra-np4", Launcher::mpich, 4, 1, "127.0.0.1", false, ""},
        Expected{"torchrun-standalone-n2", Launcher::torchrun, 2, 1, "localhost", false, ""}),
    [](const auto& test_info) {
      std::string name = test_info.param.dump;
      for (char& c : name)
        c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

}  // namespace
}  // namespace cohort
