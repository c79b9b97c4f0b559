// cohort hostlist expand|compress|count|first EXPR...
#include <iostream>
#include <iterator>
#include <memory>

#include <CLI/CLI.hpp>

#include <cohort/errors.hpp>
#include <cohort/launch_env.hpp>

#include "cli/commands.hpp"
#include "core/strings.hpp"

namespace cohort::cli {
namespace {

struct HostlistOptions {
  std::vector<std::string> expressions;
  std::string delimiter = "\n";
};

// Every argument is a hostlist expression; "-" reads one from stdin
// (whitespace separates hosts there too, so `scontrol show hostnames` output works).
std::vector<std::string> hosts_of(const HostlistOptions& options) {
  std::vector<std::string> hosts;
  for (const std::string& expression : options.expressions) {
    std::string text = expression;
    if (expression == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
    std::vector<std::string> more = hostlist::expand(text);
    hosts.insert(hosts.end(), more.begin(), more.end());
  }
  return hosts;
}

void add_verb(CLI::App& hostlist, Runner& run, const std::string& name,
              const std::string& description, bool with_delimiter,
              const std::function<int(const HostlistOptions&)>& body) {
  auto options = std::make_shared<HostlistOptions>();
  CLI::App* verb = hostlist.add_subcommand(name, description);
  // The expressions are taken as they are, not through a CLI11 option, which
  // would read "[1-3]" (a hostlist of numeric names) as its own list syntax.
  verb->allow_extras();
  verb->footer("EXPR...: hostlist expressions, e.g. 'node[001-003,010],login'; '-' reads stdin");
  if (with_delimiter) {
    verb->add_option("-d,--delimiter", options->delimiter,
                     "printed between hosts (default: newline)");
  }
  verb->callback([&run, options, body, verb] {
    options->expressions = verb->remaining();
    if (options->expressions.empty()) throw CLI::RequiredError("EXPR");
    for (const std::string& word : options->expressions) {
      if (word.size() > 1 && word[0] == '-') throw CLI::ExtrasError({word});
    }
    run = [options, body] { return body(*options); };
  });
}

}  // namespace

void add_hostlist_command(CLI::App& app, Runner& run) {
  CLI::App* hostlist = app.add_subcommand(
      "hostlist", "Expand and compress Slurm hostlists, like scontrol show hostnames|hostlist");
  hostlist->require_subcommand(1);

  add_verb(*hostlist, run, "expand", "print every host, one per line (scontrol show hostnames)",
           true, [](const HostlistOptions& options) {
             std::vector<std::string> hosts = hosts_of(options);
             if (!hosts.empty()) std::cout << detail::join(hosts, options.delimiter) << "\n";
             return kExitOk;
           });
  add_verb(*hostlist, run, "compress", "print the shortest hostlist (scontrol show hostlist)",
           false, [](const HostlistOptions& options) {
             std::vector<std::string> hosts = hosts_of(options);
             std::cout << hostlist::compress(hosts) << "\n";
             return kExitOk;
           });
  add_verb(*hostlist, run, "count", "print the number of hosts", false,
           [](const HostlistOptions& options) {
             std::cout << hosts_of(options).size() << "\n";
             return kExitOk;
           });
  add_verb(*hostlist, run, "first", "print the first host (where rank 0 of a Slurm step runs)",
           false, [](const HostlistOptions& options) {
             std::vector<std::string> hosts = hosts_of(options);
             if (hosts.empty()) {
               throw InvalidArgument(detail::cat(
                   "hostlist '", detail::join(options.expressions, " "), "' names no host"));
             }
             std::cout << hosts.front() << "\n";
             return kExitOk;
           });
}

}  // namespace cohort::cli
