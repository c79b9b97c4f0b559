// Slurm's compressed per-node counts, as in SLURM_TASKS_PER_NODE and
// SLURM_STEP_TASKS_PER_NODE: "2(x3),1" means 2,2,2,1.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::detail {

/// One count per node, or std::nullopt when `text` is not of the form
/// COUNT[(xREPEAT)][,COUNT[(xREPEAT)]...] or expands to more than 1<<20 nodes.
std::optional<std::vector<int>> parse_slurm_counts(std::string_view text);

/// The inverse, as Slurm writes it: runs of equal counts become COUNT(xN).
std::string format_slurm_counts(std::span<const int> counts);

}  // namespace cohort::detail
