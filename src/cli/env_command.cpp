// cohort env [--json]: what a worker started here would see.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cohort/communicator.hpp>
#include <cohort/config.hpp>
#include <cohort/launch_env.hpp>
#include <cohort/store.hpp>

#include "bootstrap/interface_choice.hpp"
#include "cli/commands.hpp"
#include "cli/host_probe.hpp"
#include "comm/registry.hpp"
#include "core/cpus.hpp"
#include "core/gpus/gpus.hpp"
#include "core/net_interfaces.hpp"
#include "core/strings.hpp"
#include "launch/gpu_placement.hpp"
#include "launch/thread_budget.hpp"

namespace cohort::cli {
namespace {

using Json = nlohmann::ordered_json;

// What `cohort env` was asked to place, as cohort run would.
struct Asked {
  int workers = 0;  // 0: the launcher's local size, else one per usable GPU
  int gpus_per_proc = 0;
  detail::CpuBind cpu_bind = detail::CpuBind::none;
};

Json number_or_null(int value) {
  return value == kUnknown ? Json(nullptr) : Json(value);
}

// The whole report as one JSON object; the text form is rendered from it, so
// both always say the same.
// The backend cohort::init() would use here, and why each other one would
// not serve: the registry's own choice (COHORT_BACKEND, else the viable one
// of highest priority), refusals included, so that both always agree.
Json backend_choice(const LaunchInfo& info, const Environment& env) {
  detail::BackendContext context;
  context.info = &info;
  // Choosing needs only to know that there will be a store: init() always
  // connects one. Nothing is asked of it.
  context.store = std::make_shared<PrefixStore>("", nullptr);
  Json refused = Json::object();
  for (const auto& [name, why] : detail::judge_backends(context)) {
    if (!why.empty()) refused[std::string(name)] = why;
  }
  const auto asked = env.find("COHORT_BACKEND");
  const std::string_view name = asked == env.end() ? std::string_view() : asked->second;
  try {
    const std::string_view chosen = detail::choose_backend(context, name);
    if (!name.empty())
      return {{"chosen", chosen}, {"reason", "COHORT_BACKEND"}, {"refused", refused}};
    std::string serves;
    for (const detail::BackendEntry& entry : detail::backends()) {
      if (entry.name == chosen) serves = entry.serves;
    }
    return {{"chosen", chosen},
            {"reason", "the viable one of highest priority: it serves " + serves},
            {"refused", refused}};
  } catch (const Error& error) {  // what cohort::init() would throw
    return {{"chosen", nullptr}, {"reason", error.what()}, {"refused", refused}};
  }
}

// The node's GPUs, NUMA nodes and what each local rank would get: one
// worker per GPU unless -n says otherwise (or the launcher's local size).
Json gpu_report(const Environment& env, const LaunchInfo& info, const Asked& asked) {
  const detail::NodeGpus node = detail::read_node_gpus(env, true);
  Json gpus = Json::array();
  for (std::size_t i = 0; i < node.inventory.gpus.size(); ++i) {
    const detail::Gpu& gpu = node.inventory.gpus[i];
    const auto ordinal =
        std::find(node.visible.gpus.begin(), node.visible.gpus.end(), static_cast<int>(i));
    gpus.push_back({{"index", gpu.index},
                    {"name", gpu.name},
                    {"bus_id", gpu.bus_id},
                    {"uuid", gpu.uuid},
                    {"memory_mib", gpu.memory_bytes > 0 ? Json(gpu.memory_bytes >> 20) : Json()},
                    {"numa_node", gpu.numa_node >= 0 ? Json(gpu.numa_node) : Json()},
                    {"local_cpus", detail::format_cpu_list(gpu.local_cpus)},
                    {"cuda_ordinal", ordinal == node.visible.gpus.end()
                                         ? Json()
                                         : Json(ordinal - node.visible.gpus.begin())}});
  }
  Json numa = Json::object();
  for (const auto& [number, cpus] : node.inventory.numa_cpus)
    numa[std::to_string(number)] = detail::format_cpu_list(cpus);
  Json out = {{"source", node.inventory.source},
              {"driver", node.inventory.driver},
              {"devices", gpus},
              {"usable", node.visible.gpus.size()},
              {"visible_by", node.visible.source},
              {"visibility_notes", node.visible.notes},
              {"numa_nodes", numa}};
  if (!node.inventory.absent.empty()) out["absent"] = node.inventory.absent;
  const int usable = static_cast<int>(node.visible.gpus.size());
  const int workers = asked.workers > 0                 ? asked.workers
                      : info.local_world_size.value > 1 ? info.local_world_size.value
                                                        : std::max(1, usable);
  detail::PlacementRequest request{workers, asked.gpus_per_proc, asked.cpu_bind,
                                   detail::affinity_cpus()};
  Json ranks = Json::array();
  try {
    const auto placed = detail::place_workers(node.inventory, node.visible, request);
    for (std::size_t local = 0; local < placed.size(); ++local) {
      std::vector<std::string> used;
      for (int gpu : placed[local].gpus)
        used.push_back(detail::cat(node.inventory.gpus[static_cast<std::size_t>(gpu)].index));
      ranks.push_back({{"local_rank", local},
                       {"gpus", detail::join(used, ",")},
                       {"cuda_visible_devices", placed[local].cuda_visible_devices},
                       {"cpus", detail::format_cpu_list(placed[local].cpus)},
                       {"cpus_why", placed[local].why}});
    }
    out["placement"] = {{"workers", workers},
                        {"task_cpus", detail::format_cpu_list(request.allowed_cpus)},
                        {"gpus_per_proc", asked.gpus_per_proc},
                        {"cpu_bind", std::string(detail::to_string(asked.cpu_bind))},
                        {"local_ranks", ranks}};
  } catch (const InvalidArgument& error) {
    out["placement"] = {{"workers", workers}, {"error", error.what()}};
  }
  return out;
}

Json build_report(const Environment& env, const Asked& asked) {
  const LaunchInfo info = detect_launch(env);
  Json report;
  report["rank"] = number_or_null(info.rank.value);
  report["world_size"] = number_or_null(info.world_size.value);
  report["local_rank"] = number_or_null(info.local_rank.value);
  report["local_world_size"] = number_or_null(info.local_world_size.value);
  report["node_rank"] = number_or_null(info.node_rank.value);
  report["num_nodes"] = number_or_null(info.num_nodes.value);
  report["master_addr"] = info.master_addr.value;
  report["master_port"] = info.master_port.value;
  report["launcher"] = std::string(to_string(info.launcher.value));
  report["job_id"] = info.job_id.value;
  report["restart_count"] = info.restart_count.value;
  report["sources"] = {
      {"rank", info.rank.source},
      {"world_size", info.world_size.source},
      {"local_rank", info.local_rank.source},
      {"local_world_size", info.local_world_size.source},
      {"node_rank", info.node_rank.source},
      {"num_nodes", info.num_nodes.source},
      {"master_addr", info.master_addr.source},
      {"master_port", info.master_port.source},
      {"launcher", info.launcher.source},
      {"job_id", info.job_id.source},
      {"restart_count", info.restart_count.source},
  };
  report["notes"] = info.notes;

  report["hostname"] = hostname();
  detail::Route route;
  if (info.master_addr.value.empty()) {
    route.error = "master address not known yet";
  } else {
    route = detail::route_to(info.master_addr.value);
  }
  Json interfaces = Json::array();
  for (const detail::NetInterface& interface : detail::ipv4_interfaces()) {
    interfaces.push_back(
        {{"name", interface.name},
         {"ipv4", interface.ipv4},
         {"up", interface.up},
         {"loopback", interface.loopback},
         {"routes_to_master", route.found && interface.ipv4 == route.source_address}});
  }
  report["interfaces"] = interfaces;
  if (route.found) {
    report["route_to_master"] = {{"master_address", route.host_address},
                                 {"interface", route.interface},
                                 {"source_address", route.source_address}};
  } else {
    report["route_to_master"] = {{"error", route.error}};
  }

  try {
    const detail::InterfaceChoice choice = detail::choose_interface(info, env);
    report["collectives_interface"] = {
        {"interface", choice.interface}, {"address", choice.address}, {"reason", choice.reason}};
  } catch (const Error& error) {
    report["collectives_interface"] = {{"error", error.what()}};
  }

  const CpuInfo cpus = probe_cpus();
  const detail::CpuFacts facts = detail::probe_cpu_facts();
  report["cpus"] = {{"usable", cpus.usable},
                    {"online", cpus.online},
                    {"affinity", cpus.affinity},
                    {"cgroup_quota", facts.cgroup_quota > 0 ? Json(facts.cgroup_quota) : Json()}};
  // What `cohort run` would give a worker here as OMP_NUM_THREADS (when unset):
  // one worker per task of this launcher, sharing the node with the others.
  const int here = info.local_world_size.value > 0 ? info.local_world_size.value : 1;
  const detail::ThreadBudget budget = detail::thread_budget(env, facts, 1, here);
  report["threads"] = {{"per_worker", budget.threads}, {"source", budget.source}};
  report["gpus"] = gpu_report(env, info, asked);

  Json settings_json = Json::object();
  for (const auto& [name, value] : settings(env)) {
    settings_json[name] = value ? Json(*value) : Json(nullptr);
  }
  report["settings"] = settings_json;
  report["backends"] = compiled_backends();
  report["backend"] = backend_choice(info, env);
  report["version"] = COHORT_VERSION;
  return report;
}

std::string text(const Json& value) {
  if (value.is_null()) return "unknown";
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

void row(std::ostream& out, const std::string& name, const std::string& value,
         const std::string& note = "") {
  out << "  " << std::left << std::setw(22) << name << ' ';
  if (note.empty()) {
    out << value << "\n";
  } else {
    out << std::setw(22) << value << " " << note << "\n";
  }
}

void print_gpus(const Json& gpus, std::ostream& out) {
  out << "gpus\n";
  if (gpus.contains("absent")) {
    row(out, "gpus", "none: " + text(gpus["absent"]));
  } else {
    row(out, "found by", text(gpus["source"]),
        gpus["driver"].get<std::string>().empty() ? "" : "driver " + text(gpus["driver"]));
    for (const Json& gpu : gpus["devices"]) {
      row(out, detail::cat("gpu ", text(gpu["index"])),
          detail::cat(text(gpu["bus_id"]), " ", text(gpu["name"]),
                      gpu["memory_mib"].is_null()
                          ? ""
                          : detail::cat(", ", text(gpu["memory_mib"]), " MiB")),
          detail::cat("NUMA node ", gpu["numa_node"].is_null() ? "none" : text(gpu["numa_node"]),
                      ", CPUs ", text(gpu["local_cpus"]),
                      gpu["cuda_ordinal"].is_null()
                          ? ", not usable here"
                          : detail::cat(", cuda:", text(gpu["cuda_ordinal"]))));
    }
  }
  for (const auto& [number, cpus] : gpus["numa_nodes"].items())
    row(out, "numa node " + number, "CPUs " + text(cpus));
  row(out, "usable", text(gpus["usable"]), detail::cat("(", text(gpus["visible_by"]), ")"));
  for (const Json& note : gpus["visibility_notes"])
    row(out, "  note", text(note));
  const Json& placement = gpus["placement"];
  if (placement.contains("error")) {
    row(out, "placement", text(placement["error"]));
    return;
  }
  row(out, "placement",
      detail::cat(text(placement["workers"]), placement["workers"] == 1 ? " worker" : " workers"),
      detail::cat("(--gpus-per-proc ", text(placement["gpus_per_proc"]), ", --cpu-bind ",
                  text(placement["cpu_bind"]), ")"));
  for (const Json& rank : placement["local_ranks"]) {
    const std::string visible = text(rank["cuda_visible_devices"]);
    row(out, detail::cat("local rank ", text(rank["local_rank"])),
        detail::cat("gpu ", text(rank["gpus"]).empty() ? "none" : text(rank["gpus"]),
                    visible.empty() ? "" : " (CUDA_VISIBLE_DEVICES=" + visible + ")"),
        text(rank["cpus"]).empty()
            ? detail::cat("CPUs ", text(placement["task_cpus"]), ": not bound (this task's)")
            : detail::cat("CPUs ", text(rank["cpus"]), ": ", text(rank["cpus_why"])));
  }
}

void print_text(const Json& report, std::ostream& out) {
  out << "launch (value, then where it came from)\n";
  for (const auto& [field, source] : report["sources"].items()) {
    std::string value = text(report[field]);
    if (value.empty()) value = "-";
    row(out, field, value, source.get<std::string>());
  }

  out << "host\n";
  row(out, "hostname", text(report["hostname"]));
  for (const Json& interface : report["interfaces"]) {
    std::string flags = interface["up"].get<bool>() ? "up" : "down";
    if (interface["loopback"].get<bool>()) flags += ", loopback";
    if (interface["routes_to_master"].get<bool>()) flags += ", routes to the master";
    row(out, "interface " + text(interface["name"]), text(interface["ipv4"]), flags);
  }
  const Json& route = report["route_to_master"];
  if (route.contains("error")) {
    row(out, "route to master", text(route["error"]));
  } else {
    row(out, "route to master",
        detail::cat(text(route["master_address"]), " via ",
                    route["interface"].get<std::string>().empty() ? "?" : text(route["interface"]),
                    " from ", text(route["source_address"])));
  }
  const Json& collectives = report["collectives_interface"];
  if (collectives.contains("error")) {
    row(out, "collectives on", text(collectives["error"]));
  } else {
    row(out, "collectives on",
        detail::cat(text(collectives["interface"]), " ", text(collectives["address"])),
        detail::cat("(", text(collectives["reason"]), ")"));
  }
  const Json& cpus = report["cpus"];
  row(out, "cpus",
      detail::cat(cpus["usable"].get<int>(), " usable of ", cpus["online"].get<int>(),
                  " online (affinity ", text(cpus["affinity"]), ")",
                  cpus["cgroup_quota"].is_null()
                      ? std::string()
                      : detail::cat(", cgroup quota ", text(cpus["cgroup_quota"]))));
  row(out, "threads per worker", text(report["threads"]["per_worker"]),
      detail::cat("OMP_NUM_THREADS from cohort run when unset: ",
                  text(report["threads"]["source"])));
  print_gpus(report["gpus"], out);

  out << "settings\n";
  for (const auto& [name, value] : report["settings"].items()) {
    row(out, name, value.is_null() ? "(unset)" : text(value));
  }
  // Beyond the two always listed, only COHORT_*, GLOO_* and NCCL_* that are set.
  if (report["settings"].size() <= 2) row(out, "COHORT_* GLOO_* NCCL_*", "(none set)");

  out << "build\n";
  row(out, "version", text(report["version"]));
  const auto backends = report["backends"].get<std::vector<std::string>>();
  row(out, "backends", detail::join(backends, ", ") + " (highest priority first)");
  const Json& backend = report["backend"];
  row(out, "backend", text(backend["chosen"]), detail::cat("(", text(backend["reason"]), ")"));
  for (const auto& [name, why] : backend["refused"].items())
    row(out, "  not " + name, text(why));
  if (!report["notes"].empty()) {
    out << "notes\n";
    for (const Json& note : report["notes"])
      out << "  - " << text(note) << "\n";
  }
}

}  // namespace

void add_env_command(CLI::App& app, Runner& run) {
  auto json = std::make_shared<bool>(false);
  auto asked = std::make_shared<Asked>();
  auto bind = std::make_shared<std::string>("none");
  CLI::App* env = app.add_subcommand("env", kEnvSummary);
  env->add_flag("--json", *json, "print one JSON object instead of text");
  env->add_option("-n,--nproc-per-node", asked->workers,
                  "show the GPUs and CPUs of this many local ranks (default: the launcher's "
                  "local size, else one per usable GPU)")
      ->check(CLI::Range(1, 4096));
  env->add_option("--gpus-per-proc", asked->gpus_per_proc,
                  "as cohort run --gpus-per-proc: each rank's own GPUs")
      ->check(CLI::Range(0, 64));
  env->add_option("--cpu-bind", *bind, "as cohort run --cpu-bind: none, numa, gpu or cores")
      ->check(CLI::IsMember({"none", "numa", "gpu", "cores"}));
  env->callback([&run, json, asked, bind] {
    asked->cpu_bind = *detail::parse_cpu_bind(*bind);
    run = [json, asked] {
      const Json report = build_report(process_environment(), *asked);
      if (*json) {
        std::cout << report.dump() << "\n";
      } else {
        print_text(report, std::cout);
      }
      return kExitOk;
    };
  });
}

}  // namespace cohort::cli
