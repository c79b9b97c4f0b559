// JoinWatch with a real store: a stop signal ends a wait under way on a
// connection it was given, and a long join is said.
#include "launch/join_watch.hpp"

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cohort/errors.hpp>
#include <cohort/store.hpp>

namespace cohort::detail {
namespace {

using namespace std::chrono_literals;

// SIGTERM blocked in this thread (and the watch's, which inherits it) for
// the scope; one still pending at its end is taken, not delivered.
class TermBlocked {
 public:
  TermBlocked() {
    sigemptyset(&term_);
    sigaddset(&term_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term_, &saved_);
  }
  ~TermBlocked() {
    const timespec now{};
    while (sigtimedwait(&term_, nullptr, &now) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }

 private:
  sigset_t term_{};
  sigset_t saved_{};
};

TEST(JoinWatch, AStopSignalEndsAWaitUnderWayAndIsNamed) {
  const TermBlocked blocked;
  StoreServer server(StoreServer::Options{});
  StoreClient::Options options;
  options.port = server.port();
  auto connection = std::make_shared<StoreClient>(options);
  JoinWatch watch([](const std::string&) {}, 300s);
  watch.end_on_stop(connection);
  std::thread stopper([] {
    std::this_thread::sleep_for(200ms);  // only an order: the wait ends whenever it comes
    kill(getpid(), SIGTERM);
  });
  EXPECT_THROW(connection->wait({"never"}, 60s), StoreError);
  stopper.join();
  EXPECT_TRUE(watch.stopped());
  EXPECT_EQ(watch.finish(), SIGTERM);
  EXPECT_EQ(watch.finish(), SIGTERM);  // and again
  // A connection given after the signal is ended at once.
  JoinWatch later([](const std::string&) {}, 300s);
  kill(getpid(), SIGTERM);
  for (auto end = std::chrono::steady_clock::now() + 10s;
       !later.stopped() && std::chrono::steady_clock::now() < end;)
    std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(later.stopped());
  auto late = std::make_shared<StoreClient>(options);
  later.end_on_stop(late);
  EXPECT_THROW(late->set("key", "value"), StoreError);
}

TEST(JoinWatch, ALongJoinIsSaidWithWhatItWaitsFor) {
  std::mutex mutex;
  std::vector<std::string> said;
  JoinWatch watch(
      [&](const std::string& text) {
        std::lock_guard<std::mutex> lock(mutex);
        said.push_back(text);
      },
      300s, 50ms, 100ms);
  watch.waiting_for("node 1 of 2 waits for the job's store at n1:23456");
  for (auto end = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(5ms);
    std::lock_guard<std::mutex> lock(mutex);
    if (said.size() >= 2) break;
  }
  EXPECT_EQ(watch.finish(), 0);
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_GE(said.size(), 2u);
  EXPECT_EQ(said[0].rfind("cohort run: node 1 of 2 waits for the job's store at n1:23456: ", 0), 0u)
      << said[0];
  EXPECT_NE(said[0].find(" s so far, up to 300 s (--rdzv-timeout)\n"), std::string::npos)
      << said[0];
  const std::size_t count = said.size();
  std::this_thread::sleep_for(150ms);
  EXPECT_EQ(said.size(), count);  // nothing once it finished
}

}  // namespace
}  // namespace cohort::detail
