// cohort run and torchrun (also torch.distributed.launch, Kubeflow's
// PyTorchJob and hand-set variables): RANK, WORLD_SIZE and friends.
#include "core/strings.hpp"
#include "env/launchers/launcher.hpp"

namespace cohort::detail {
namespace {

constexpr std::string_view kTriggers[] = {
    "RANK",       "WORLD_SIZE",          "LOCAL_RANK",   "LOCAL_WORLD_SIZE",
    "GROUP_RANK", "TORCHELASTIC_RUN_ID", "COHORT_RUN_ID"};

[[noreturn]] void throw_partial(const EnvReader& env, std::string_view missing) {
  std::vector<LaunchEnvError::Variable> variables;
  std::vector<std::string> shown;
  for (std::string_view name : kTriggers) {
    if (env.has(name)) {
      variables.push_back(env.variable(name));
      shown.push_back(env.show(name));
    }
  }
  variables.push_back(env.variable(missing));
  throw LaunchEnvError(
      cat(join(shown, ", "), " set but ", missing,
          " is not: a launcher that sets RANK sets RANK, WORLD_SIZE, LOCAL_RANK and "
          "LOCAL_WORLD_SIZE together; set ",
          missing, ", or unset the others to run as a single process"),
      std::move(variables));
}

std::string_view torchrun_evidence(const EnvReader& env) {
  for (std::string_view name : kTriggers) {
    if (env.has(name)) return name;
  }
  return {};
}

Detection read_torchrun(const EnvReader& env) {
  Detection out;
  LaunchInfo& info = out.info;
  out.master_required = true;

  auto rank = env.first_int({"RANK"});
  auto world_size = env.first_int({"WORLD_SIZE"});
  if (!rank) throw_partial(env, "RANK");
  if (!world_size) throw_partial(env, "WORLD_SIZE");
  info.rank = *rank;
  info.world_size = *world_size;

  auto local_rank = env.first_int({"LOCAL_RANK"});
  auto local_world_size = env.first_int({"LOCAL_WORLD_SIZE"});
  auto node_rank = env.first_int({"GROUP_RANK"});
  auto num_nodes = env.first_int({"GROUP_WORLD_SIZE"});
  if (!local_rank && local_world_size) throw_partial(env, "LOCAL_RANK");
  if (!local_rank) {
    // RANK and WORLD_SIZE alone (Kubeflow's PyTorchJob, hand-set variables):
    // one process per machine is the only safe reading.
    info.local_rank = {0, "assumed: LOCAL_RANK unset"};
    info.local_world_size = {1, "assumed: LOCAL_RANK unset"};
  } else {
    info.local_rank = *local_rank;
    if (local_world_size) {
      info.local_world_size = *local_world_size;
    } else if (num_nodes && num_nodes->value > 0 && info.world_size.value % num_nodes->value == 0) {
      // torch.distributed.launch before 1.9 did not export LOCAL_WORLD_SIZE.
      info.local_world_size = {info.world_size.value / num_nodes->value,
                               "WORLD_SIZE / GROUP_WORLD_SIZE"};
    } else {
      info.local_world_size = {kUnknown, "unknown: LOCAL_WORLD_SIZE unset"};
    }
  }

  // torchrun gives each node a contiguous block of LOCAL_WORLD_SIZE ranks.
  const int per_node = info.local_world_size.value;
  if (node_rank) {
    info.node_rank = *node_rank;
  } else if (per_node > 0) {
    info.node_rank = {info.rank.value / per_node,
                      cat(info.rank.source, " / ", info.local_world_size.source)};
  } else {
    info.node_rank = {kUnknown, "unknown: GROUP_RANK unset"};
  }
  if (num_nodes) {
    info.num_nodes = *num_nodes;
  } else if (per_node > 0 && info.world_size.value % per_node == 0) {
    info.num_nodes = {info.world_size.value / per_node,
                      cat("WORLD_SIZE / ", info.local_world_size.source)};
  } else {
    info.num_nodes = {kUnknown, "unknown: GROUP_WORLD_SIZE unset"};
  }

  if (auto run_id = env.first({"COHORT_RUN_ID"})) {
    info.launcher = {Launcher::cohort, "COHORT_RUN_ID"};
    info.job_id = *run_id;
  } else if (auto elastic_id = env.first({"TORCHELASTIC_RUN_ID"})) {
    info.launcher = {Launcher::torchrun, "TORCHELASTIC_RUN_ID"};
    info.job_id = *elastic_id;
  } else {
    info.launcher = {Launcher::torchrun,
                     "RANK and WORLD_SIZE without TORCHELASTIC_RUN_ID (set by hand or by "
                     "another launcher)"};
    info.job_id = {"", "none: no COHORT_RUN_ID or TORCHELASTIC_RUN_ID"};
  }
  info.restart_count = env.first_int({"TORCHELASTIC_RESTART_COUNT"})
                           .value_or(Sourced<int>{0, "default: TORCHELASTIC_RESTART_COUNT unset"});
  return out;
}

std::string_view cohort_evidence(const EnvReader& env) {
  return env.has("COHORT_RUN_ID") ? std::string_view("COHORT_RUN_ID") : std::string_view();
}

// Both start workers of their own: a copy per task would each start some.
LauncherEntry starts_workers(LauncherEntry entry) {
  entry.family = "cohort/torchrun";
  entry.read = read_torchrun;
  entry.hand_settable = true;
  entry.agents = AgentForm::refused;
  return entry;
}

}  // namespace

LauncherEntry cohort_launcher() {
  LauncherEntry entry;
  entry.launcher = Launcher::cohort;
  entry.name = "cohort";
  entry.description = "cohort run";
  entry.evidence = cohort_evidence;
  return starts_workers(entry);
}

LauncherEntry torchrun_launcher() {
  LauncherEntry entry;
  entry.launcher = Launcher::torchrun;
  entry.name = "torchrun";
  entry.description = "torchrun";
  entry.evidence = torchrun_evidence;
  return starts_workers(entry);
}

}  // namespace cohort::detail
