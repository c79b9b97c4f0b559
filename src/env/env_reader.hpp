// Typed, source-recording reads from an Environment map, shared by the
// detectors. Every error names the variable and its value.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <cohort/errors.hpp>
#include <cohort/launch_env.hpp>

namespace cohort::detail {

class EnvReader {
 public:
  explicit EnvReader(const Environment& env) : env_(env) {}

  /// The value of `name`, or nullptr when it is not set.
  const std::string* find(std::string_view name) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }

  /// The first of `names` that is set, as a string, with its name as source.
  std::optional<Sourced<std::string>> first(std::initializer_list<std::string_view> names) const;

  /// The first of `names` that is set, as a non-negative int. Throws
  /// LaunchEnvError naming the variable when its value is not one.
  std::optional<Sourced<int>> first_int(std::initializer_list<std::string_view> names) const;

  /// "NAME=value", or "NAME (unset)".
  std::string show(std::string_view name) const;

  /// `{name, value}` for an error's variable list; value "" when unset.
  LaunchEnvError::Variable variable(std::string_view name) const;

  const Environment& environment() const { return env_; }

 private:
  const Environment& env_;
};

}  // namespace cohort::detail
