// Reads the launch environments recorded from real launchers
// (tests/data/envdumps/*.txt, written by tests/tools/record-envdumps): lines
// "[rank] NAME=VALUE", '#' comments.
#pragma once

#include <map>
#include <string>

#include <cohort/launch_env.hpp>

namespace cohort::test {

/// Each process's environment, keyed by the label in brackets (its rank).
/// Throws std::runtime_error naming the file and line when it does not parse.
std::map<int, Environment> read_env_dump(const std::string& path);

/// tests/data, where the recorded data lives.
std::string test_data_dir();

}  // namespace cohort::test
