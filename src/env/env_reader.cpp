#include "env/env_reader.hpp"

#include <limits>

#include "core/strings.hpp"

namespace cohort::detail {

const std::string* EnvReader::find(std::string_view name) const {
  auto it = env_.find(name);
  return it == env_.end() ? nullptr : &it->second;
}

std::optional<Sourced<std::string>> EnvReader::first(
    std::initializer_list<std::string_view> names) const {
  for (std::string_view name : names) {
    if (const std::string* value = find(name))
      return Sourced<std::string>{*value, std::string(name)};
  }
  return std::nullopt;
}

std::optional<Sourced<int>> EnvReader::first_int(
    std::initializer_list<std::string_view> names) const {
  std::optional<Sourced<std::string>> text = first(names);
  if (!text) return std::nullopt;
  std::optional<std::int64_t> number = parse_int(text->value);
  if (!number || *number < 0 || *number > std::numeric_limits<int>::max()) {
    throw LaunchEnvError(cat(text->source, "='", text->value,
                             "' is not a non-negative integer; fix or unset it "
                             "(`cohort env` shows every variable cohort reads)"),
                         {{text->source, text->value}});
  }
  return Sourced<int>{static_cast<int>(*number), text->source};
}

std::string EnvReader::show(std::string_view name) const {
  const std::string* value = find(name);
  return value ? cat(name, "=", *value) : cat(name, " (unset)");
}

LaunchEnvError::Variable EnvReader::variable(std::string_view name) const {
  const std::string* value = find(name);
  return {std::string(name), value ? *value : std::string()};
}

}  // namespace cohort::detail
