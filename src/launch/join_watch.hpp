// What an agent does about a stop signal, and about a long wait, while it
// joins its job: before its event loop turns, nothing else reads the
// signals, and the join's calls may wait for the job's store or the other
// nodes for the whole rendezvous timeout (300 s by default).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cohort/store.hpp>

#include "core/fd.hpp"

namespace cohort::detail {

/// Watches a join from a thread of its own. A stop signal (SIGTERM, SIGINT,
/// SIGHUP, SIGQUIT; blocked in every thread, as the agent's event loop
/// blocks them) ends it at once: every connection given to
/// end_on_stop() is shut down, so that a call under way there returns
/// (a StoreError), and finish() names the signal. A join that takes
/// `first_note` or longer is said (`say`, one line from what
/// waiting_for() last named), then again every `every` while it lasts.
class JoinWatch {
 public:
  using Say = std::function<void(const std::string&)>;
  /// Throws cohort::Error when its signalfd or eventfd cannot be made.
  JoinWatch(Say say, std::chrono::milliseconds patience,
            std::chrono::milliseconds first_note = std::chrono::seconds(15),
            std::chrono::milliseconds every = std::chrono::seconds(60));
  /// finish(), if not called.
  ~JoinWatch();
  JoinWatch(const JoinWatch&) = delete;
  JoinWatch& operator=(const JoinWatch&) = delete;

  /// A connection whose calls a stop signal ends (at once, when one came).
  void end_on_stop(const std::shared_ptr<StoreClient>& connection);
  /// What the join waits for now, as the subject and verb of a sentence
  /// ("node 2 of 4 waits for the job's store at n1:23456").
  void waiting_for(std::string what);
  /// Whether a stop signal came.
  bool stopped() const;
  /// Ends the watch: the stop signal that came while it watched, or 0. One
  /// that comes as it ends is raised again, for the event loop.
  int finish();

 private:
  void watch();

  Say say_;
  const std::chrono::milliseconds patience_;
  const std::chrono::milliseconds first_note_;
  const std::chrono::milliseconds every_;
  Fd signals_;
  Fd done_;
  mutable std::mutex mutex_;
  std::vector<std::weak_ptr<StoreClient>> connections_;
  std::string waiting_for_;
  int signal_ = 0;
  bool finished_ = false;
  std::thread thread_;
};

}  // namespace cohort::detail
