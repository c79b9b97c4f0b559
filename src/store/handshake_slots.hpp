// The store's connections that have not proven themselves yet, and what
// each may cost. A handshake takes two round trips (well under a second);
// a peer that connects and stays silent holds a slot until the handshake
// deadline. Slots are bounded (Options::max_pending_handshakes), and a new
// connection never waits for one: when all are taken, the oldest slot of
// the address that holds the most is given up (closed). Silent peers from
// one address thus crowd out only each other, while a job's own clients,
// which finish in milliseconds, are served at once. Once an address on
// another host (a peer on this one is the job's own user) has
// failed to prove the token more than kFreeFailures times, every answer to
// a proof from it, right or wrong, is held back, longer with each failure,
// and its slot held meanwhile: guesses cost time and slots, and a quick
// answer does not tell a right guess from a wrong one.
// Pure bookkeeping: the server's one thread owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/socket.hpp"

namespace cohort::detail {

class HandshakeSlots {
 public:
  using Id = std::uint64_t;
  /// Proofs from an address with up to this many failures are answered at
  /// once; then 100 ms later, doubling with each failure to kLongestHold.
  static constexpr int kFreeFailures = 2;
  static constexpr std::chrono::milliseconds kLongestHold{5000};

  HandshakeSlots(std::size_t capacity, std::chrono::milliseconds timeout)
      : capacity_(capacity), timeout_(timeout) {}

  /// Gives connection `id`, from `address` (its host), a slot until `now`
  /// plus the handshake timeout. Returns the connection to close first,
  /// when every slot was taken.
  std::optional<Id> take(Id id, const std::string& address, Deadline now);
  /// The handshake of `id` is over (or it closed): its slot is free.
  void release(Id id);
  bool holds(Id id) const { return slots_.count(id) != 0; }

  /// `id` sent its proof (`proven`: it held): how long the answer is held
  /// back (0: answer now); the slot is then kept until `now` plus that.
  std::chrono::milliseconds judged(Id id, bool proven, Deadline now);
  /// Total failed proofs from `id`'s address so far.
  std::uint64_t failures_of(Id id) const;

  /// The soonest deadline, if any slot is taken.
  std::optional<Deadline> next_deadline() const;
  /// The connections whose deadline passed by `now` (their slots stay until
  /// released).
  std::vector<Id> expired(Deadline now) const;
  std::size_t size() const noexcept { return slots_.size(); }

 private:
  struct Slot {
    std::string address;
    Deadline taken;
    std::multimap<Deadline, Id>::iterator deadline;
  };
  Id oldest_of_the_largest_holder() const;

  std::size_t capacity_;
  std::chrono::milliseconds timeout_;
  std::unordered_map<Id, Slot> slots_;
  std::multimap<Deadline, Id> deadlines_;
  std::unordered_map<std::string, std::size_t> held_by_address_;
  std::unordered_map<std::string, std::uint64_t> failures_;  // by address
};

}  // namespace cohort::detail
