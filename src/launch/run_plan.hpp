// A remote agent's plan: the whole RunOptions and AgentRole as versioned text, sent on
// ssh's standard input (`cohort run --hostfile` -> `cohort agent` on each
// host). Every field is listed once, in run_plan.cpp's table, which a
// compile-time check keeps equal to their fields: a new option travels
// or the build fails. Standard input is the launcher's private pipe, so the
// job token travels in the plan like any other field, never on a command
// line.
//
// The text: "cohort-plan <version> <bytes>\n", then <bytes> of lines
// "<field> <value>" (a list field: one line per item), values escaped so
// that any byte survives (\\, \n, \r, \0). A field the reader does not know
// is refused with both versions named: the hosts run different cohorts.
#pragma once

#include <string>
#include <string_view>

#include <cohort/launch.hpp>

#include "launch/agent_role.hpp"

namespace cohort::detail {

inline constexpr int kRunPlanVersion = 1;

/// What one remote agent runs: the user's options and its role in the job.
struct RunPlan {
  RunOptions options;
  AgentRole role;
};

/// The plan's text. Throws InvalidArgument for what cannot travel (the
/// role's `entry`, a function).
std::string encode_run_plan(const RunPlan& plan);

/// The plan back, from the defaults plus every field the text sets.
/// `source` names where the text came from, for messages. Throws
/// InvalidArgument naming the line for a malformed or foreign plan.
RunPlan decode_run_plan(std::string_view text, std::string_view source);

/// Reads one plan from `fd` and not a byte past it (standard input then
/// stays the launcher's pipe, whose end stops the agent).
RunPlan read_run_plan(int fd, std::string_view source);

/// Fields in the plan's table, and RunOptions' and AgentRole's fields but
/// `entry`: equal when every field travels (a test checks it).
std::size_t run_plan_field_count();
std::size_t run_options_field_count();

}  // namespace cohort::detail
