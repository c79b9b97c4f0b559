// detect_launch: tries the launchers' detectors innermost first (the
// registry's order, env/launchers), then applies what holds under every
// launcher (MASTER_ADDR/MASTER_PORT overrides and the consistency checks).
#include <cctype>
#include <span>

#include <unistd.h>

#include <cohort/errors.hpp>
#include <cohort/launch_env.hpp>

#include "core/strings.hpp"
#include "env/env_reader.hpp"
#include "env/launchers/launcher.hpp"

extern char** environ;  // NOLINT(readability-identifier-naming): POSIX's name

namespace cohort {
namespace {

using detail::cat;
using detail::Detection;
using detail::EnvReader;
using detail::LauncherEntry;

bool is_variable_name(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!std::isupper(static_cast<unsigned char>(c)) &&
        !std::isdigit(static_cast<unsigned char>(c)) && c != '_') {
      return false;
    }
  }
  return true;
}

// "RANK=3" when read from a variable, else "rank 3 (derived ...)".
std::string show(std::string_view field, const Sourced<int>& value) {
  if (is_variable_name(value.source)) return cat(value.source, "=", value.value);
  return cat(field, " ", value.value, " (", value.source, ")");
}

void add_variable(std::vector<LaunchEnvError::Variable>& out, const EnvReader& env,
                  const Sourced<int>& value) {
  if (is_variable_name(value.source)) out.push_back(env.variable(value.source));
}

bool known(const Sourced<int>& value) {
  return value.value != kUnknown;
}

// Checks `smaller < larger` (or <= when `allow_equal`), naming both on failure.
void require_order(const EnvReader& env, std::string_view small_name, const Sourced<int>& small,
                   std::string_view large_name, const Sourced<int>& large, bool allow_equal) {
  if (!known(small) || !known(large)) return;
  if (allow_equal ? small.value <= large.value : small.value < large.value) return;
  std::vector<LaunchEnvError::Variable> variables;
  add_variable(variables, env, small);
  add_variable(variables, env, large);
  throw LaunchEnvError(
      cat("inconsistent launch environment: ", show(small_name, small), " must be ",
          allow_equal ? "at most " : "less than ", show(large_name, large),
          "; the launcher's arguments, or a script that exports these variables, are wrong"),
      std::move(variables));
}

void validate(const EnvReader& env, const LaunchInfo& info) {
  if (info.world_size.value < 1) {
    std::vector<LaunchEnvError::Variable> variables;
    add_variable(variables, env, info.world_size);
    throw LaunchEnvError(cat("inconsistent launch environment: ",
                             show("world_size", info.world_size), " must be at least 1"),
                         std::move(variables));
  }
  require_order(env, "rank", info.rank, "world_size", info.world_size, false);
  require_order(env, "local_rank", info.local_rank, "local_world_size", info.local_world_size,
                false);
  require_order(env, "local_world_size", info.local_world_size, "world_size", info.world_size,
                true);
  require_order(env, "node_rank", info.node_rank, "num_nodes", info.num_nodes, false);
  require_order(env, "num_nodes", info.num_nodes, "world_size", info.world_size, true);
}

// Hand-set RANK and WORLD_SIZE under mpirun (exported from a shell into
// every rank) would give every rank the same number. A launcher nested in
// mpirun (torchrun, cohort run) sets its own run id and group; bare
// variables for the same world that contradict mpirun's rank are an error.
void check_against_mpi(const EnvReader& env, const LaunchInfo& info) {
  for (std::string_view nested : {"TORCHELASTIC_RUN_ID", "COHORT_RUN_ID", "GROUP_RANK"}) {
    if (env.has(nested)) return;
  }
  constexpr std::pair<std::string_view, std::string_view> kMpi[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"PMI_RANK", "PMI_SIZE"}};
  for (const auto& [rank_name, size_name] : kMpi) {
    const auto rank = env.first_int({rank_name});
    const auto size = env.first_int({size_name});
    if (!rank || !size || size->value != info.world_size.value || rank->value == info.rank.value) {
      continue;
    }
    throw LaunchEnvError(cat(show("rank", info.rank), " contradicts ", rank_name, "=", rank->value,
                             " of mpirun's ", size->value,
                             " ranks: RANK was exported into every rank (a shell profile, a job "
                             "script, mpirun -x RANK); unset it and let mpirun number the ranks"),
                         {env.variable("RANK"), env.variable(rank_name)});
  }
}

