// One rank's view of a group's segment, and the steps every shm collective
// is made of.
//
// Layout: a header line (the first lost rank), a closed flag per rank, one
// arrival Counter per rank, one point-to-point channel per ordered pair, then
// two sets of slots, one slot of slot_bytes() per rank in each. Collectives
// move through *rounds*: a rank writes what it shares into its slot of the
// round's set (next_slot), arrives, waits until every rank has arrived, then
// reads any rank's slot of that set (slot). A rank arrives at round k+1 only
// after it has read round k, so when a rank writes round k+2 into the same
// set again (after it saw everyone arrive at k+1) nobody still reads it: two
// sets, no other locks. Every rank of a group runs the same rounds, counted
// by its own arrivals.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "comm/backends/shm/segment.hpp"
#include "comm/backends/shm/shared_memory.hpp"
#include "comm/backends/shm/waiting.hpp"
#include "comm/kit/peers.hpp"
#include "core/fd.hpp"

namespace cohort::detail::shm_backend {

/// The collective under way: its name (for messages) and deadline.
struct Call {
  const char* what;
  std::chrono::milliseconds timeout;
  std::chrono::steady_clock::time_point deadline;
  Call(const char* name, std::chrono::milliseconds limit)
      : what(name), timeout(limit), deadline(std::chrono::steady_clock::now() + limit) {}
};

class Group {
 public:
  /// Bytes of a segment for `size` ranks with slots of `slot_bytes` and
  /// point-to-point channels of `channel_bytes`.
  static std::size_t segment_bytes(int size, std::size_t slot_bytes, std::size_t channel_bytes);

  /// `peers`: every rank's host and pid (kit/peers.hpp), for liveness
  /// checks and messages.
  Group(Segment segment, int rank, int size, Peers peers, std::size_t slot_bytes,
        std::size_t channel_bytes, WaitPolicy policy);
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  /// Marks this rank closed: its process may end without its peers taking
  /// that for a failure, unless they wait for this rank.
  ~Group();

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  /// Every rank's host and pid.
  const Peers& peers() const noexcept { return peers_; }
  std::size_t slot_bytes() const noexcept { return slot_bytes_; }

  /// This rank's slot in the set of the round it will arrive at next.
  unsigned char* next_slot() noexcept { return slot_at(rank_, (seq_ + 1) & 1); }
  /// `rank`'s slot in the set of the round this rank last arrived at.
  unsigned char* slot(int rank) noexcept { return slot_at(rank, seq_ & 1); }

  /// Ends this rank's part of the round.
  void arrive() noexcept;
  /// Waits until every rank has arrived at this rank's last round. Throws
  /// PeerLost (naming the rank) when a peer's process ends or another rank
  /// found one lost, Timeout at the call's deadline (naming who is missing).
  void wait_all(const Call& call);

  /// A message to `peer` (not this rank) through the pair's channel, in
  /// pieces of the channel's size; returns once the peer has taken all of it.
  /// From kSingleCopyMessageBytes, where single copies work, the channel
  /// carries only where the message is: the peer reads it straight from this
  /// rank's memory. A send that throws meanwhile (its deadline, a lost peer)
  /// first takes its offer back, or, when the peer has begun to read, waits
  /// for the read to end (at most Group::kWithdrawBound): the caller's buffer
  /// is its own again when it returns. Below that size, or without single
  /// copies, a send that gives up leaves what the peer has not taken in the
  /// channel: a whole message, delivered to the peer's next recv; part of one,
  /// and every later send to that peer throws Timeout.
  void send(const void* data, std::size_t bytes, int peer, int tag, const Call& call);
  static constexpr std::size_t kSingleCopyMessageBytes = std::size_t{32} << 10;
  /// The next message from `peer` with `tag`; messages with other tags that
  /// come first are kept for later receives. InvalidArgument when its size
  /// is not `bytes`.
  void recv(void* data, std::size_t bytes, int peer, int tag, const Call& call);

  /// Collective, one round: every rank's `value`, in rank order.
  std::vector<std::uint64_t> exchange(std::uint64_t value, const Call& call);

  /// Posts: a ring of kPosts entries of kPostBytes that a broadcast's root
  /// fills and every other rank empties at its own pace, outside the rounds.
  /// The root waits only when the ring has no room for its message (for
  /// whoever has not emptied an entry it would write), and the others only
  /// for the root: no call
  /// needs every rank to have run since the last, as a round does. Every
  /// rank goes through the entries in the same order, whoever posts them.
  static constexpr std::size_t kPostBytes = std::size_t{16} << 10;
  static constexpr std::uint32_t kPosts = 32;
  /// The root's part: `bytes` (at most kMaxPostBytes) into the next
  /// entries, as many as it takes (none for 0 bytes), posted together.
  static constexpr std::size_t kMaxPostBytes = kPostBytes * kPosts;
  void post(const void* data, std::size_t bytes, const Call& call);
  /// Every other rank's: the next message of `bytes`, posted by `root`,
  /// into `data` (the same `bytes` as the root's).
  void take(void* data, std::size_t bytes, int root, const Call& call);

