// The launcher registry: one row per launcher, in detection order.
#include <array>

#include <cohort/errors.hpp>

#include "core/strings.hpp"
#include "env/launchers/launcher.hpp"

namespace cohort::detail {

// Each defined in its launcher's file.
LauncherEntry cohort_launcher();
LauncherEntry torchrun_launcher();
LauncherEntry openmpi_launcher();
LauncherEntry mpich_launcher();
LauncherEntry pmix_launcher();
LauncherEntry slurm_launcher();
LauncherEntry single_launcher();

namespace {

// The order is the contract: innermost launcher first. torchrun inside a
// Slurm step, and mpirun inside an sbatch job, both also carry SLURM_*.
std::array<LauncherEntry, 7> rows() {
  return {cohort_launcher(), torchrun_launcher(), openmpi_launcher(), mpich_launcher(),
          pmix_launcher(),   slurm_launcher(),    single_launcher()};
}

const LauncherEntry* find(Launcher launcher) noexcept {
  for (const LauncherEntry& entry : launchers()) {
    if (entry.launcher == launcher) return &entry;
  }
  return nullptr;
}

}  // namespace

std::span<const LauncherEntry> launchers() {
  static const std::array<LauncherEntry, 7> kRows = rows();
  return kRows;
}

const LauncherEntry& launcher_entry(Launcher launcher) {
  if (const LauncherEntry* entry = find(launcher)) return *entry;
  throw Error(cat("launcher ", static_cast<int>(launcher), " has no row in the registry"));
}

std::string_view launcher_description(Launcher launcher) noexcept {
  const LauncherEntry* entry = find(launcher);
  return entry != nullptr ? entry->description : "an unknown launcher";
}

}  // namespace cohort::detail

namespace cohort {

std::string_view to_string(Launcher launcher) noexcept {
  const detail::LauncherEntry* entry = detail::find(launcher);
  return entry != nullptr ? entry->name : "unknown";
}

}  // namespace cohort
