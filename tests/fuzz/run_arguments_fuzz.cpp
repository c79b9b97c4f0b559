// `cohort run` option values from the command line and PET_ variables
// (src/cli/run_arguments.cpp): the first byte picks an option, the rest is
// its value; the only allowed refusal is InvalidArgument.
#include <string>

#include <cohort/errors.hpp>

#include "cli/run_arguments.hpp"
#include "fuzz/fuzz_target.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(run_arguments) {
  if (size == 0) return 0;
  const auto table = cli::run_option_table();
  const cli::OptionSpec& spec = table[data[0] % table.size()];
  // Options that read files or start things elsewhere are not value parsers.
  if (spec.canonical == "--hostfile" || spec.canonical == "--token-file") return 0;
  const std::string value(reinterpret_cast<const char*>(data) + 1, size - 1);
  cli::RunArguments arguments;
  arguments.set(spec.canonical, value, std::string(spec.canonical));
  const auto no_environment = [](const char*) -> const char* { return nullptr; };
  try {
    (void)cli::to_run_options(arguments, {"train.py"}, cli::HostCounts::fixed(4, 1),
                              no_environment);
    (void)cli::parse_stream_spec(value, "--tee");
  } catch (const InvalidArgument&) {
  }
  return 0;
}

}  // namespace cohort::fuzz
