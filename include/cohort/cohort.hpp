// cohort: run one program as many cooperating processes.
// The umbrella header: includes every public header of the library.
#pragma once

#include <cohort/communicator.hpp>
#include <cohort/config.hpp>
#include <cohort/errors.hpp>
#include <cohort/launch.hpp>
#include <cohort/launch_env.hpp>
#include <cohort/store.hpp>
#include <cohort/world.hpp>
