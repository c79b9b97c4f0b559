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

// The name /proc shows for a new thread that named itself `name`.
std::string shown_after_naming(const char* name) {
  std::string shown;
  std::thread([&] {
    name_this_thread(name);
    std::ifstream comm("/proc/self/task/" + std::to_string(gettid()) + "/comm");
    std::getline(comm, shown);
  }).join();
  return shown;
}

TEST(ThreadName, AThreadIsShownUnderItsName) {
  EXPECT_EQ(shown_after_naming("cohort-test"), "cohort-test");
}

TEST(ThreadName, ANameLongerThanTheKernelKeepsIsCut) {
  EXPECT_EQ(shown_after_naming("cohort-a-name-of-thirty-bytes"), "cohort-a-name-o");
}

}  // namespace
}  // namespace cohort::detail
