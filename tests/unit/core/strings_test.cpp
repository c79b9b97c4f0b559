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

TEST(RandomBytes, GivesAsManyAsAskedAndNeverTheSameTwice) {
  EXPECT_EQ(random_bytes(32).size(), 32u);
  EXPECT_NE(random_bytes(32), random_bytes(32));
  EXPECT_EQ(random_bytes(0), "");
}

TEST(RandomHex, GivesTwoHexDigitsPerByteAndNeverTheSameTwice) {
  const std::string one = random_hex(16);
  const std::string two = random_hex(16);
  EXPECT_EQ(one.size(), 32u);
  EXPECT_EQ(one.find_first_not_of("0123456789abcdef"), std::string::npos) << one;
  EXPECT_NE(one, two);
  EXPECT_EQ(random_hex(0), "");
  // Every digit turns up over enough bytes (a generator stuck on a few
  // values, or a nibble lost, would not).
  const std::string many = random_hex(4096);
  for (const char digit : std::string("0123456789abcdef"))
    EXPECT_NE(many.find(digit), std::string::npos) << digit;
}

}  // namespace
}  // namespace cohort::detail
