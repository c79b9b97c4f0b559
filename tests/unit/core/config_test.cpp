#include "core/config.hpp"

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include <cohort/errors.hpp>

namespace cohort::detail {
namespace {

constexpr const char* kVariable = "COHORT_CONFIG_TEST_BYTES";

TEST(BytesFromEnv, TakesSizesWithSuffixesAndFallsBackWhenUnset) {
  ::unsetenv(kVariable);
  EXPECT_EQ(bytes_from_env(kVariable, 7), 7u);
  ::setenv(kVariable, "65536", 1);
  EXPECT_EQ(bytes_from_env(kVariable, 7), 65536u);
  ::setenv(kVariable, "1M", 1);
  EXPECT_EQ(bytes_from_env(kVariable, 7), std::size_t{1} << 20);
  ::unsetenv(kVariable);
}

TEST(BytesFromEnv, NamesTheVariableAndValueItCannotRead) {
  for (const char* wrong : {"-1", "1.5M", "lots", ""}) {
    ::setenv(kVariable, wrong, 1);
    try {
      bytes_from_env(kVariable, 7);
      ADD_FAILURE() << "accepted '" << wrong << "'";
    } catch (const InvalidArgument& error) {
      EXPECT_NE(std::string(error.what()).find(std::string(kVariable) + "='" + wrong + "'"),
                std::string::npos)
          << error.what();
    }
  }
  ::unsetenv(kVariable);
}

}  // namespace
}  // namespace cohort::detail