  /// Copies `bytes` at `address` in `rank`'s memory into `to` (one copy, by
  /// the kernel: process_vm_readv; memcpy when the rank is a thread of this
  /// process). Only for memory the peer published and keeps still while the
  /// rounds say so. Throws PeerLost when the peer's process has ended (its pid
  /// may name another process by then: the pidfd is checked after the copy).
  void read_from(int rank, void* to, std::uint64_t address, std::size_t bytes, const Call& call);
  /// Copies `bytes` from `from` to `address` in `rank`'s memory, the other
  /// way (process_vm_writev). Only into memory the peer published for this
  /// rank to write, while the rounds say so. The peer's pidfd is checked
  /// before each copy: a pid names another process only after the peer
  /// ended and was reaped, and the kernel handed out every other free pid
  /// since (in turn, up to pid_max), which takes far longer than a copy.
  void write_to(int rank, std::uint64_t address, const void* from, std::size_t bytes,
                const Call& call);
  /// Between a collective's round that publishes every rank's memory and
  /// the end of its part: this rank is about to copy with its peers' memory
  /// (read_from, write_to, or in place after check_lender), and then is done.
  /// A peer that withdraws meanwhile waits for end_copies, at most
  /// kWithdrawBound.
  void begin_copies() noexcept;
  void end_copies() noexcept;
  /// Before each copy with `rank`'s published memory that does not go
  /// through read_from or write_to (shared memory, in place): throws
  /// Timeout, naming `rank`, once it withdrew.
  void check_lender(int rank, bool write, const Call& call) const;
  /// This rank leaves a call part-way (its deadline passed, a peer was lost,
  /// a copy failed) while its peers may still read or write memory it
  /// published for the call (after its own end_copies): from now on their
  /// read_from, write_to and check_lender with this rank throw Timeout
  /// instead of touching it. This waits (at most kWithdrawBound) for the
  /// peers between begin_copies and end_copies to find that out, or end,
  /// but not for a peer whose process ended. For good: a call that stopped
  /// part-way leaves the group unusable. Its memory is then the caller's
  /// again.
  void withdraw() noexcept;
  static constexpr std::chrono::seconds kWithdrawBound{1};

  /// Whether read_from and write_to work between every two ranks of the
  /// group (every rank learns the same answer: see probe_single_copy).
  bool single_copy() const noexcept { return single_copy_; }
  /// Collective, two rounds: every rank reads and writes a word of every peer, and
  /// the group agrees that single copies work only if they did everywhere.
  /// Returns the first rank that could not read or write a peer's memory, -1
  /// when none.
  int probe_single_copy(const Call& call);

  /// Memory every rank of the group maps (Communicator::allocate), which
  /// the collectives read and write in place.
  SharedMemory& memory() noexcept { return memory_; }
  const SharedMemory& memory() const noexcept { return memory_; }

  /// One direction between two ranks (its layout is group.cpp's business).
  struct Channel;

 private:
  // send from kSingleCopyMessageBytes: the message's address through the
  // channel, for the peer to read.
  void offer(const void* data, std::size_t bytes, int peer, int tag, const Call& call);
  // read_from (`write` false) and write_to.
  void copy_with(int rank, void* local, std::uint64_t address, std::size_t bytes, bool write,
                 const Call& call);
  unsigned char* slot_at(int rank, std::uint32_t set) noexcept {
    return slots_ +
           (set * static_cast<std::size_t>(size_) + static_cast<std::size_t>(rank)) * slot_bytes_;
  }
  // Whether `peer` copies with `rank`'s memory. A copier's flags are a row
  // of whole lines: the copies of different ranks set and clear no line in
  // common.
  std::atomic<std::uint8_t>& copying(int rank, int peer) noexcept {
    return copying_[static_cast<std::size_t>(peer) * copying_row_ + static_cast<std::size_t>(rank)];
  }
  Counter& arrival(int rank) noexcept { return arrivals_[rank]; }
  Counter& emptied(int rank) noexcept { return emptied_[rank]; }
  unsigned char* post_at(std::uint32_t entry) noexcept {
    return posts_ + static_cast<std::size_t>(entry % kPosts) * kPostBytes;
  }
  Channel& channel(int from, int to) noexcept;
  unsigned char* channel_data(int from, int to) noexcept {
    return channel_data_ + static_cast<std::size_t>(from * size_ + to) * channel_bytes_;
  }
  // Between sleeps while waiting on `rank` (for `awaited` to reach
  // `target`): throws when it or any peer is lost, unless `awaited` got
  // there meanwhile, or when the deadline has passed.
  void check(int rank, const Counter& awaited, std::uint32_t target, const Call& call,
             const char* doing);
  [[noreturn]] void lose(int rank, const Call& call);
  bool ended(int rank) const;

  Segment segment_;
  int rank_;
  int size_;
  Peers peers_;
  std::vector<Fd> pidfds_;  // per peer; invalid for this process
  std::size_t slot_bytes_;
  std::size_t channel_bytes_;
  WaitPolicy policy_;
  WaitState wait_state_;
  std::atomic<std::uint8_t>* closed_;      // per rank: 1 once it closed the group
  std::atomic<std::uint32_t>* withdrawn_;  // per rank: 1 once it withdrew (withdraw)
  std::atomic<std::uint8_t>* copying_;     // copying(): 1 while a peer copies with a rank
  std::size_t copying_row_;                // bytes of a copier's row: whole lines
  Counter* arrivals_;
  Channel* channels_;
  unsigned char* channel_data_;
  unsigned char* slots_;
  Counter* posted_;   // entries posted in all
  Counter* emptied_;  // per rank: the entries it is done with
  unsigned char* posts_;
  std::uint32_t seq_ = 0;         // rounds this rank has arrived at
  std::uint32_t posts_seen_ = 0;  // entries this rank has posted or taken
  bool single_copy_ = false;
  SharedMemory memory_;
  std::vector<std::uint32_t> sent_;   // per peer: chunks sent on this rank's channel to it
  std::vector<char> cut_off_;         // per peer: a send to it gave up part-way through a message
  std::vector<std::uint32_t> taken_;  // per peer: chunks taken from its channel to this rank
  std::map<std::pair<int, int>, std::deque<std::string>> early_;  // (peer, tag) -> messages
};

}  // namespace cohort::detail::shm_backend
