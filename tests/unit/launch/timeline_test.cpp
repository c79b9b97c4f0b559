// The job's timeline (timeline.hpp): tracks named, every node's events on
// one axis from the first, in time order, and a node's broken part left out.
#include "launch/timeline.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace cohort::detail {
namespace {

using namespace std::chrono_literals;

TEST(Timeline, NodesMergeOnOneAxisInTimeOrderAndABrokenPartIsLeftOut) {
  const Timeline::Clock::time_point t0 = Timeline::Clock::now();
  Timeline zero(0, "n1");
  Timeline one(1, "n2");
  zero.span("attempt 0", 1, t0 + 5ms, t0 + 9ms, {{"exit", "exited with code 0"}});
  one.instant("stop", Timeline::kAgentTrack, {{"reason", "rank 3 failed"}}, t0 + 2ms);
  const std::string text =
      Timeline::merge({zero.events(), "[{\"ph\":", one.events()}, {{"run_id", "r"}});
  const auto trace = nlohmann::json::parse(text);
  EXPECT_EQ(trace["otherData"]["run_id"], "r");
  std::vector<std::string> timed;
  std::vector<std::string> names;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] == "M") {
      EXPECT_FALSE(event.contains("ts"));
      if (event["name"] == "thread_name" || event["name"] == "process_name") {
        names.push_back(event["args"]["name"]);
      }
      continue;
    }
    timed.push_back(event["name"].get<std::string>() + "@" +
                    std::to_string(event["ts"].get<long long>()));
  }
  EXPECT_EQ(timed, (std::vector<std::string>{"stop@0", "attempt 0@3000"}));
  for (const char* name : {"node 0 (n1)", "node 1 (n2)", "cohort run", "rank 1"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

TEST(Timeline, ASpanThatEndsBeforeItBeginsLastsNothing) {
  const Timeline::Clock::time_point t0 = Timeline::Clock::now();
  Timeline node(0, "n1");
  node.span("odd", 0, t0, t0 - 1s);
  const auto trace = nlohmann::json::parse(Timeline::merge({node.events()}, {}));
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] == "X") {
      EXPECT_EQ(event["dur"], 0);
    }
  }
}

}  // namespace
}  // namespace cohort::detail
