#include "core/strings.hpp"

#include <gtest/gtest.h>

namespace cohort::detail {
namespace {

TEST(ParseInt, AcceptsOnlyPlainDecimal) {
  EXPECT_EQ(parse_int("0"), 0);
  EXPECT_EQ(parse_int("42"), 42);
  EXPECT_EQ(parse_int("-7"), -7);
  EXPECT_EQ(parse_int("007"), 7);
  EXPECT_EQ(parse_int("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"", " 1", "1 ", "+1", "1x", "0x10", "1.0", "9223372036854775808", "-"}) {
    EXPECT_EQ(parse_int(bad), std::nullopt) << "'" << bad << "'";
  }
}

TEST(ParseByteSize, TakesBinarySuffixesAndNothingElse) {
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("4K"), 4096u);
  EXPECT_EQ(parse_byte_size("256m"), std::size_t{256} << 20);
  EXPECT_EQ(parse_byte_size("2G"), std::size_t{2} << 30);
  for (const char* wrong : {"", "K", "-1K", "1.5M", "4KB", " 4K", "4T"})
    EXPECT_FALSE(parse_byte_size(wrong)) << wrong;
  EXPECT_FALSE(parse_byte_size("9999999999999G")) << "past 2^62";
}

TEST(Cat, StreamsEveryArgument) {
  EXPECT_EQ(cat("rank ", 3, " of ", 4, '.'), "rank 3 of 4.");
}

TEST(Join, PutsTheSeparatorBetween) {
  const std::vector<std::string> parts{"a", "b", "c"};
  EXPECT_EQ(join(parts, ", "), "a, b, c");
  EXPECT_EQ(join({}, ","), "");
}

}  // namespace
}  // namespace cohort::detail
