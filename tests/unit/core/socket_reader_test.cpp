// core/socket_reader: a connection read ahead gives each caller exactly the
// bytes it asks for, in order, however they arrived; bytes past its window
// go straight from the socket; a peer's end is an error that says so.
#include "core/socket_reader.hpp"

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/fd.hpp"

namespace cohort::detail {
namespace {

struct Pair {
  Fd mine, peer;
};

Pair socket_pair() {
  int ends[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  return {Fd(ends[0]), Fd(ends[1])};
}

void send_text(int fd, const std::string& bytes) {
  std::string error;
  ASSERT_TRUE(
      send_all(fd, bytes.data(), bytes.size(), deadline_after(std::chrono::seconds(5)), &error))
      << error;
}

Deadline soon() {
  return deadline_after(std::chrono::seconds(5));
}

// Bytes whose every position differs from its neighbours', so that a piece
// taken out of order or twice shows.
std::string pattern(std::size_t size) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i)
    bytes[i] = static_cast<char>('a' + (i * 7 + i / 26) % 26);
  return bytes;
}

TEST(SocketReader, SmallFramesThatCameTogetherAreReadFromOneReceive) {
  Pair ends = socket_pair();
  send_text(ends.peer.get(), "headbodyHEADBODY");
  SocketReader in(ends.mine.get());
  std::string error;
  char four[4];
  ASSERT_TRUE(in.read(four, 4, soon(), &error)) << error;
  EXPECT_EQ(std::string(four, 4), "head");
  EXPECT_EQ(in.buffered(), 12u);  // the rest came with the first receive
  std::string body;
  ASSERT_TRUE(in.append_to(&body, 4, soon(), &error)) << error;
  EXPECT_EQ(body, "body");
  ASSERT_TRUE(in.skip(4, soon(), &error)) << error;
  EXPECT_EQ(in.take_buffered(100), "BODY");
  EXPECT_EQ(in.buffered(), 0u);
}

TEST(SocketReader, WaitsForTheRestOfAFrameThatCameInPieces) {
  Pair ends = socket_pair();
  SocketReader in(ends.mine.get());
  std::thread sender([&] {
    send_text(ends.peer.get(), "he");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    send_text(ends.peer.get(), "ad");
  });
  char four[4];
  std::string error;
  const bool read = in.read(four, 4, soon(), &error);
  sender.join();
  ASSERT_TRUE(read) << error;
  EXPECT_EQ(std::string(four, 4), "head");
}

TEST(SocketReader, LargePayloadsArriveWholeAndInOrder) {
  Pair ends = socket_pair();
  const std::string large = pattern(SocketReader::kReadAhead * 40 + 123);
  const std::string after = "next";
  std::thread sender([&] { send_text(ends.peer.get(), "hd" + large + large + after); });
  SocketReader in(ends.mine.get());
  std::string error;
  char two[2];
  ASSERT_TRUE(in.read(two, 2, soon(), &error)) << error;
  std::string first;
  ASSERT_TRUE(in.append_to(&first, large.size(), soon(), &error)) << error;
  std::string second(large.size(), '\0');
  ASSERT_TRUE(in.read(second.data(), second.size(), soon(), &error)) << error;
  char four[4];
  ASSERT_TRUE(in.read(four, 4, soon(), &error)) << error;
  sender.join();
  EXPECT_EQ(std::string(two, 2), "hd");
  EXPECT_TRUE(first == large);
  EXPECT_TRUE(second == large);
  EXPECT_EQ(std::string(four, 4), after);
}

TEST(SocketReader, WhatWasReadAheadIsTakenFirstThenTheSocketHasTheRest) {
  Pair ends = socket_pair();
  send_text(ends.peer.get(), "h" + pattern(100));
  SocketReader in(ends.mine.get());
  std::string error;
  char one;
  ASSERT_TRUE(in.read(&one, 1, soon(), &error)) << error;
  send_text(ends.peer.get(), "tail");
  // As a relay takes the start of a large answer before it splices the rest.
  const std::string_view ahead = in.take_buffered(1000);
  EXPECT_EQ(ahead, pattern(100));
  char rest[4];
  ASSERT_EQ(recv(ends.mine.get(), rest, sizeof(rest), 0), 4);
  EXPECT_EQ(std::string(rest, 4), "tail");
}

TEST(SocketReader, APeerThatClosedMidFrameIsAnErrorThatSaysSo) {
  Pair ends = socket_pair();
  send_text(ends.peer.get(), "ab");
  ends.peer.reset();
  SocketReader in(ends.mine.get());
  std::string error;
  char four[4];
  EXPECT_FALSE(in.read(four, 4, soon(), &error));
  EXPECT_EQ(error, "closed the connection");
}

TEST(SocketReader, NothingBeforeTheDeadlineTimesOut) {
  Pair ends = socket_pair();
  SocketReader in(ends.mine.get());
  std::string error;
  std::string out;
  EXPECT_FALSE(in.append_to(&out, 1, deadline_after(std::chrono::milliseconds(20)), &error));
  EXPECT_EQ(error, "timed out");
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace cohort::detail