void apply_master_overrides(const EnvReader& env, Detection& detection) {
  LaunchInfo& info = detection.info;
  if (auto addr = env.first({"MASTER_ADDR"}); addr && !addr->value.empty()) {
    info.master_addr = *addr;
  } else if (detection.master_required && info.world_size.value > 1) {
    throw LaunchEnvError(
        cat(env.show("RANK"), " and ", env.show("WORLD_SIZE"),
            " but MASTER_ADDR is not set: set MASTER_ADDR to rank 0's host and "
            "MASTER_PORT to a free port there, or launch with `cohort run`"),
        {env.variable("RANK"), env.variable("WORLD_SIZE"), env.variable("MASTER_ADDR")});
  } else if (detection.master_required) {
    info.master_addr = {"127.0.0.1", "loopback: WORLD_SIZE=1"};
  }

  if (auto text = env.first({"MASTER_PORT"})) {
    auto port = detail::parse_int(text->value);
    if (!port || *port < 1 || *port > 65535) {
      throw LaunchEnvError(
          cat("MASTER_PORT='", text->value,
              "' is not a TCP port (1-65535): set it to a free port on ",
              info.master_addr.value.empty() ? "rank 0's host" : info.master_addr.value),
          {env.variable("MASTER_PORT")});
    }
    info.master_port = {static_cast<int>(*port), "MASTER_PORT"};
  } else if (detection.master_required && info.world_size.value > 1) {
    throw LaunchEnvError(
        cat(env.show("MASTER_ADDR"), " but MASTER_PORT is not set: set it to a free port on ",
            info.master_addr.value, ", or launch with `cohort run`"),
        {env.variable("MASTER_ADDR"), env.variable("MASTER_PORT")});
  } else if (detection.master_required) {
    info.master_port = {0, "any free port, chosen at init: WORLD_SIZE=1"};
  }
}

}  // namespace

LaunchInfo detect_launch(const Environment& environment) {
  const EnvReader env(environment);
  const std::span<const LauncherEntry> rows = detail::launchers();
  std::size_t chosen = 0;
  while (rows[chosen].evidence != nullptr && rows[chosen].evidence(env).empty())
    ++chosen;
  const LauncherEntry& launcher = rows[chosen];
  Detection detection = launcher.read(env);
  validate(env, detection.info);
  if (launcher.hand_settable) check_against_mpi(env, detection.info);
  apply_master_overrides(env, detection);

  // Say which outer launchers' variables were set aside, e.g. the SLURM_* of
  // mpirun's helper step.
  for (std::size_t i = chosen + 1; i < rows.size(); ++i) {
    const LauncherEntry& outer = rows[i];
    if (outer.evidence == nullptr || outer.family == launcher.family ||
        outer.family == launcher.also_sets) {
      continue;
    }
    std::string_view evidence = outer.evidence(env);
    // Ranks that mpirun starts on an sbatch job's first node inherit the batch
    // script's SLURM_PROCID without any step variable: worth a note too.
    if (evidence.empty() && outer.launcher == Launcher::slurm && env.has("SLURM_PROCID")) {
      evidence = "SLURM_PROCID";
    }
    if (evidence.empty()) continue;
    detection.info.notes.push_back(cat(outer.family, " variables are set too (", env.show(evidence),
                                       ") and were ignored: ", launcher.family,
                                       " is the innermost launcher and describes this process"));
  }
  return detection.info;
}

Environment process_environment() {
  Environment out;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    std::size_t equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    out.emplace(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
  }
  return out;
}

LaunchInfo detect_launch() {
  return detect_launch(process_environment());
}

}  // namespace cohort
