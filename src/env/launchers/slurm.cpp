// A Slurm job step (srun): SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, ...
// Only inside a step do these describe this process: a batch script or an
// salloc shell also has SLURM_PROCID=0 and SLURM_NTASKS=N, for the whole
// allocation (read_single notes that case).
#include <cohort/errors.hpp>

#include "core/strings.hpp"
#include "env/launchers/launcher.hpp"
#include "env/master_port.hpp"
#include "env/slurm_counts.hpp"

namespace cohort::detail {
namespace {

constexpr std::string_view kStepMarkers[] = {"SLURM_STEP_ID", "SLURM_STEPID",
                                             "SLURM_STEP_NUM_TASKS", "SLURM_STEP_TASKS_PER_NODE"};

Sourced<int> require(const EnvReader& env, std::initializer_list<std::string_view> names) {
  if (auto value = env.first_int(names)) return *value;
  std::vector<std::string> listed(names.begin(), names.end());
  std::vector<LaunchEnvError::Variable> variables{env.variable(slurm_step_evidence(env))};
  for (std::string_view name : names)
    variables.push_back(env.variable(name));
  throw LaunchEnvError(cat(env.show(slurm_step_evidence(env)),
                           " shows a Slurm job step, but none of ", join(listed, ", "),
                           " is set: srun sets them for every task; run the program through srun "
                           "or unset the stray SLURM_STEP_* variables"),
                       std::move(variables));
}

// Job and step ids may exceed int (e.g. the interactive step, 4294967290).
std::uint64_t read_id(const EnvReader& env, std::initializer_list<std::string_view> names) {
  auto text = env.first(names);
  if (!text) return 0;
  auto number = parse_int(text->value);
  if (!number || *number < 0) {
    throw LaunchEnvError(cat(text->source, "='", text->value,
                             "' is not a number: Slurm job and step ids are non-negative integers; "
                             "fix or unset it"),
                         {{text->source, text->value}});
  }
  return static_cast<std::uint64_t>(*number);
}

// Tasks on this node, from the per-node counts.
Sourced<int> local_world_size(const EnvReader& env, const LaunchInfo& info) {
  auto text = env.first({"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
  if (!text) {
    if (info.num_nodes.value == 1) return {info.world_size.value, info.world_size.source};
    return {kUnknown, "unknown: SLURM_STEP_TASKS_PER_NODE unset"};
  }
  auto counts = parse_slurm_counts(text->value);
  if (!counts) {
    throw LaunchEnvError(
        cat(text->source, "='", text->value, "' does not parse: expected counts like '2(x3),1'"),
        {{text->source, text->value}});
  }
  long total = 0;
  for (int count : *counts)
    total += count;
  const auto show_all = [&] {
    return cat(text->source, "=", text->value, " (", counts->size(), " nodes, ", total, " tasks), ",
               info.num_nodes.source, "=", info.num_nodes.value, ", ", info.world_size.source, "=",
               info.world_size.value, ", ", info.node_rank.source, "=", info.node_rank.value);
  };
  if (static_cast<int>(counts->size()) != info.num_nodes.value || total != info.world_size.value ||
      info.node_rank.value >= info.num_nodes.value) {
    throw LaunchEnvError(
        cat("inconsistent Slurm step: ", show_all(),
            " do not agree; they come from one srun, so another launcher or a script "
            "probably overwrote some of them"),
        {{text->source, text->value},
         env.variable(info.num_nodes.source),
         env.variable(info.world_size.source),
         env.variable(info.node_rank.source)});
  }
  return {(*counts)[static_cast<std::size_t>(info.node_rank.value)],
          cat(text->source, " at ", info.node_rank.source)};
}

// Rank 0 of a step runs on the first node of the step's nodelist.
Sourced<std::string> first_host(const EnvReader& env, const LaunchInfo& info) {
  auto list = env.first({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (!list) {
    if (info.num_nodes.value == 1) return {"127.0.0.1", "loopback: a one-node step"};
    return {"", "unknown: no SLURM_STEP_NODELIST or SLURM_JOB_NODELIST"};
  }
  hostlist::Summary hosts;
  try {
    hosts = hostlist::summarize(list->value, 1);
  } catch (const InvalidArgument& error) {
    throw LaunchEnvError(cat(list->source, "='", list->value, "' does not parse: ", error.what()),
                         {{list->source, list->value}});
  }
  if (hosts.count == 0) {
    throw LaunchEnvError(cat(list->source, " is empty: srun sets it to the step's nodes"),
                         {{list->source, list->value}});
  }
  if (list->source == "SLURM_STEP_NODELIST" && info.num_nodes.source == "SLURM_STEP_NUM_NODES" &&
      hosts.count != static_cast<std::size_t>(info.num_nodes.value)) {
    throw LaunchEnvError(
        cat("inconsistent Slurm step: SLURM_STEP_NODELIST=", list->value, " names ", hosts.count,
            " hosts but SLURM_STEP_NUM_NODES=", info.num_nodes.value),
        {{list->source, list->value}, env.variable("SLURM_STEP_NUM_NODES")});
  }
  return {hosts.hosts.front(), cat("first host of ", list->source)};
}

}  // namespace

std::string_view slurm_step_evidence(const EnvReader& env) {
  for (std::string_view name : kStepMarkers) {
    if (env.has(name)) return name;
  }
  return {};
}

Detection read_slurm_step(const EnvReader& env) {
  Detection out;
  LaunchInfo& info = out.info;
  info.launcher = {Launcher::slurm, std::string(slurm_step_evidence(env))};
  info.rank = require(env, {"SLURM_PROCID"});
  info.world_size = require(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"});
  info.local_rank = require(env, {"SLURM_LOCALID"});
  info.node_rank = require(env, {"SLURM_NODEID"});
  info.num_nodes = require(env, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"});
  info.local_world_size = local_world_size(env, info);
  info.master_addr = first_host(env, info);

  if (auto job = env.first({"SLURM_JOB_ID", "SLURM_JOBID"})) {
    info.job_id = *job;
    const std::uint64_t job_number = read_id(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
    const std::uint64_t step = read_id(env, {"SLURM_STEP_ID", "SLURM_STEPID"});
    info.master_port = {
        derive_port(std::to_string(job_number), step),
        cat("derived from ", job->source, "=", job->value, " and ", env.show("SLURM_STEP_ID"))};
  } else {
    info.job_id = {"", "none: SLURM_JOB_ID unset"};
    info.master_port = {
        0, "not in the environment: no SLURM_JOB_ID to derive it from; set MASTER_PORT"};
  }
  info.restart_count = env.first_int({"SLURM_RESTART_COUNT"})
                           .value_or(Sourced<int>{0, "default: SLURM_RESTART_COUNT unset"});
  return out;
}

std::string srun_forms(int nodes, int workers) {
  return cat("The forms that work: `srun -N", nodes, " --ntasks-per-node=", workers,
             " cohort run PROGRAM` (one worker per task), or `srun -N", nodes,
             " --ntasks-per-node=1 cohort run -n ", workers,
             " PROGRAM` (one agent per node, starting the workers)");
}

namespace {

void describe_worker(Environment& env, const WorkerSeat& seat) {
  const std::string world = cat(seat.world_size);
  rewrite_present(env, "SLURM_PROCID", cat(seat.rank));
  rewrite_present(env, "SLURM_LOCALID", cat(seat.local_rank));
  for (const char* name : {"SLURM_NTASKS", "SLURM_NPROCS", "SLURM_STEP_NUM_TASKS"})
    rewrite_present(env, name, world);
  const std::string counts = format_slurm_counts(seat.workers_per_node);
  rewrite_present(env, "SLURM_TASKS_PER_NODE", counts);
  rewrite_present(env, "SLURM_STEP_TASKS_PER_NODE", counts);
  rewrite_present(env, "SLURM_NTASKS_PER_NODE", cat(seat.local_world_size));
  std::vector<std::string> ranks;
  ranks.reserve(seat.ranks_on_my_node.size());
  for (int other : seat.ranks_on_my_node)
    ranks.push_back(cat(other));
  rewrite_present(env, "SLURM_GTIDS", join(ranks, ","));
  // srun reads SLURM_NTASKS as its -n: a nested srun in a worker now asks for
  // as many tasks as there are workers, more than the CPUs the allocation
  // counted for the agent tasks. Let it, as a per-task srun's would run.
  if (env.count("SLURM_NTASKS") != 0 && env.count("SLURM_OVERCOMMIT") == 0) {
    env["SLURM_OVERCOMMIT"] = "1";
  }
}

}  // namespace

LauncherEntry slurm_launcher() {
  LauncherEntry entry;
  entry.launcher = Launcher::slurm;
  entry.name = "slurm";
  entry.description = "Slurm's srun";
  entry.family = "Slurm";
  entry.evidence = slurm_step_evidence;
  entry.read = read_slurm_step;
  entry.agents = AgentForm::job_step;
  entry.working_forms = srun_forms;
  entry.store_proof = StoreProof::munge;
  entry.describe_worker = describe_worker;
  return entry;
}

}  // namespace cohort::detail
