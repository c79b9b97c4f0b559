// PyTorch's TCPStore requests, byte for byte as Debian's clients send them:
// 1.13's (Debian 12) and 2.6's (Debian 13), recorded with a socket in place
// of the server.
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
  auto request = parse(set, Dialect::v1, 1 << 20, &used);
  ASSERT_TRUE(request);
  EXPECT_EQ(used, set.size());
  EXPECT_EQ(request->query, Query::set);
  EXPECT_EQ(request->keys, (std::vector<std::string>{"/ab"}));
  EXPECT_EQ(request->value, "xyz");
  // s.add('k', 5)
  request = parse(bytes({3}) + u64(2) + "/k" + u64(5), Dialect::v1, 1 << 20, &used);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->query, Query::add);
  EXPECT_EQ(request->number, 5);
  // s.wait(['a', 'bb'])
  request =
      parse(bytes({5}) + u64(2) + u64(2) + "/a" + u64(3) + "/bb", Dialect::v1, 1 << 20, &used);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->keys, (std::vector<std::string>{"/a", "/bb"}));
  // s.compare_set('k', b'e', b'd')
  request =
      parse(bytes({1}) + u64(2) + "/k" + u64(1) + "e" + u64(1) + "d", Dialect::v1, 1 << 20, &used);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->expected, "e");
  EXPECT_EQ(request->value, "d");
  // s.num_keys(), s.delete_key('k')
  EXPECT_EQ(parse(bytes({6}), Dialect::v1, 1 << 20, &used)->query, Query::num_keys);
  EXPECT_EQ(used, 1u);
  EXPECT_EQ(parse(bytes({8}) + u64(2) + "/k", Dialect::v1, 1 << 20, &used)->query,
            Query::delete_key);
}

TEST(TorchWire, PartialRequestsWaitForMoreBytes) {
  const std::string set = bytes({0}) + u64(3) + "/ab" + u64(3) + "xyz";
  for (std::size_t size = 0; size < set.size(); ++size) {
    std::size_t used = 0;
    EXPECT_FALSE(parse(set.substr(0, size), Dialect::v1, 1 << 20, &used)) << size;
  }
  // Two requests back to back: the first is taken alone.
  std::size_t used = 0;
  ASSERT_TRUE(parse(set + set, Dialect::v1, 1 << 20, &used));
  EXPECT_EQ(used, set.size());
}

// Bytes that arrive one at a time: the parser resumes where it stopped and
// reads the same request as from all the bytes at once; a list grows with
// the keys that arrived, not with the count announced.
TEST(TorchWire, APartialRequestIsResumedWhereItStopped) {
  const std::string wait = bytes({5}) + u64(3) + u64(2) + "/a" + u64(0) + u64(3) + "/bc";
  Parser parser(Dialect::v1, 1 << 20);
  std::size_t used = 0;
  for (std::size_t size = 1; size < wait.size(); ++size)
    EXPECT_FALSE(parser.next(std::string_view(wait).substr(0, size), &used)) << size;
  const auto request = parser.next(wait + "more", &used);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->keys, (std::vector<std::string>{"/a", "", "/bc"}));
  EXPECT_EQ(used, wait.size());
  // The next request starts afresh.
  const std::string pairs =
      bytes({11}) + u64(2) + u64(1) + "k" + u64(1) + "v" + u64(2) + "k2" + u64(0);
  Parser newer(Dialect::v2, 1 << 20);
  for (std::size_t size = 1; size < pairs.size(); ++size)
    EXPECT_FALSE(newer.next(std::string_view(pairs).substr(0, size), &used)) << size;
  const auto multi_set = newer.next(pairs, &used);
  ASSERT_TRUE(multi_set);
  EXPECT_EQ(multi_set->keys, (std::vector<std::string>{"k", "k2"}));
  EXPECT_EQ(multi_set->values, (std::vector<std::string>{"v", ""}));
  EXPECT_EQ(used, pairs.size());
}

TEST(TorchWire, LimitsAndUnsupportedQueries) {
  std::size_t used = 0;
  // A length over the limit is refused before anything is allocated or read.
  EXPECT_THROW(parse(bytes({0}) + u64(std::uint64_t{1} << 40), Dialect::v1, 1 << 20, &used),
               Unsupported);
  EXPECT_THROW(parse(bytes({5}) + u64(std::uint64_t{1} << 40), Dialect::v1, 1 << 20, &used),
               Unsupported);
  EXPECT_THROW(parse(bytes({7}) + u64(1) + "k", Dialect::v1, 1 << 20, &used),
               Unsupported);  // WATCH_KEY
  EXPECT_THROW(parse(bytes({42}), Dialect::v1, 1 << 20, &used), Unsupported);
  EXPECT_THROW(parse(bytes({19}), Dialect::v2, 1 << 20, &used), Unsupported);
  // MULTI_SET's count is bounded by the bytes a pair takes at least (16).
  EXPECT_THROW(parse(bytes({11}) + u64((1 << 20) / 16 + 1), Dialect::v2, 1 << 20, &used),
               Unsupported);
  try {
    parse(bytes({19}), Dialect::v2, 1 << 20, &used);
  } catch (const Unsupported& error) {
    EXPECT_NE(std::string(error.what()).find("query type 19"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("--no-agent-store"), std::string::npos);
  }
}

// PyTorch 2.6's client opens with VALIDATE and PING (its pid as the nonce),
// then numbers every query one higher than 1.13 did.
TEST(TorchWire, NewerDialect) {
  const std::string opening = bytes({0, 0xCE, 0xF7, 0x85, 0x3C, 13, 0xBC, 0x28, 0, 0});
  std::size_t used = 0;
  auto request = parse(opening, Dialect::v2, 1 << 20, &used);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->query, Query::validate);
  EXPECT_EQ(request->word, kValidateMagic);
  EXPECT_EQ(used, 5u);
  request = parse(opening.substr(used), Dialect::v2, 1 << 20, &used);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->query, Query::ping);
  EXPECT_EQ(request->word, 0x28BCu);
  EXPECT_EQ(u32_reply(0x28BC), bytes({0xBC, 0x28, 0, 0}));
  // s.set('ab', b'xyz'): 1 here, 0 in 1.13
  request = parse(bytes({1}) + u64(3) + "/ab" + u64(3) + "xyz", Dialect::v2, 1 << 20, &used);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->query, Query::set);
  // s.multi_set(['a', 'b'], ['1', '22'])
  request =
      parse(bytes({11}) + u64(2) + u64(2) + "/a" + u64(1) + "1" + u64(2) + "/b" + u64(2) + "22",
            Dialect::v2, 1 << 20, &used);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->query, Query::multi_set);
  EXPECT_EQ(request->keys, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(request->values, (std::vector<std::string>{"1", "22"}));
  // s.multi_get(['a']), s.append('a', 'x'), CANCEL_WAIT, BARRIER
  EXPECT_EQ(parse(bytes({10}) + u64(1) + u64(2) + "/a", Dialect::v2, 1 << 20, &used)->query,
            Query::multi_get);
  EXPECT_EQ(parse(bytes({9}) + u64(2) + "/a" + u64(1) + "x", Dialect::v2, 1 << 20, &used)->query,
            Query::append);
  EXPECT_EQ(parse(bytes({12}), Dialect::v2, 1 << 20, &used)->query, Query::cancel_wait);
  request = parse(bytes({18}) + u64(2) + "/b" + u64(4), Dialect::v2, 1 << 20, &used);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->query, Query::barrier);
  EXPECT_EQ(request->number, 4);
  EXPECT_EQ(name(Query::multi_get), "MULTI_GET");
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
