// Who a Gloo transport error is about. Gloo's messages name a socket address
// ("Connection closed by peer [10.0.0.2]:41234"), often an ephemeral port no
// rank published; cohort needs a rank and a host. Every rank publishes its
// host name and pid before connecting; an error is then pinned on the one
// peer at the address's IP, or, among peers on this host, on the one whose
// process is gone.
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

  /// The rank `gloo_error` is about, or -1 when it cannot be told.
  int blame(const std::string& gloo_error) const;

  /// " (host H, pid P)" for `rank`.
  std::string describe(int rank) const;

 private:
  struct Peer {
    std::string host;
    long pid = 0;
    std::string ip;  // of its Gloo listener
  };
  bool is_gone(const Peer& peer) const;

  int rank_ = 0;
  std::string host_;
  std::vector<Peer> peers_;
};

}  // namespace cohort::detail::gloo_backend
