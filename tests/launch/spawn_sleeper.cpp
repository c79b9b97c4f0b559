// cohort::spawn with workers that never finish: each forks a helper (a
// fork, no exec, as a data loader does), writes its pid and the store's port
// to DIR/pid.<rank> and DIR/port.<rank>, then sleeps. For the test that
// SIGKILLs the process that spawned them.
//
//   spawn_sleeper DIR
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include <cohort/launch.hpp>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string dir = argv[1];
  // Output to a file: what survives must not hold the test's pipes open, or
  // the test would wait for it instead of seeing it.
  const int log = open((dir + "/log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(log, STDOUT_FILENO);
  dup2(log, STDERR_FILENO);
  close(log);
  return cohort::spawn(2, [&] {
    const std::string rank = std::getenv("RANK");
    if (fork() == 0) {
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, STDOUT_FILENO);  // not holding the test's pipes open
      dup2(null, STDERR_FILENO);
      sleep(60);
      _exit(0);
    }
    std::ofstream(dir + "/port." + rank) << std::getenv("COHORT_STORE_PORT") << "\n";
    std::ofstream(dir + "/pid." + rank) << getpid() << "\n";
    sleep(60);
    return 0;
  });
}
