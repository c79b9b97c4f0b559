#include "cli/run_words.hpp"

#include <string_view>

namespace cohort::cli {
namespace {

using Kind = OptionSpec::Kind;

// The option one of whose names (CLI11's "-n,--nproc-per-node,...") is `name`.
const OptionSpec* spec_named(std::string_view name) {
  for (const OptionSpec& spec : run_option_table()) {
    for (std::string_view names = spec.names; !names.empty();) {
      const std::size_t comma = names.find(',');
      if (names.substr(0, comma) == name) return &spec;
      names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
    }
  }
  return nullptr;
}

// CLI11 ends a subcommand's words at "++" (a program or value of that
// name is left to it, which reads it so).
constexpr std::string_view kSubcommandEnd = "++";

bool usable_value(std::string_view value) {
  return !value.empty() && value.front() != '-' && value != kSubcommandEnd;
}

}  // namespace

std::optional<RunRequest> read_run_words(std::span<const std::string> words) {
  RunRequest request;
  std::size_t i = 0;
  for (; i < words.size(); ++i) {
    const std::string_view word = words[i];
    if (word == "--") {
      ++i;
      break;
    }
    if (word == kSubcommandEnd) return std::nullopt;
    if (word.size() < 2 || word.front() != '-') break;  // PROGRAM
    const bool long_name = word[1] == '-';
    // "--name=value", "--name"; "-nVALUE", "-n".
    const std::size_t name_end = long_name ? word.find('=') : 2;
    const OptionSpec* spec = spec_named(word.substr(0, name_end));
    if (spec == nullptr) return std::nullopt;
    const std::string canonical(spec->canonical);
    std::optional<std::string_view> attached;
    if (name_end < word.size()) attached = word.substr(long_name ? name_end + 1 : name_end);
    switch (spec->kind) {
      case Kind::flag:
        if (attached) return std::nullopt;
        request.arguments.set(canonical, std::string(spec->bare_value), canonical);
        break;
      case Kind::optional:
        if (attached && (!long_name || !usable_value(*attached))) return std::nullopt;
        request.arguments.set(canonical, std::string(attached ? *attached : spec->bare_value),
                              canonical);
        break;
      case Kind::value:
      case Kind::repeated: {
        if (!attached) {
          if (i + 1 == words.size()) return std::nullopt;
          attached = words[++i];
        }
        if (!usable_value(*attached)) return std::nullopt;
        request.arguments.set(canonical, std::string(*attached), canonical);
        break;
      }
    }
  }
  request.program.assign(words.begin() + static_cast<std::ptrdiff_t>(i), words.end());
  if (request.program.empty()) return std::nullopt;
  return request;
}

}  // namespace cohort::cli
