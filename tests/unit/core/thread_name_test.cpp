// name_this_thread: the name /proc shows for the calling thread, cut to the
// kernel's 15 bytes.
#include "core/thread_name.hpp"

#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

namespace cohort::detail {
namespace {

std::string name_of(pid_t thread) {
  std::ifstream comm("/proc/self/task/" + std::to_string(thread) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

TEST(ThreadName, AThreadIsShownUnderItsName) {
  std::string seen;
  std::thread([&] {
    name_this_thread("cohort-test");
    seen = name_of(gettid());
  }).join();
  EXPECT_EQ(seen, "cohort-test");
}

TEST(ThreadName, ANameLongerThanTheKernelKeepsIsCut) {
  std::string seen;
  std::thread([&] {
    name_this_thread("cohort-a-name-of-thirty-bytes");
    seen = name_of(gettid());
  }).join();
  EXPECT_EQ(seen, "cohort-a-name-o");
}

}  // namespace
}  // namespace cohort::detail
