// Who a transport error is about, for every backend. Transports' messages
// name a socket address ("Connection closed by peer [10.0.0.2]:41234"), often
// an ephemeral port no rank published; cohort needs a rank and a host. Every
// rank publishes its host name and pid before connecting; find_lost_peer then
// pins an error on the peer recorded in the store, else on a peer on this host
// whose process is gone, else on the peer the error names (the order that
// keeps a cascade from being blamed on a survivor).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <cohort/store.hpp>

namespace cohort::detail {

class Peers {
 public:
  /// This process's entry: "<host> <pid>".
  static std::string entry();
  /// Publishes this rank's entry in the group's store.
  static void publish(Store& store, int rank);

  /// From every rank's entry, exchanged by the transport itself (no
  /// addresses: errors are pinned on dead local processes only).
  Peers(int rank, const std::vector<std::string>& entries);

  /// Reads the other ranks' entries (after every rank published), with
  /// `addresses[r]`: the address this rank connected to for rank r, as its
  /// transport prints it ("[ip]:port"; empty for itself, when unknown, or
  /// for a transport without addresses).
  Peers(Store& store, int rank, std::vector<std::string> addresses,
        std::chrono::milliseconds timeout);

  /// A peer on this host whose process is gone, or -1; one other than
  /// `unlikely` when there are several. A SIGKILLed process resets its
  /// connections a moment before the kernel marks it dead.
  int gone_on_this_host(int unlikely = -1) const;
  /// Whether any peer runs on this host (so that gone_on_this_host can tell).
  bool any_on_this_host() const;
  /// The peer `transport_error` names: by its listener's address (when this rank
  /// connected to it), or by its IP when no other peer shares it; else -1.
  /// The peer that reset a connection may only be cascading someone else's
  /// failure, so this is the last resort.
  int named_in(const std::string& transport_error) const;

  /// " (host H, pid P)" for `rank`.
  std::string describe(int rank) const;
  /// `rank`'s pid as it published it (0 when unknown).
  long pid(int rank) const;
  /// Every rank's pid, in rank order.
  std::vector<long> pids() const;

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

/// The rank a group's failure is blamed on, the same in every survivor: the
/// one recorded under "lost" in the group's store, else a peer on this host
/// whose process is gone (looking for up to 200 ms: the kernel resets a
/// SIGKILLed process's connections before it marks it dead), else the peer
/// `transport_error` names; the first rank to pin it records it. -1 when no
/// peer can be told (a timeout with nothing recorded: `timed_out`). When the
/// store is gone too (it lived in a rank that died), a dead local peer other
/// than rank 0, or the one the error names.
int find_lost_peer(Store& store, const Peers& peers, const std::string& transport_error,
                   bool timed_out);

}  // namespace cohort::detail
