// PyTorch 1.13's TCPStore requests, byte for byte as Debian's torch client
// sends them (recorded with a socket in place of the server).
#include "store/torch_wire.hpp"

#include <gtest/gtest.h>

namespace cohort::detail::torch_wire {
namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int value : values)
    out.push_back(static_cast<char>(value));
  return out;
}

std::string u64(std::uint64_t value) {
  std::string out;
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  return out;
}

TEST(TorchWire, RequestsAsTheClientSendsThem) {
  // s.set('ab', b'xyz') on a store whose key prefix is "/"
  const std::string set = bytes({0}) + u64(3) + "/ab" + u64(3) + "xyz";
  std::size_t used = 0;
  auto request = parse(set, 1 << 20, &used);
  ASSERT_TRUE(request);
  EXPECT_EQ(used, set.size());
  EXPECT_EQ(request->query, Query::set);
  EXPECT_EQ(request->keys, (std::vector<std::string>{"/ab"}));
  EXPECT_EQ(request->value, "xyz");
  // s.add('k', 5)
  request = parse(bytes({3}) + u64(2) + "/k" + u64(5), 1 << 20, &used);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->query, Query::add);
  EXPECT_EQ(request->delta, 5);
  // s.wait(['a', 'bb'])
  request = parse(bytes({5}) + u64(2) + u64(2) + "/a" + u64(3) + "/bb", 1 << 20, &used);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->keys, (std::vector<std::string>{"/a", "/bb"}));
  // s.compare_set('k', b'e', b'd')
  request = parse(bytes({1}) + u64(2) + "/k" + u64(1) + "e" + u64(1) + "d", 1 << 20, &used);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->expected, "e");
  EXPECT_EQ(request->value, "d");
  // s.num_keys(), s.delete_key('k')
  EXPECT_EQ(parse(bytes({6}), 1 << 20, &used)->query, Query::num_keys);
  EXPECT_EQ(used, 1u);
  EXPECT_EQ(parse(bytes({8}) + u64(2) + "/k", 1 << 20, &used)->query, Query::delete_key);
}

TEST(TorchWire, PartialRequestsWaitForMoreBytes) {
  const std::string set = bytes({0}) + u64(3) + "/ab" + u64(3) + "xyz";
  for (std::size_t size = 0; size < set.size(); ++size) {
    std::size_t used = 0;
    EXPECT_FALSE(parse(set.substr(0, size), 1 << 20, &used)) << size;
  }
  // Two requests back to back: the first is taken alone.
  std::size_t used = 0;
  ASSERT_TRUE(parse(set + set, 1 << 20, &used));
  EXPECT_EQ(used, set.size());
}

TEST(TorchWire, LimitsAndUnsupportedQueries) {
  std::size_t used = 0;
  // A length over the limit is refused before anything is allocated or read.
  EXPECT_THROW(parse(bytes({0}) + u64(std::uint64_t{1} << 40), 1 << 20, &used), Unsupported);
  EXPECT_THROW(parse(bytes({5}) + u64(std::uint64_t{1} << 40), 1 << 20, &used), Unsupported);
  EXPECT_THROW(parse(bytes({7}) + u64(1) + "k", 1 << 20, &used), Unsupported);  // WATCH_KEY
  EXPECT_THROW(parse(bytes({42}), 1 << 20, &used), Unsupported);
}

TEST(TorchWire, NewerClientsOpenWithValidate) {
  EXPECT_TRUE(opens_like_newer_client(bytes({0, 0xCE, 0xF7, 0x85, 0x3C})));
  EXPECT_FALSE(opens_like_newer_client(bytes({0, 0xCE, 0xF7, 0x85})));  // not yet known
  EXPECT_FALSE(opens_like_newer_client(bytes({0}) + u64(3)));           // a 1.13 SET
  EXPECT_EQ(bytes_reply("ab"), u64(2) + "ab");
  EXPECT_EQ(i64_reply(-1), u64(~std::uint64_t{0}));
  EXPECT_EQ(u8_reply(kNotReady), bytes({1}));
}

}  // namespace
}  // namespace cohort::detail::torch_wire
