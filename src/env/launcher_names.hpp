// What people call each launcher, for messages ("started by Open MPI's
// mpirun"), beside to_string()'s short names for machines ("openmpi").
#pragma once

#include <string_view>

#include <cohort/launch_env.hpp>

namespace cohort::detail {

/// "no launcher (a single process)", "Slurm's srun", "Open MPI's mpirun" ...
std::string_view launcher_description(Launcher launcher) noexcept;

}  // namespace cohort::detail
