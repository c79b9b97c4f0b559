// `cohort run`'s command line read without CLI11 (src/cli/run_words.cpp),
// against CLI11 itself: the input is the words after `run`, one a line.
// Where read_run_words takes a command line, CLI11 must make the same of it.
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/run_words.hpp"
#include "fuzz/fuzz_target.hpp"
#include "unit/cli/run_words_reference.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(run_words) {
  std::vector<std::string> words;
  std::string word;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      words.push_back(std::move(word));
      word.clear();
    } else {
      word.push_back(static_cast<char>(data[i]));
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  const std::optional<cli::RunRequest> quick = cli::read_run_words(words);
  if (quick && cli::cli11_run_request(words) != quick) {
    throw std::logic_error("read_run_words and CLI11 read one command line differently");
  }
  return 0;
}

}  // namespace cohort::fuzz
