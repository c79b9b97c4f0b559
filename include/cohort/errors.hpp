// cohort's exception types. Every public function reports failure by throwing
// one of these; the message always names the thing at fault (a variable and its
// value, a host:port, a rank, a file) and says what to do about it.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cohort {

/// Base of every cohort exception: `catch (const cohort::Error&)` catches them all.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An argument is malformed: a hostlist that does not parse, a number out of range.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// A blocking call did not complete within its timeout. The message names
/// what was waited for (keys, peer host:port) and for how long.
class Timeout : public Error {
 public:
  using Error::Error;
};

/// The rendezvous store cannot be reached, closed the connection, rejected
/// this client (wrong job token), or answered with an error. The message
/// names the store's host:port.
class StoreError : public Error {
 public:
  using Error::Error;
};

/// PROGRAM cannot be started here: it is not found, or not executable.
/// `exit_code()` is the shell's status for that: 127 or 126.
class ProgramError : public Error {
 public:
  ProgramError(const std::string& message, int exit_code) : Error(message), exit_code_(exit_code) {}
  int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

/// The launch environment is partial or inconsistent (RANK without WORLD_SIZE,
/// RANK >= WORLD_SIZE, a Slurm nodelist that does not parse, a non-number ...).
/// `variables()` lists each variable involved with its value ("" when unset),
/// in the order the message names them.
class LaunchEnvError : public Error {
 public:
  using Variable = std::pair<std::string, std::string>;

  LaunchEnvError(const std::string& message, std::vector<Variable> variables)
      : Error(message), variables_(std::move(variables)) {}

  const std::vector<Variable>& variables() const noexcept { return variables_; }

 private:
  std::vector<Variable> variables_;
};

}  // namespace cohort
