// The guardian with real processes: an agent that spawns a worker with a
// guardian and is SIGKILLed at once takes what the worker started with it,
// though the agent itself never told the guardian anything.
#include "launch/guardian.hpp"

#include <chrono>
#include <climits>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "launch/spawn.hpp"
#include "support/files.hpp"

namespace cohort::detail {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Waits for `path` to hold a whole line; "" after 10 s.
std::string wait_for_line(const fs::path& path) {
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(2ms)) {
    const std::string text = test::read_file(path);
    if (!text.empty() && text.back() == '\n') return text;
  }
  return "";
}

TEST(Guardian, AWorkerListsItselfSoItsChildrenDieWithASigkilledAgent) {
  const test::TempDir dir("cohort-guardian");
  const fs::path child_file = dir.path() / "child";
  // The agent: spawns, waits until the worker has a child, and dies at once.
  // Between spawn and its death it does nothing else, as an agent that a
  // loaded machine never schedules again would.
  const pid_t agent = fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    Guardian guardian;
    const std::string script = "sleep 30 & echo $! > " + child_file.string() + ".tmp && mv " +
                               child_file.string() + ".tmp " + child_file.string() + "; wait";
    spawn_worker({"sh", "-c", script}, {{"PATH", "/usr/bin:/bin"}}, STDERR_FILENO, STDERR_FILENO,
                 -1, &guardian);
    wait_for_line(child_file);
    raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(agent, &status, 0), agent);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  const std::string line = wait_for_line(child_file);
  ASSERT_FALSE(line.empty()) << "the worker never wrote " << child_file;
  const pid_t child = std::stoi(line);
  bool gone = false;
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       !gone && std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(5ms)) {
    gone = !test::process_runs(child);
  }
  EXPECT_TRUE(gone) << "the worker's child " << child << " outlived the agent and its guardian";
  if (!gone) kill(child, SIGKILL);
}

// Waits up to 10 s for `path` to be gone.
bool goes(const fs::path& path) {
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(5ms)) {
    if (!fs::exists(path)) return true;
  }
  return false;
}

// An agent that hands `dir` and `prefix` to its guardian and is SIGKILLed.
void sigkilled_agent(const fs::path& dir, const std::string& prefix) {
  const pid_t agent = fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    Guardian guardian;
    guardian.remove_at_end(dir.string(), prefix);
    raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(agent, &status, 0), agent);
}

// The job's files are handed over after the fork (the agent forks its
// guardian first): a SIGKILLed agent's guardian removes them.
TEST(Guardian, RemovesTheJobsDirectoryItWasGivenOnceTheAgentIsGone) {
  const test::TempDir dir("cohort-guardian");
  const fs::path job_dir = dir.path() / "job";
  fs::create_directories(job_dir / "empty");
  std::ofstream(job_dir / "error_0.json") << "{}";
  ASSERT_NO_FATAL_FAILURE(sigkilled_agent(job_dir, ""));
  EXPECT_TRUE(goes(job_dir)) << job_dir << " outlived the agent and its guardian";
  EXPECT_TRUE(fs::exists(dir.path())) << "only the job's directory goes";
}

// In the user's directory, shared with other jobs, only the names with the
// job's prefix go, and the directory stays.
TEST(Guardian, RemovesOnlyTheJobsFilesFromTheUsersDirectory) {
  const test::TempDir dir("cohort-guardian");
  for (const char* name : {"job-1.attempt_0.rank_0.error.json", "job-1.attempt_1.rank_0.error.json",
                           "job-2.attempt_0.rank_0.error.json", "job-1"}) {
    std::ofstream(dir.path() / name) << "{}";
  }
  ASSERT_NO_FATAL_FAILURE(sigkilled_agent(dir.path(), "job-1."));
  EXPECT_TRUE(goes(dir.path() / "job-1.attempt_0.rank_0.error.json"));
  EXPECT_TRUE(goes(dir.path() / "job-1.attempt_1.rank_0.error.json"));
  EXPECT_TRUE(fs::exists(dir.path() / "job-2.attempt_0.rank_0.error.json"))
      << "another job's file went";
  EXPECT_TRUE(fs::exists(dir.path() / "job-1")) << "a name without the whole prefix went";
}

TEST(Guardian, RefusesAPathLongerThanTheSystemAllows) {
  Guardian guardian;
  EXPECT_THROW(guardian.remove_at_end("/" + std::string(PATH_MAX, 'a'), ""), Error);
  EXPECT_THROW(guardian.remove_at_end("/tmp", std::string(NAME_MAX + 1, 'a')), Error);
}

}  // namespace
}  // namespace cohort::detail
