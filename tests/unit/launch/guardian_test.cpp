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

// Not a zombie, not gone: it still runs.
bool running(pid_t pid) {
  const std::string stat = test::read_file("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t close = stat.rfind(')');
  return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] != 'Z';
}

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
    gone = !running(child);
  }
  EXPECT_TRUE(gone) << "the worker's child " << child << " outlived the agent and its guardian";
  if (!gone) kill(child, SIGKILL);
}

// The job's directory is handed over after the fork (the agent forks its
// guardian first): a SIGKILLed agent's guardian removes it and its files.
TEST(Guardian, RemovesTheJobsDirectoryItWasGivenOnceTheAgentIsGone) {
  const test::TempDir dir("cohort-guardian");
  const fs::path job_dir = dir.path() / "job";
  fs::create_directories(job_dir / "empty");
  std::ofstream(job_dir / "error_0.json") << "{}";
  const pid_t agent = fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    Guardian guardian;
    guardian.remove_at_end(job_dir.string());
    raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(agent, &status, 0), agent);
  bool gone = false;
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       !gone && std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(5ms)) {
    gone = !fs::exists(job_dir);
  }
  EXPECT_TRUE(gone) << job_dir << " outlived the agent and its guardian";
  EXPECT_TRUE(fs::exists(dir.path())) << "only the job's directory goes";
}

TEST(Guardian, RefusesAPathLongerThanTheSystemAllows) {
  Guardian guardian;
  EXPECT_THROW(guardian.remove_at_end("/" + std::string(PATH_MAX, 'a')), Error);
}

}  // namespace
}  // namespace cohort::detail
