// Reading a command's output in tests.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace cohort::test {

/// The lines of `text` that hold `needle`, and begin with `start` when given.
inline std::vector<std::string> lines_with(const std::string& text, const std::string& needle,
                                           const std::string& start = "") {
  std::vector<std::string> out;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) {
    if (line.find(needle) != std::string::npos && line.rfind(start, 0) == 0) out.push_back(line);
  }
  return out;
}

/// How often `needle` occurs in `text` (for output whose lines may mix).
inline std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++count;
  return count;
}

}  // namespace cohort::test
