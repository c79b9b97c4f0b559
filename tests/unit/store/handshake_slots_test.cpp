// src/store/handshake_slots.hpp: who gives up a slot, and how long answers
// to an address that guesses wait.
#include "store/handshake_slots.hpp"

#include <gtest/gtest.h>

namespace cohort::detail {
namespace {

using namespace std::chrono_literals;

TEST(HandshakeSlots, TheOldestSlotOfTheLargestHolderGoesFirst) {
  HandshakeSlots slots(4, 5s);
  const Deadline now = Clock::now();
  EXPECT_FALSE(slots.take(1, "10.0.0.9", now));
  EXPECT_FALSE(slots.take(2, "10.0.0.9", now + 1ms));
  EXPECT_FALSE(slots.take(3, "10.0.0.1", now + 2ms));
  EXPECT_FALSE(slots.take(4, "10.0.0.9", now + 3ms));
  // Full: a newcomer from anywhere takes the silent address's oldest slot.
  EXPECT_EQ(slots.take(5, "10.0.0.2", now + 4ms), std::optional<HandshakeSlots::Id>(1));
  slots.release(1);
  EXPECT_EQ(slots.take(6, "10.0.0.1", now + 5ms), std::optional<HandshakeSlots::Id>(2));
  slots.release(2);
  EXPECT_EQ(slots.size(), 4u);
  EXPECT_TRUE(slots.holds(3));
  // Deadlines: the handshake timeout after each was taken.
  EXPECT_EQ(slots.next_deadline(), now + 2ms + 5s);
  EXPECT_EQ(slots.expired(now + 5s + 3ms), (std::vector<HandshakeSlots::Id>{3, 4}));
}

TEST(HandshakeSlots, AnswersToAnAddressThatGuessesWaitLongerEachTime) {
  HandshakeSlots slots(0, 5s);  // 0: no cap
  const Deadline now = Clock::now();
  HandshakeSlots::Id id = 0;
  const auto attempt = [&](const std::string& address, bool proven) {
    slots.take(++id, address, now);
    const auto hold = slots.judged(id, proven, now);
    EXPECT_EQ(slots.next_deadline(), hold == 0ms ? now + 5s : now + hold) << id;
    slots.release(id);
    return hold;
  };
  EXPECT_EQ(attempt("10.0.0.9", true), 0ms);  // a client that knows the token
  EXPECT_EQ(attempt("10.0.0.9", false), 0ms);
  EXPECT_EQ(attempt("10.0.0.9", false), 0ms);  // kFreeFailures: a mistake or two
  EXPECT_EQ(attempt("10.0.0.9", false), 100ms);
  EXPECT_EQ(attempt("10.0.0.9", false), 200ms);
  // A right guess is answered no sooner than a wrong one.
  EXPECT_EQ(attempt("10.0.0.9", true), 200ms);
  for (int i = 0; i < 20; ++i)
    attempt("10.0.0.9", false);
  EXPECT_EQ(attempt("10.0.0.9", false), HandshakeSlots::kLongestHold);
  EXPECT_EQ(attempt("10.0.0.1", true), 0ms);  // other addresses are not slowed
}

}  // namespace
}  // namespace cohort::detail
