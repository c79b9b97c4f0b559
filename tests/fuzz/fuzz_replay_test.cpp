// Runs every fuzz target (fuzz_target.hpp) over its seeds and 20000 inputs
// mutated from them with a fixed seed: a regression test in every build, and
// the check that the libFuzzer harnesses still compile and hold.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz/fuzz_target.hpp"

namespace cohort::fuzz {
namespace {

using Target = int (*)(const std::uint8_t*, std::size_t);

std::string u64(std::uint64_t value) {
  std::string out;
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  return out;
}

void replay(Target target, const std::vector<std::string>& seeds) {
  std::mt19937 random(20261123);
  for (const std::string& seed : seeds)
    target(reinterpret_cast<const std::uint8_t*>(seed.data()), seed.size());
  for (int i = 0; i < 20000; ++i) {
    std::string input = seeds[random() % seeds.size()];
    const int edits = 1 + static_cast<int>(random() % 8);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = input.empty() ? 0 : random() % input.size();
      switch (random() % 4) {
        case 0:
          if (!input.empty()) input[at] = static_cast<char>(random());
          break;
        case 1:
          input.insert(at, 1, static_cast<char>(random()));
          break;
        case 2:
          if (!input.empty()) input.erase(at, 1 + random() % 4);
          break;
        default:
          input += seeds[random() % seeds.size()];
      }
    }
    target(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
  }
}

TEST(FuzzReplay, TorchWire) {
  replay(torch_wire, {std::string(1, '\0') + u64(3) + "/ab" + u64(3) + "xyz",
                      std::string(1, '\5') + u64(2) + u64(2) + "/a" + u64(3) + "/bb",
                      std::string(1, '\3') + u64(2) + "/k" + u64(5), std::string(1, '\6'),
                      std::string("\x00\xCE\xF7\x85\x3C", 5)});
}

TEST(FuzzReplay, ErrorFile) {
  replay(
      error_file,
      {R"({"message": {"message": "RuntimeError: x", "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n    f()\nRuntimeError: x\n", "timestamp": "1"}}})",
       R"({"message": "plain"})", "[1, 2, {\"message\": null}]"});
}

TEST(FuzzReplay, RunArguments) {
  std::vector<std::string> seeds;
  for (const char* value : {"4", "auto", "localhost:29400", "[::1]:5", "3", "0:1,1:2",
                            "join_timeout=5,read_timeout=2", "c10d", "1:2", "0,2-3", "dash"}) {
    for (char option = 0; option < 48; ++option)
      seeds.push_back(std::string(1, option) + value);
  }
  replay(run_arguments, seeds);
}

}  // namespace
}  // namespace cohort::fuzz
