// `cohort run`'s options: torchrun's whole command line (python -m
// torch.distributed.run and python -m torch.distributed.launch), in both
// spellings (--nproc-per-node, --nproc_per_node) and from PET_<NAME> when not
// given, plus cohort's own. The table below is the one place an option is
// declared; turning values into RunOptions is pure, so every rule is a unit
// test. docs/run.md lists every option and what it means here.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <cohort/launch.hpp>

namespace cohort::cli {

struct OptionSpec {
  enum class Kind {
    value,     ///< takes one value; the last one given counts
    repeated,  ///< takes a value each time (--env A --env B)
    flag,      ///< no value; from PET_<NAME>: 1/0, true/false, yes/no
    optional,  ///< a flag that may carry a value after '=' (--local-rank-arg=dash)
  };
  std::string_view names;      ///< CLI11's: "-n,--nproc-per-node,--nproc_per_node"
  std::string_view canonical;  ///< "--nproc-per-node": messages, and the key of its Setting
  std::string_view variable;   ///< "PET_NPROC_PER_NODE" ("" for none)
  Kind kind = Kind::value;
  std::string_view help;  ///< "" hides the option (set by cohort run for its own agents)
  std::string_view bare_value = "1";  ///< what a flag, or an optional flag without '=', means
};

/// Every option of `cohort run`.
std::span<const OptionSpec> run_option_table();

/// The options that take no separate value (flags), every spelling: for
/// telling an option's value from PROGRAM before parsing.
std::vector<std::string> run_flag_names();

/// One option's value(s) and where they came from: "--nproc-per-node" or
/// "PET_NPROC_PER_NODE", so that an error names what the user wrote.
struct Setting {
  std::vector<std::string> values;
  std::string origin;
  friend bool operator==(const Setting&, const Setting&) = default;
};

class RunArguments {
 public:
  /// Records a value from the command line (appended for repeated options).
  void set(std::string_view canonical, std::string value, std::string origin);
  /// For each option the command line did not give, its PET_ variable's value
  /// when `getenv` has one (and COHORT_SSH for --ssh).
  void take_environment(const std::function<const char*(const char*)>& getenv);

  const Setting* find(std::string_view canonical) const;
  bool given(std::string_view canonical) const { return find(canonical) != nullptr; }
  /// A flag's value as a boolean (false when not given). Throws
  /// InvalidArgument for a PET_ value that is not 1/0/true/false/yes/no.
  bool flag(std::string_view canonical) const;

  friend bool operator==(const RunArguments&, const RunArguments&) = default;

 private:
  std::map<std::string, Setting, std::less<>> settings_;
};

/// What -n auto|cpu|gpu resolve to here: asked only for those values (a
/// GPU count reads sysfs, which every other launch can do without).
struct HostCounts {
  std::function<int()> cpus = [] { return 1; };
  std::function<int()> gpus = [] { return 0; };
  static HostCounts fixed(int cpus, int gpus) {
    return {[cpus] { return cpus; }, [gpus] { return gpus; }};
  }
};

/// The RunOptions for running `program`. Throws InvalidArgument naming the
/// option (or its PET_ variable) and the value at fault: every one of these
/// is a usage error (exit status 2).
RunOptions to_run_options(const RunArguments& arguments, std::vector<std::string> program,
                          const HostCounts& host,
                          const std::function<const char*(const char*)>& getenv);

/// torchrun's --redirects / --tee: "3" (every local rank) or "0:1,1:2".
std::map<int, int> parse_stream_spec(const std::string& text, const std::string& origin);

}  // namespace cohort::cli
