// The store's keys and waits apart from any socket (key_space.hpp): which
// waits a set completes, and when, in microseconds.
#include "store/key_space.hpp"

#include <algorithm>

#include <gtest/gtest.h>

namespace cohort::detail {
namespace {

Wait wait_for(std::vector<std::string> keys) {
  Wait wait;
  wait.keys = KeyList(keys);
  return wait;
}

// The ids whose waits hold after the sets so far.
std::vector<KeySpace::Id> resumed(KeySpace& space) {
  std::vector<KeySpace::Id> ids;
  space.resume_ready([&ids](KeySpace::Id id, const Wait&) { ids.push_back(id); });
  return ids;
}

TEST(KeySpace, AWaitHoldsOnceEveryKeyIsSetAndNotBefore) {
  KeySpace space;
  Wait wait = wait_for({"a", "b"});
  EXPECT_FALSE(space.wait(7, wait, Deadline::max()));
  EXPECT_TRUE(space.waiting(7));
  space.set("a", "1");
  EXPECT_TRUE(resumed(space).empty());
  space.set("b", "2");
  EXPECT_EQ(resumed(space), std::vector<KeySpace::Id>{7});
  EXPECT_FALSE(space.waiting(7));
  // All set already: it holds at once and nothing is kept.
  Wait again = wait_for({"a", "b"});
  EXPECT_TRUE(space.wait(8, again, Deadline::max()));
  EXPECT_EQ(again.keys.size(), 2u);
  EXPECT_FALSE(space.waiting(8));
}

TEST(KeySpace, AKeyDeletedBetweenScansIsWaitedForAgain) {
  KeySpace space;
  space.set("a", "1");
  Wait wait = wait_for({"a", "b"});
  EXPECT_FALSE(space.wait(1, wait, Deadline::max()));
  EXPECT_TRUE(space.erase("a"));
  space.set("b", "2");
  EXPECT_TRUE(resumed(space).empty()) << "'a' is gone: the keys are not all set at once";
  space.set("a", "again");
  EXPECT_EQ(resumed(space), std::vector<KeySpace::Id>{1});
}

TEST(KeySpace, ABarrierHoldsWhenTheCountReachesItsSize) {
  KeySpace space;
  std::string error;
  for (KeySpace::Id id = 1; id <= 3; ++id) {
    ASSERT_TRUE(space.add("arrived", 1, &error));
    Wait wait = wait_for({"arrived"});
    wait.at_least = 3;
    EXPECT_EQ(space.wait(id, wait, Deadline::max()), id == 3);
  }
  EXPECT_EQ(resumed(space), (std::vector<KeySpace::Id>{1, 2}));
}

TEST(KeySpace, AQueueItemWakesOneWaiterAndItsPopTakesIt) {
  KeySpace space;
  for (KeySpace::Id id = 1; id <= 2; ++id) {
    Wait wait = wait_for({"q"});
    wait.queues_count = true;
    EXPECT_FALSE(space.wait(id, wait, Deadline::max()));
  }
  space.push("q", "item");
  EXPECT_EQ(resumed(space).size(), 1u);
  std::string item;
  EXPECT_EQ(space.pop("q", &item), 1u);
  EXPECT_EQ(item, "item");
  EXPECT_EQ(space.queue_length("q"), 0u);
  EXPECT_TRUE(resumed(space).empty());
}

TEST(KeySpace, ADeadlinePassedNamesTheKeysStillMissing) {
  KeySpace space;
  const Deadline soon = Clock::now();
  Wait wait = wait_for({"a", "b", "c"});
  EXPECT_FALSE(space.wait(5, wait, soon));
  space.set("b", "x");
  EXPECT_EQ(space.next_deadline(), soon);
  std::vector<std::string> missing;
  space.expire(soon, [&](KeySpace::Id id, const std::vector<std::string>& keys) {
    EXPECT_EQ(id, 5u);
    missing = keys;
  });
  EXPECT_EQ(missing, (std::vector<std::string>{"a", "c"}));
  EXPECT_FALSE(space.waiting(5));
  EXPECT_FALSE(space.next_deadline());
}

TEST(KeySpace, ACanceledWaitIsNeverResumedAndForgettingAPrefixKeepsTheRest) {
  KeySpace space;
  Wait wait = wait_for({"torch:k"});
  EXPECT_FALSE(space.wait(9, wait, Deadline::max()));
  space.cancel(9);
  space.set("torch:k", "v");
  EXPECT_TRUE(resumed(space).empty());
  space.set("cohort:k", "v");
  space.push("torch:q", "i");
  space.forget_prefix("torch:");
  EXPECT_EQ(space.find("torch:k"), nullptr);
  EXPECT_EQ(space.queue_length("torch:q"), 0u);
  ASSERT_NE(space.find("cohort:k"), nullptr);
  EXPECT_EQ(space.size(), 1u);
}

TEST(KeySpace, AnAddThatIsNoIntegerOrOverflowsLeavesTheValue) {
  KeySpace space;
  std::string error;
  space.set("n", "x");
  EXPECT_FALSE(space.add("n", 1, &error));
  EXPECT_NE(error.find("not an integer"), std::string::npos) << error;
  space.set("n", "9223372036854775807");
  EXPECT_FALSE(space.add("n", 1, &error));
  EXPECT_EQ(*space.find("n"), "9223372036854775807");
  EXPECT_EQ(space.add("m", -4, &error), -4);
}

}  // namespace

// The copy that many answers share at once: one while any holds it and the
// key is unchanged; a change of the key (set, append, add, erase, a
// forgotten prefix) makes the next one fresh, and answers already holding
// the old one keep what they had.
TEST(KeySpace, ASharedCopyLastsWhileHeldAndTheKeyIsUnchanged) {
  KeySpace keys;
  EXPECT_EQ(keys.shared("table"), nullptr);
  keys.set("table", "v1");
  const auto first = keys.shared("table");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(keys.shared("table"), first);
  keys.append("table", "+");
  const auto second = keys.shared("table");
  EXPECT_EQ(*first, "v1");
  EXPECT_EQ(*second, "v1+");
  keys.set("n", "1");
  const auto count = keys.shared("n");
  ASSERT_TRUE(keys.add("n", 1, nullptr).has_value());
  EXPECT_EQ(*keys.shared("n"), "2");
  EXPECT_EQ(*count, "1");
  keys.erase("table");
  EXPECT_EQ(keys.shared("table"), nullptr);
  keys.set("torch:x", "t");
  const auto torch = keys.shared("torch:x");
  keys.forget_prefix("torch:");
  keys.set("torch:x", "u");
  EXPECT_EQ(*keys.shared("torch:x"), "u");
  EXPECT_EQ(*torch, "t");
}

// A value's version (GET_VERSIONED, what a relay asks with): it changes
// with every change of the key, to a number no earlier value of any key had,
// even when the bytes come back the same; reads leave it.
TEST(KeySpace, AVersionChangesWithEveryChangeOfItsKeyOnly) {
  KeySpace keys;
  EXPECT_EQ(keys.version("table"), std::nullopt);
  keys.set("table", "v1");
  const auto first = keys.version("table");
  ASSERT_TRUE(first.has_value());
  EXPECT_NE(*first, 0u);
  keys.set("other", "x");
  (void)keys.shared("table");
  EXPECT_EQ(keys.version("table"), first) << "another key's change, a read";
  std::vector<std::uint64_t> seen{*first, *keys.version("other")};
  const auto changed = [&](const char* how) {
    const auto now = keys.version("table");
    ASSERT_TRUE(now.has_value()) << how;
    EXPECT_EQ(std::count(seen.begin(), seen.end(), *now), 0) << how;
    seen.push_back(*now);
  };
  keys.set("table", "v1");
  changed("set to the same bytes");
  keys.append("table", "+");
  changed("append");
  keys.set("table", "1");
  ASSERT_TRUE(keys.add("table", 1, nullptr).has_value());
  changed("add");
  keys.erase("table");
  EXPECT_EQ(keys.version("table"), std::nullopt);
  keys.set("table", "2");
  changed("erased and set again");
}

}  // namespace cohort::detail
