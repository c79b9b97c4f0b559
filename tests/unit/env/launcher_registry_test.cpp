// The launcher registry (src/env/launchers): one row per launcher, in the
// detection order DESIGN.md fixes, each complete for what it claims.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include <cohort/launch_env.hpp>

#include "env/launchers/launcher.hpp"

namespace cohort::detail {
namespace {

constexpr Launcher kEvery[] = {Launcher::single, Launcher::cohort,  Launcher::torchrun,
                               Launcher::slurm,  Launcher::openmpi, Launcher::mpich,
                               Launcher::pmix};

TEST(LauncherRegistry, EveryLauncherHasOneRowAndItsOwnNames) {
  std::set<std::string_view> names;
  std::set<std::string_view> descriptions;
  for (Launcher launcher : kEvery) {
    const LauncherEntry& entry = launcher_entry(launcher);
    EXPECT_EQ(entry.launcher, launcher);
    EXPECT_EQ(to_string(launcher), entry.name);
    EXPECT_EQ(launcher_description(launcher), entry.description);
    names.insert(entry.name);
    descriptions.insert(entry.description);
  }
  EXPECT_EQ(names.size(), std::size(kEvery));
  EXPECT_EQ(descriptions.size(), std::size(kEvery));
  EXPECT_EQ(launchers().size(), std::size(kEvery));
}

TEST(LauncherRegistry, DetectsInnermostFirstAndFallsBackToNoLauncherLast) {
  std::vector<Launcher> order;
  for (const LauncherEntry& entry : launchers())
    order.push_back(entry.launcher);
  EXPECT_EQ(order, (std::vector<Launcher>{Launcher::cohort, Launcher::torchrun, Launcher::openmpi,
                                          Launcher::mpich, Launcher::pmix, Launcher::slurm,
                                          Launcher::single}));
  // Only the last row holds without evidence: a row without it earlier would
  // hide every launcher after it.
  for (std::size_t i = 0; i + 1 < launchers().size(); ++i) {
    EXPECT_NE(launchers()[i].evidence, nullptr) << launchers()[i].name;
    EXPECT_FALSE(launchers()[i].family.empty()) << launchers()[i].name;
  }
  EXPECT_EQ(launchers().back().evidence, nullptr);
  for (const LauncherEntry& entry : launchers())
    EXPECT_NE(entry.read, nullptr) << entry.name;
}

TEST(LauncherRegistry, ALauncherThatStartsAgentsSaysWhichFormsWork) {
  for (const LauncherEntry& entry : launchers()) {
    const bool starts_agents =
        entry.agents == AgentForm::job_step || entry.agents == AgentForm::mpi_job;
    ASSERT_EQ(entry.working_forms != nullptr, starts_agents) << entry.name;
    if (!starts_agents) continue;
    const std::string forms = entry.working_forms(3, 4);
    EXPECT_NE(forms.find("cohort run -n 4"), std::string::npos) << entry.name << ": " << forms;
  }
}

TEST(LauncherRegistry, EachRewritesOnlyItsOwnVariablesThatArePresent) {
  const int per_node[] = {2, 2};
  const int here[] = {2, 3};
  const WorkerSeat seat{3, 4, 1, 2, per_node, here};
  for (const LauncherEntry& entry : launchers()) {
    if (entry.describe_worker == nullptr) continue;
    Environment untouched{{"PATH", "/bin"}};
    entry.describe_worker(untouched, seat);
    EXPECT_EQ(untouched, (Environment{{"PATH", "/bin"}})) << entry.name;
  }
  Environment env{{"SLURM_PROCID", "0"},
                  {"SLURM_NTASKS", "2"},
                  {"SLURM_GTIDS", "0"},
                  {"OMPI_COMM_WORLD_RANK", "0"},
                  {"PMI_RANK", "0"},
                  {"PMIX_RANK", "0"},
                  {"SLURM_TASKS_PER_NODE", "1(x2)"}};
  for (const LauncherEntry& entry : launchers()) {
    if (entry.describe_worker != nullptr) entry.describe_worker(env, seat);
  }
  EXPECT_EQ(env["SLURM_PROCID"], "3");
  EXPECT_EQ(env["SLURM_NTASKS"], "4");
  EXPECT_EQ(env["SLURM_GTIDS"], "2,3");
  EXPECT_EQ(env["SLURM_TASKS_PER_NODE"], "2(x2)");
  EXPECT_EQ(env["SLURM_OVERCOMMIT"], "1");
  EXPECT_EQ(env["OMPI_COMM_WORLD_RANK"], "3");
  EXPECT_EQ(env["PMI_RANK"], "3");
  EXPECT_EQ(env["PMIX_RANK"], "3");
}

TEST(LauncherRegistry, EveryMpiLibraryHasALauncherThatStartsItsRanks) {
  unsigned started = kNoMpi;
  for (const LauncherEntry& entry : launchers())
    started |= entry.starts_mpi;
  EXPECT_EQ(started, kOpenMpi | kMpich);
  EXPECT_EQ(launcher_entry(Launcher::slurm).starts_mpi, kNoMpi);
}

}  // namespace
}  // namespace cohort::detail
