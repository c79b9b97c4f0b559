#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include <cohort/errors.hpp>
#include <cohort/launch_env.hpp>

#include "unit/env/hostlist_cases.hpp"

namespace cohort {
namespace {

TEST(Hostlist, ExpandsLikeScontrol) {
  for (const test::HostlistCase& c : test::hostlist_cases()) {
    EXPECT_EQ(hostlist::expand(c.expression), c.hosts) << "expression: '" << c.expression << "'";
  }
}

TEST(Hostlist, RejectsWhatScontrolRejects) {
  for (const std::string& expression : test::invalid_hostlists()) {
    EXPECT_THROW(hostlist::expand(expression), InvalidArgument) << expression;
  }
}

// scontrol answers these with garbage ("n[1-2" -> "n]", "n[1 -2]" -> "n01 n02")
// or a literal host name; cohort refuses them (docs/hostlist.md).
TEST(Hostlist, RejectsMalformedBracketsScontrolMisreads) {
  for (const char* expression : {"n[1-2", "n1-2]", "n[1 -2]", "n[1-2[3]]", "n]", "n[[1]]"}) {
    EXPECT_THROW(hostlist::expand(expression), InvalidArgument) << expression;
  }
}

TEST(Hostlist, ErrorNamesExpressionAndPosition) {
  try {
    hostlist::expand("node[1-3,x]");
    FAIL() << "no exception";
  } catch (const InvalidArgument& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("node[1-3,x]"), std::string::npos) << message;
    EXPECT_NE(message.find("'x'"), std::string::npos) << message;
    EXPECT_NE(message.find("character 10"), std::string::npos) << message;
  }
}

TEST(Hostlist, LimitsTheNumberOfHosts) {
  EXPECT_EQ(hostlist::expand("n[0-70000]").size(), 70001u);  // over scontrol's 65536 per range
  EXPECT_THROW(hostlist::expand("n[0-1048576]"), InvalidArgument);
  EXPECT_THROW(hostlist::expand("n[0-1023][0-1024]"), InvalidArgument);
  EXPECT_THROW(hostlist::expand("n[1234567890123456789]"), InvalidArgument);
  // A bound of the caller's, checked before the hosts are made; plain names
  // count as much as bracket groups do.
  EXPECT_EQ(hostlist::expand("a,b,c", 3).size(), 3u);
  EXPECT_THROW(hostlist::expand("a,b,c,d", 3), InvalidArgument);
  EXPECT_THROW(hostlist::expand("a,n[1-3]", 3), InvalidArgument);
  // Long names: a short expression must not take gigabytes to be refused.
  EXPECT_THROW(hostlist::expand(std::string(200, 'a') + "[1-1000000]"), InvalidArgument);
}

TEST(Hostlist, SummarizeCountsAllAndMakesOnlyTheFirst) {
  const hostlist::Summary big = hostlist::summarize("n[000001-999999],login[1-2]", 2);
  EXPECT_EQ(big.count, 1000001u);
  EXPECT_EQ(big.hosts, (std::vector<std::string>{"n000001", "n000002"}));
  // The odometer's order and several ranges in a group, as expand has them.
  for (const char* expression : {"r[1-2]-n[8-9,11]-c[3,5-6]", "a,b[07-08,1],c", "x[1-3][9]"}) {
    const std::vector<std::string> all = hostlist::expand(expression);
    const hostlist::Summary summary = hostlist::summarize(expression, 5);
    EXPECT_EQ(summary.count, all.size()) << expression;
    const auto first =
        all.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(5, all.size()));
    EXPECT_EQ(summary.hosts, std::vector<std::string>(all.begin(), first)) << expression;
  }
  // The same errors as expand.
  EXPECT_THROW(hostlist::summarize("n[0-1048576]", 1), InvalidArgument);
  EXPECT_THROW(hostlist::summarize("n[1-", 1), InvalidArgument);
}

TEST(Hostlist, CompressesLikeScontrol) {
  // Pairs taken from `scontrol show hostlist` (Slurm 22.05).
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"n1,n2,n3", "n[1-3]"},
      {"n3,n1,n2", "n[3,1-2]"},
      {"n1,n3,n2,n4", "n[1,3,2,4]"},
      {"n01,n02,n3", "n[01-02,3]"},
      {"n9,n10", "n[9-10]"},
      {"n09,n10", "n[09-10]"},
      {"n1,n01", "n[1,01]"},
      {"rack1-n01,rack1-n02,rack2-n01,rack2-n02", "rack1-n[01-02],rack2-n[01-02]"},
      {"a,b,a", "a,b,a"},
      {"n1,n1", "n[1,1]"},
      {"login,n1,n2,login2", "login,n[1-2],login2"},
      {"n1,m1,n2", "n1,m1,n2"},
      {"node001,node002,node003,node010,login", "node[001-003,010],login"},
      {"a1b,a2b", "a1b,a2b"},
      {"n007,n8", "n[007,8]"},
      {"n0,n00,n000", "n[0,00,000]"},
      {"x", "x"},
      {"n1,n2,n4,n5,n7", "n[1-2,4-5,7]"},
      {"a10,a9", "a[10,9]"},
      {"n99,n100,n101", "n[99-101]"},
      {"n0099,n0100", "n[0099-0100]"},
      {"1,2,3", "[1-3]"},
      {"a1,a2,b1,b2,a3", "a[1-2],b[1-2],a3"},
  };
  for (const auto& [hosts, expected] : cases) {
    EXPECT_EQ(hostlist::compress(hostlist::expand(hosts)), expected) << hosts;
  }
  EXPECT_EQ(hostlist::compress({}), "");
}

TEST(Hostlist, CompressRefusesSyntaxCharacters) {
  for (const char* host : {"a,b", "a b", "a[1]", "a]"}) {
    const std::vector<std::string> hosts{host};
    EXPECT_THROW(hostlist::compress(hosts), InvalidArgument) << host;
  }
}

// A random list of host names in the shapes clusters use: prefixes with
// digits and dashes, zero padding, runs, gaps, duplicates, any order.
std::vector<std::string> random_hosts(std::mt19937& rng) {
  const std::vector<std::string> prefixes = {"n", "node", "rack1-n", "gpu-a", "x", "", "c0-"};
  std::vector<std::string> hosts;
  const int count = std::uniform_int_distribution<int>(0, 40)(rng);
  int number = std::uniform_int_distribution<int>(0, 120)(rng);
  for (int i = 0; i < count; ++i) {
    const std::string& prefix = prefixes[rng() % prefixes.size()];
    switch (rng() % 6) {
      case 0:
        number = std::uniform_int_distribution<int>(0, 1200)(rng);
        break;
      case 1:
        break;  // duplicate
      default:
        ++number;  // a run
    }
    std::string digits = std::to_string(number);
    const std::size_t width = rng() % 5;
    if (digits.size() < width && rng() % 2 == 0) digits.insert(0, width - digits.size(), '0');
    if (rng() % 12 == 0) {
      hosts.push_back(prefix.empty() ? "login" : prefix);  // no number
    } else {
      hosts.push_back(prefix + digits + (rng() % 15 == 0 ? "-ib" : ""));
    }
  }
  return hosts;
}

TEST(Hostlist, ExpandInvertsCompressOnRandomHostSets) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  for (int i = 0; i < 3000; ++i) {
    const std::vector<std::string> hosts = random_hosts(rng);
    const std::string compressed = hostlist::compress(hosts);
    ASSERT_EQ(hostlist::expand(compressed), hosts)
        << "seed " << seed << ", compressed '" << compressed << "'";
  }
}

}  // namespace
}  // namespace cohort
