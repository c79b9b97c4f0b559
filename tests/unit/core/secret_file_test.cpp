// weak_secret: what a secret typed by hand looks like is refused, what is
// drawn at random is taken (it refused 1 in 600 drawn ones until
// 2026-12-03: one hex digit in more than a quarter of 32 places).
#include "core/secret_file.hpp"

#include <string>

#include <gtest/gtest.h>

#include "core/strings.hpp"

namespace cohort::detail {
namespace {

TEST(WeakSecret, WhatIsTypedByHandIsRefused) {
  for (const char* weak :
       {"a", "TopSecretJobToken0123", "0123456789abcdef0123456789abcde",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "abababababababababababababababab",
        "0123012301230123012301230123012301"}) {
    EXPECT_NE(weak_secret(weak), "") << weak;
  }
}

TEST(WeakSecret, WhatIsDrawnAtRandomIsTaken) {
  // Nine of one digit in 32: 1 in 600 random draws look like this.
  EXPECT_EQ(weak_secret("000000000123456789abcdef12345678"), "");
  EXPECT_EQ(weak_secret("q3V+8zL0xWm/2Rk9tYb4nA"), "");
  for (int i = 0; i < 20000; ++i) {
    const std::string drawn = random_hex(16);  // as cohort draws its own
    ASSERT_EQ(weak_secret(drawn), "") << drawn;
  }
}

}  // namespace
}  // namespace cohort::detail
