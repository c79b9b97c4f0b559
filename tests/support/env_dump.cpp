#include "support/env_dump.hpp"

#include <fstream>
#include <stdexcept>

namespace cohort::test {

std::map<int, Environment> read_env_dump(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error("cannot open " + path);
  std::map<int, Environment> ranks;
  std::string line;
  for (int number = 1; std::getline(file, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t close = line.find("] ");
    const std::size_t equals = line.find('=', close);
    if (line[0] != '[' || close == std::string::npos || equals == std::string::npos) {
      throw std::runtime_error(path + ":" + std::to_string(number) + ": not '[rank] NAME=VALUE'");
    }
    const int rank = std::stoi(line.substr(1, close - 1));
    ranks[rank][line.substr(close + 2, equals - close - 2)] = line.substr(equals + 1);
  }
  return ranks;
}

std::string test_data_dir() {
  return COHORT_TEST_DATA_DIR;
}

}  // namespace cohort::test
