// find_lost_peer when the store is gone with rank 0, which served it: rank 0
// raised PeerLost for the rank that really died, recorded it, and left; a
// survivor that asked the store a moment before (nothing recorded yet) must
// not pin the loss on rank 0 because its process is now gone too.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "comm/kit/host_identity.hpp"
#include "comm/kit/peers.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

// A store that says nothing is recorded once and is gone after: the store of
// a rank 0 that exits between a survivor's two requests.
class StoreThatLeaves final : public Store {
 public:
  bool check(const std::vector<std::string>&) override {
    if (asked_++ == 0) return false;
    gone();
  }
  std::string compare_set(std::string_view, std::string_view, std::string_view) override { gone(); }
  void set(std::string_view, std::string_view) override { gone(); }
  std::string get(std::string_view, std::chrono::milliseconds) override { gone(); }
  std::int64_t add(std::string_view, std::int64_t) override { gone(); }
  void wait(const std::vector<std::string>&, std::chrono::milliseconds) override { gone(); }
  bool delete_key(std::string_view) override { gone(); }
  std::int64_t num_keys() override { gone(); }

 private:
  [[noreturn]] static void gone() { throw StoreError("lost the store at 127.0.0.1:1 (test)"); }
  int asked_ = 0;
};

// The pid of a process of this host that has exited and been reaped.
long ended_process() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

std::string entry(long pid) {
  return cat(this_host_name(), " ", pid);
}

TEST(FindLostPeer, NotTheStoresRankThatLeftAfterTheStoreAnswered) {
  // Rank 1 asks; ranks 0 (the store's, left after its PeerLost) and 2 (the
  // one killed) are gone; rank 3 lives.
  const Peers peers(
      1, {entry(ended_process()), entry(::getpid()), entry(ended_process()), entry(::getpid())});
  StoreThatLeaves store;
  EXPECT_EQ(find_lost_peer(store, peers, "Connection closed by peer [127.0.0.1]:1", false), 2);
}

TEST(FindLostPeer, RankZeroWhenItIsTheOnlyOneGone) {
  const Peers peers(1, {entry(ended_process()), entry(::getpid()), entry(::getpid())});
  StoreThatLeaves store;
  EXPECT_EQ(find_lost_peer(store, peers, "Connection closed by peer [127.0.0.1]:1", false), 0);
}

}  // namespace
}  // namespace cohort::detail
