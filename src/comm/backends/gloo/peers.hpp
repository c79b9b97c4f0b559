// Who a Gloo transport error is about. Gloo's messages name a socket address
// ("Connection closed by peer [10.0.0.2]:41234"), often an ephemeral port no
// rank published; cohort needs a rank and a host. Every rank publishes its
// host name and pid before connecting; an error is then pinned on a peer on
// this host whose process is gone, or else on the peer the error names.
#pragma once

#include <string>
#include <vector>

#include <cohort/store.hpp>

namespace cohort::detail::gloo_backend {

class Peers {
 public:
  /// Publishes this rank's host and pid in the group's store.
  static void publish(Store& store, int rank);

  /// Reads the other ranks' entries (after every rank published), with
  /// `addresses[r]`: the address this rank connected to for rank r, as Gloo
  /// prints it ("[ip]:port"; empty for itself or when unknown).
  Peers(Store& store, int rank, std::vector<std::string> addresses,
        std::chrono::milliseconds timeout);

  /// A peer on this host whose process is gone, or -1; one other than
  /// `unlikely` when there are several. A SIGKILLed process resets its
  /// connections a moment before the kernel marks it dead.
  int gone_on_this_host(int unlikely = -1) const;
  /// Whether any peer runs on this host (so that gone_on_this_host can tell).
  bool any_on_this_host() const;
  /// The peer `gloo_error` names: by its listener's address (when this rank
  /// connected to it), or by its IP when no other peer shares it; else -1.
  /// The peer that reset a connection may only be cascading someone else's
  /// failure, so this is the last resort.
  int named_in(const std::string& gloo_error) const;

  /// " (host H, pid P)" for `rank`.
  std::string describe(int rank) const;

 private:
  struct Peer {
    std::string host;
    long pid = 0;
    std::string ip;       // of its Gloo listener
    std::string address;  // "[ip]:port" of that listener
  };
  bool is_gone(const Peer& peer) const;

  int rank_ = 0;
  std::string host_;
  std::vector<Peer> peers_;
};

}  // namespace cohort::detail::gloo_backend
