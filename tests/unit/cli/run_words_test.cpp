// `cohort run`'s command line read without CLI11 (src/cli/run_words.hpp):
// every spelling of every option in every form, against CLI11's reading of
// the same words; what it leaves to CLI11; and random command lines.
#include "cli/run_words.hpp"

#include <random>

#include <gtest/gtest.h>

#include "unit/cli/run_words_reference.hpp"

namespace cohort::cli {
namespace {

using Words = std::vector<std::string>;

std::string shown(const Words& words) {
  std::string out;
  for (const std::string& word : words)
    out += (out.empty() ? "" : " ") + word;
  return out;
}

// Read both ways; the quick way must take `words`, and agree with CLI11.
RunRequest read_both(const Words& words) {
  const std::optional<RunRequest> quick = read_run_words(words);
  const std::optional<RunRequest> reference = cli11_run_request(words);
  EXPECT_TRUE(quick.has_value()) << "left to CLI11: " << shown(words);
  EXPECT_TRUE(reference.has_value()) << "CLI11 refused: " << shown(words);
  if (!quick || !reference) return {};
  EXPECT_TRUE(*quick == *reference) << shown(words);
  return *quick;
}

std::vector<std::string> names_of(const OptionSpec& spec) {
  std::vector<std::string> names;
  std::string all(spec.names);
  for (std::size_t start = 0; start <= all.size();) {
    const std::size_t comma = std::min(all.find(',', start), all.size());
    names.push_back(all.substr(start, comma - start));
    start = comma + 1;
  }
  return names;
}

TEST(RunWords, EverySpellingOfEveryOptionInEveryFormReadsAsCli11ReadsIt) {
  int forms = 0;
  for (const OptionSpec& spec : run_option_table()) {
    for (const std::string& name : names_of(spec)) {
      const bool is_short = name.size() == 2;
      std::vector<Words> lines;
      switch (spec.kind) {
        case OptionSpec::Kind::flag:
          lines = {{name, "train.py", "--lr", "3"}, {name, name, "train.py"}};
          break;
        case OptionSpec::Kind::optional:
          lines = {{name, "train.py"}, {name + "=dash", "train.py"}};
          break;
        case OptionSpec::Kind::value:
        case OptionSpec::Kind::repeated:
          lines = {{name, "v1", "train.py"},
                   {name, "v1", name, "v2", "train.py", name, "v3"},
                   {name, "v1", "--", "train.py"}};
          lines.push_back(is_short ? Words{name + "v1", "train.py"}
                                   : Words{name + "=v1", "train.py"});
          break;
      }
      for (const Words& words : lines) {
        const RunRequest request = read_both(words);
        const Setting* setting = request.arguments.find(spec.canonical);
        ASSERT_NE(setting, nullptr) << shown(words);
        EXPECT_EQ(setting->origin, spec.canonical);
        ++forms;
      }
    }
  }
  EXPECT_GT(forms, 300);
}

// torchrun's (argparse's) way, which CLI11 refused before: "At Most 1
// required but received 2".
TEST(RunWords, AValueGivenAgainReplacesTheLastAndARepeatedOptionKeepsEach) {
  const RunRequest request =
      read_both({"--nnodes", "1:2", "--env", "A", "--nnodes=2", "--env=B", "train.py"});
  EXPECT_EQ(request.arguments.find("--nnodes")->values, Words{"2"});
  EXPECT_EQ(request.arguments.find("--env")->values, (Words{"A", "B"}));
  EXPECT_EQ(request.program, Words{"train.py"});
}

TEST(RunWords, ProgramsArgumentsStayItsOwn) {
  const RunRequest request =
      read_both({"-n4", "--standalone", "train.py", "-n", "2", "--", "--nnodes=3"});
  EXPECT_EQ(request.program, (Words{"train.py", "-n", "2", "--", "--nnodes=3"}));
  EXPECT_EQ(request.arguments.find("--nproc-per-node")->values, Words{"4"});
  EXPECT_EQ(request.arguments.find("--nnodes"), nullptr);
  EXPECT_EQ(read_both({"-m", "--", "-starts-with-a-dash"}).program, Words{"-starts-with-a-dash"});
}

TEST(RunWords, LeavesToCli11WhatItDoesNotRead) {
  for (const Words& words : std::vector<Words>{{"--help"},
                                               {"-h", "train.py"},
                                               {"--no-such-option", "1", "train.py"},
                                               {"-mn", "2", "train.py"},
                                               {"--standalone=1", "train.py"},
                                               {"--prefix=", "train.py"},
                                               {"--prefix", "", "train.py"},
                                               {"-n", "-1", "train.py"},
                                               {"--nnodes"},
                                               {"-n", "2"},
                                               {"-n", "2", "--"},
                                               {"++"},
                                               {"-n", "++", "train.py"},
                                               {}}) {
    EXPECT_FALSE(read_run_words(words).has_value()) << shown(words);
  }
}

// Random lines from the options' names, values and odd words: wherever the
// quick reading takes one, CLI11 reads it alike.
TEST(RunWords, RandomCommandLinesReadAsCli11ReadsThem) {
  std::vector<std::string> vocabulary{"train.py", "--",   "-",   "",   "=",   "4",
                                      "-1",       "dash", "a=b", "-x", "--x", "x y"};
  for (const OptionSpec& spec : run_option_table()) {
    for (const std::string& name : names_of(spec)) {
      vocabulary.push_back(name);
      vocabulary.push_back(name + "=3");
      vocabulary.push_back(name + "7");
    }
  }
  std::mt19937 random(20261203);
  int taken = 0;
  for (int i = 0; i < 3000; ++i) {
    Words words(random() % 6);
    for (std::string& word : words)
      word = vocabulary[random() % vocabulary.size()];
    if (random() % 4 != 0) words.push_back("train.py");  // most lines have a PROGRAM
    const std::optional<RunRequest> quick = read_run_words(words);
    if (!quick) continue;
    ++taken;
    EXPECT_TRUE(cli11_run_request(words) == quick) << shown(words);
  }
  EXPECT_GT(taken, 500) << taken;  // the test reaches the quick reading
}

}  // namespace
}  // namespace cohort::cli
