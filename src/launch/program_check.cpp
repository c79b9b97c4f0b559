#include "launch/program_check.hpp"

#include <algorithm>

#include <sys/stat.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"
#include "core/strings.hpp"
#include "launch/worker_setup.hpp"

namespace cohort::detail {
namespace {

enum class Found { yes, missing, not_executable };

Found probe(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return Found::missing;
  if (S_ISDIR(info.st_mode) || ::access(path.c_str(), X_OK) != 0) return Found::not_executable;
  return Found::yes;
}

// As execvp: a name with a '/' is a path, else each PATH entry in turn.
Found find(const std::string& name, const std::string& path_variable, std::string* where) {
  if (name.find('/') != std::string::npos) {
    *where = name;
    return probe(name);
  }
  Found best = Found::missing;
  std::size_t start = 0;
  while (start <= path_variable.size()) {
    const std::size_t end = std::min(path_variable.find(':', start), path_variable.size());
    const std::string dir = end > start ? path_variable.substr(start, end - start) : ".";
    const std::string candidate = cat(dir, "/", name);
    const Found found = probe(candidate);
    if (found == Found::yes) {
      *where = candidate;
      return found;
    }
    if (found == Found::not_executable) {
      *where = candidate;
      best = found;
    }
    start = end + 1;
  }
  return best;
}

}  // namespace

void check_program(const RunOptions& options, const Environment& env) {
  const auto path_found = env.find("PATH");
  const std::string path =
      path_found != env.end() ? path_found->second : "/usr/local/bin:/usr/bin:/bin";
  const std::string& program = options.command.front();
  const bool python = runs_with_python(options);
  const std::string& executable = python ? options.python : program;
  std::string where;
  switch (find(executable, path, &where)) {
    case Found::yes:
      break;
    case Found::missing:
      throw ProgramError(
          executable.find('/') != std::string::npos
              ? cat("cohort run: ", python ? "the Python interpreter " : "PROGRAM ", executable,
                    " does not exist", python ? " (check --python)" : "")
              : cat("cohort run: ", python ? "the Python interpreter '" : "PROGRAM '", executable,
                    "' is not found in PATH (", path, "): ",
                    python ? "give --python with its path" : "check its name, or give its path"),
          127);
    case Found::not_executable:
      throw ProgramError(
          python ? cat("cohort run: the Python interpreter ", where,
                       " is not executable: check --python")
                 : cat("cohort run: PROGRAM ", where,
                       " is not executable: chmod +x it, or run it with its interpreter "
                       "(cohort run sh ",
                       program, ")"),
          126);
  }
  if (python && !options.module && probe(program) == Found::missing) {
    throw ProgramError(
        cat("cohort run: the script ", program, " does not exist (in ", current_directory(), ")"),
        127);
  }
}

}  // namespace cohort::detail
