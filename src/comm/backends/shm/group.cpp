#include "comm/backends/shm/group.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <poll.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cohort/communicator.hpp>
#include <cohort/errors.hpp>

#include "comm/copy.hpp"
#include "core/strings.hpp"

namespace cohort::detail::shm_backend {
namespace {

constexpr std::size_t kLine = 64;

std::size_t round_up(std::size_t bytes, std::size_t to) {
  return (bytes + to - 1) / to * to;
}

// The first line of the segment: the rank some rank found lost, plus one
// (0: none; the memfd starts zeroed).
struct alignas(kLine) Header {
  std::atomic<std::int32_t> lost_plus_one{0};
};

}  // namespace

// One direction between two ranks: the sender counts the pieces it put in,
// the receiver the pieces it took out; the piece's description beside them.
struct Group::Channel {
  Counter sent;
  Counter taken;
  struct alignas(kLine) Piece {
    std::int32_t tag;
    std::uint64_t total;  // bytes of the whole message
    std::uint64_t bytes;  // of this piece
    // Not 0: the whole message is at this address in the sender's memory
    // (Group::send's single copy), and `offer` says whose it is.
    std::uint64_t address;
    std::atomic<std::uint32_t> offer;  // kOffered, kBeingRead or kTakenBack
  } piece;
};

namespace {

struct Offsets {
  std::size_t closed, withdrawn, copying, arrivals, channels, channel_data, slots, posted, emptied,
      posts, total;
};

Offsets offsets(int size, std::size_t slot_bytes, std::size_t channel_bytes) {
  const auto n = static_cast<std::size_t>(size);
  Offsets at{};
  at.closed = kLine;
  at.withdrawn = round_up(at.closed + n, kLine);
  at.copying = round_up(at.withdrawn + n * sizeof(std::atomic<std::uint32_t>), kLine);
  at.arrivals = at.copying + n * round_up(n, kLine);  // a row of whole lines per copier
  at.channels = at.arrivals + n * sizeof(Counter);
  at.channel_data = round_up(at.channels + n * n * sizeof(Group::Channel), kLine);
  at.slots = round_up(at.channel_data + n * n * channel_bytes, 4096);
  at.posted = round_up(at.slots + 2 * n * slot_bytes, kLine);
  at.emptied = at.posted + sizeof(Counter);
  at.posts = round_up(at.emptied + n * sizeof(Counter), 4096);
  at.total = at.posts + Group::kPosts * Group::kPostBytes;
  return at;
}

}  // namespace

std::size_t Group::segment_bytes(int size, std::size_t slot_bytes, std::size_t channel_bytes) {
  return offsets(size, slot_bytes, channel_bytes).total;
}

Group::Group(Segment segment, int rank, int size, Peers peers, std::size_t slot_bytes,
             std::size_t channel_bytes, WaitPolicy policy)
    : segment_(std::move(segment)),
      rank_(rank),
      size_(size),
      peers_(std::move(peers)),
      pidfds_(static_cast<std::size_t>(size)),
      slot_bytes_(slot_bytes),
      channel_bytes_(channel_bytes),
      policy_(policy),
      sent_(static_cast<std::size_t>(size), 0),
      cut_off_(static_cast<std::size_t>(size), 0),
      taken_(static_cast<std::size_t>(size), 0) {
  const Offsets at = offsets(size, slot_bytes, channel_bytes);
  closed_ = reinterpret_cast<std::atomic<std::uint8_t>*>(segment_.data() + at.closed);
  withdrawn_ = reinterpret_cast<std::atomic<std::uint32_t>*>(segment_.data() + at.withdrawn);
  copying_ = reinterpret_cast<std::atomic<std::uint8_t>*>(segment_.data() + at.copying);
  copying_row_ = round_up(static_cast<std::size_t>(size), kLine);
  arrivals_ = reinterpret_cast<Counter*>(segment_.data() + at.arrivals);
  channels_ = reinterpret_cast<Channel*>(segment_.data() + at.channels);
  channel_data_ = segment_.data() + at.channel_data;
  slots_ = segment_.data() + at.slots;
  posted_ = reinterpret_cast<Counter*>(segment_.data() + at.posted);
  emptied_ = reinterpret_cast<Counter*>(segment_.data() + at.emptied);
  posts_ = segment_.data() + at.posts;
  // A pidfd turns readable when its process ends: the way to learn at once
  // that a peer died. Ranks that are threads of this process need none.
  for (int r = 0; r < size; ++r) {
    const long pid = peers_.pid(r);
    if (pid != ::getpid() && pid > 0) {
      pidfds_[static_cast<std::size_t>(r)] =
          Fd(static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0)));
    }
  }
}

Group::~Group() {
  closed_[rank_].store(1, std::memory_order_release);
}

Group::Channel& Group::channel(int from, int to) noexcept {
  return channels_[from * size_ + to];
}

void Group::arrive() noexcept {
  advance(arrival(rank_), ++seq_);
}

void Group::wait_all(const Call& call) {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    wait_until(arrival(r), seq_, policy_, wait_state_,
               [&] { check(r, arrival(r), seq_, call, "waiting for"); });
  }
}

bool Group::ended(int rank) const {
  const Fd& pidfd = pidfds_[static_cast<std::size_t>(rank)];
  if (!pidfd.valid()) return false;
  pollfd polled{pidfd.get(), POLLIN, 0};
  return ::poll(&polled, 1, 0) > 0;
}

void Group::check(int rank, const Counter& awaited, std::uint32_t target, const Call& call,
                  const char* doing) {
  auto& header = *reinterpret_cast<Header*>(segment_.data());
  int lost = header.lost_plus_one.load(std::memory_order_acquire) - 1;
  if (lost < 0) {
    // Any peer, not only the one waited for: in a ring of sends a rank may
    // wait on a live peer that waits on the dead one. But not a peer that
    // closed the group before its process ended, unless it is the one waited
    // for: two ranks may still exchange messages after a third is done.
    for (int r = 0; r < size_ && lost < 0; ++r) {
      if (r == rank_ || (r != rank && closed_[r].load(std::memory_order_acquire) != 0)) continue;
      if (ended(r)) lost = r;
    }
    // A peer may advance the counter and end (its collective done, its
    // program over) between this rank's last look at it and the look at
    // the peers above: what it did before it ended is seen now. Then
    // nothing waited for is missing, and nobody is blamed (one rank of six
    // in 400 starts of examples/reduction.cpp on 3 nodes beside two busy
    // loops, 2026-12-06, failed a finished peer).
    if (lost >= 0 && reached(awaited.value.load(std::memory_order_acquire), target)) return;
    if (lost >= 0) {
      std::int32_t none = 0;
      header.lost_plus_one.compare_exchange_strong(none, lost + 1);  // the first finder's blame
      lost = header.lost_plus_one.load(std::memory_order_acquire) - 1;
      // Everyone asleep on any counter looks again now, not at its next tick.
      wake(*posted_);
      for (int r = 0; r < size_; ++r) {
        wake(arrival(r));
        wake(emptied(r));
        for (int to = 0; to < size_; ++to) {
          wake(channel(r, to).sent);
          wake(channel(r, to).taken);
        }
      }
    }
  }
  if (lost >= 0) lose(lost, call);
  if (std::chrono::steady_clock::now() >= call.deadline) {
    throw Timeout(cat(call.what, " on rank ", rank_, " of ", size_, " timed out after ",
                      call.timeout.count(), " ms ", doing, " rank ", rank, peers_.describe(rank),
                      "; no peer is known to have failed: one may be stuck, or slow (raise "
                      "COHORT_TIMEOUT)"));
  }
}

namespace {

// The entries a post of `bytes` fills.
std::uint32_t entries_for(std::size_t bytes) noexcept {
  return static_cast<std::uint32_t>((bytes + Group::kPostBytes - 1) / Group::kPostBytes);
}

}  // namespace

void Group::post(const void* data, std::size_t bytes, const Call& call) {
  const std::uint32_t first = posts_seen_;
  const std::uint32_t count = entries_for(bytes);
  // The entry kPosts before the last one it fills had its place: every rank
  // is done with it. (Counters wrap; the first kPosts entries find it so at
  // once.)
  const std::uint32_t done = first + count - kPosts;
  for (int r = 0; r < size_; ++r) {
    // Nearly always so while the ring has room: no wait, which would count
    // toward (and may make) wait_until's moves between CPUs.
    if (r == rank_ || reached(emptied(r).value.load(std::memory_order_acquire), done)) continue;
    wait_until(emptied(r), done, policy_, wait_state_,
               [&] { check(r, emptied(r), done, call, "waiting for a broadcast to be taken by"); });
  }
  const auto* from = static_cast<const unsigned char*>(data);
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::size_t at = std::size_t{i} * kPostBytes;
    copy_bytes(post_at(first + i), from + at, std::min(kPostBytes, bytes - at));
  }
  // One advance for the whole message: a rank that sleeps until it is
  // posted is woken once.
  posts_seen_ = first + count;
  advance(*posted_, posts_seen_);
  advance(emptied(rank_), posts_seen_);  // nothing for the root to take out
}

void Group::take(void* data, std::size_t bytes, int root, const Call& call) {
  const std::uint32_t first = posts_seen_;
  const std::uint32_t end = first + entries_for(bytes);
  wait_until(*posted_, end, policy_, wait_state_,
             [&] { check(root, *posted_, end, call, "waiting for the broadcast of"); });
  auto* into = static_cast<unsigned char*>(data);
  for (std::uint32_t entry = first; entry != end; ++entry) {
    const std::size_t at = std::size_t{entry - first} * kPostBytes;
    copy_bytes(into + at, post_at(entry), std::min(kPostBytes, bytes - at));
  }
  posts_seen_ = end;
  advance(emptied(rank_), posts_seen_);
}

void Group::lose(int rank, const Call& call) {
  throw PeerLost(cat(call.what, " on rank ", rank_, " of ", size_, ": rank ", rank,
                     peers_.describe(rank), " failed or left (its process ended)"),
                 rank);
}

namespace {

// One process_vm_readv (`write` false) or process_vm_writev of `bytes`
// between `local` here and `address` in `pid`: bytes copied, or -1 with errno.
ssize_t copy_with_process(long pid, void* local, std::uint64_t address, std::size_t bytes,
                          bool write) noexcept {
  iovec here{local, bytes};
  // An address in another process: a number here, never dereferenced.
  // NOLINTNEXTLINE(performance-no-int-to-ptr)
  iovec there{reinterpret_cast<void*>(address), bytes};
  const auto target = static_cast<pid_t>(pid);
  return write ? ::process_vm_writev(target, &here, 1, &there, 1, 0)
               : ::process_vm_readv(target, &here, 1, &there, 1, 0);
}

}  // namespace

// Dekker's handshake, with a sequentially consistent fence on each side: a
// copier sets its flags, fences, and then reads a lender's withdrawn word
// before each copy; a lender sets its withdrawn word, fences, and then reads
// the copiers' flags. So either the copier sees the lender withdrawn, or the
// lender sees the copier's flag and waits for it. One fence a call, not one
// a copy: a fence waits for every store before it (a whole piece's copy).
void Group::begin_copies() noexcept {
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) copying(r, rank_).store(1, std::memory_order_relaxed);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void Group::end_copies() noexcept {
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) copying(r, rank_).store(0, std::memory_order_release);
  }
}

void Group::check_lender(int rank, bool write, const Call& call) const {
  if (withdrawn_[rank].load(std::memory_order_relaxed) == 0) return;
  throw Timeout(cat(call.what, " on rank ", rank_, " of ", size_, ": rank ", rank,
                    peers_.describe(rank),
                    " gave up on this call part-way (its deadline passed, or it lost a peer) "
                    "while this rank was still ",
                    write ? "writing into" : "reading", " its memory"));
}

void Group::withdraw() noexcept {
  withdrawn_[rank_].store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // A peer finds the word before its next copy: one piece (the kernel's, or
  // a memcpy), a whole buffer at most. The bound is for a peer stopped
  // (SIGSTOP) meanwhile; a peer whose process ended copies nothing more.
  const auto until = std::chrono::steady_clock::now() + kWithdrawBound;
  for (int r = 0; r < size_; ++r) {
    while (r != rank_ && copying(rank_, r).load(std::memory_order_acquire) != 0 && !ended(r) &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
  }
}

void Group::copy_with(int rank, void* local, std::uint64_t address, std::size_t bytes, bool write,
                      const Call& call) {
  check_lender(rank, write, call);
  if (!pidfds_[static_cast<std::size_t>(rank)].valid()) {
    // A thread of this process: the address is this process's own.
    // NOLINTNEXTLINE(performance-no-int-to-ptr)
    auto* there = reinterpret_cast<void*>(address);
    copy_bytes(write ? there : local, write ? local : there, bytes);
    return;
  }
  auto* here = static_cast<unsigned char*>(local);
  while (bytes > 0) {
    // Before a write, not only after: a pid that no longer names the peer
    // must not be written to.
    if (write && ended(rank)) lose(rank, call);
    const ssize_t copied = copy_with_process(peers_.pid(rank), here, address, bytes, write);
    if (copied <= 0) {
      if (copied < 0 && errno == EINTR) continue;
      const int error = errno;
      if (ended(rank) || (copied < 0 && error == ESRCH)) lose(rank, call);
      throw Error(cat(call.what, " on rank ", rank_, " of ", size_, ": ",
                      write ? "writing " : "reading ", bytes,
                      write ? " bytes into rank " : " bytes of rank ", rank, peers_.describe(rank),
                      " failed: ", copied < 0 ? std::strerror(error) : "nothing copied",
                      "; COHORT_SHM_SINGLE_COPY=off copies through the segment instead"));
    }
    here += copied;
    address += static_cast<std::uint64_t>(copied);
    bytes -= static_cast<std::size_t>(copied);
  }
  // A read came from the peer only if the peer still lives.
  if (!write && ended(rank)) lose(rank, call);
}

void Group::read_from(int rank, void* to, std::uint64_t address, std::size_t bytes,
                      const Call& call) {
  copy_with(rank, to, address, bytes, false, call);
}

void Group::write_to(int rank, std::uint64_t address, const void* from, std::size_t bytes,
                     const Call& call) {
  // Only read from: process_vm_writev's local iovec is not const.
  copy_with(rank, const_cast<void*>(from), address, bytes, true, call);
}

std::vector<std::uint64_t> Group::exchange(std::uint64_t value, const Call& call) {
  std::memcpy(next_slot(), &value, sizeof value);
  arrive();
  wait_all(call);
  std::vector<std::uint64_t> values(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r)
    std::memcpy(&values[static_cast<std::size_t>(r)], slot(r), sizeof value);
  return values;
}

int Group::probe_single_copy(const Call& call) {
  static const std::uint64_t kProbe = 0x636f686f72742121;  // "cohort!!"
  // Each rank reads every peer's probe and writes its word of every peer's
  // board (a word per writer: no two write one word).
  std::vector<std::uint64_t> board(static_cast<std::size_t>(size_), kProbe);
  const std::vector<std::uint64_t> where =
      exchange(reinterpret_cast<std::uint64_t>(board.data()), call);
  bool works = true;
  for (int r = 0; r < size_ && works; ++r) {
    if (r == rank_ || !pidfds_[static_cast<std::size_t>(r)].valid()) continue;
    const std::uint64_t mine = where[static_cast<std::size_t>(r)] +
                               static_cast<std::uint64_t>(rank_) * sizeof(std::uint64_t);
    std::uint64_t word = 0;
    const auto copied = [&](bool write) {
      return copy_with_process(peers_.pid(r), &word, mine, sizeof word, write) ==
             static_cast<ssize_t>(sizeof word);
    };
    works = copied(false) && word == kProbe && copied(true);
  }
  // The board stays until every rank is done with it.
  const std::vector<std::uint64_t> worked = exchange(works ? 1 : 0, call);
  const auto failed = std::find(worked.begin(), worked.end(), 0);
  single_copy_ = failed == worked.end();
  return single_copy_ ? -1 : static_cast<int>(failed - worked.begin());
}

namespace {
// A message offered by address (Channel::Piece::offer): the receiver claims
// it before it reads, the sender takes it back if it must go first; whoever
// swaps kOffered first decides.
constexpr std::uint32_t kOffered = 0;
constexpr std::uint32_t kBeingRead = 1;
constexpr std::uint32_t kTakenBack = 2;
}  // namespace

void Group::offer(const void* data, std::size_t bytes, int peer, int tag, const Call& call) {
  Channel& out = channel(rank_, peer);
  std::uint32_t& sent = sent_[static_cast<std::size_t>(peer)];
  const auto waiting = [&] { check(peer, out.taken, sent, call, "sending to"); };
  wait_until(out.taken, sent, policy_, wait_state_, waiting);  // the channel is empty
  out.piece.tag = tag;
  out.piece.total = bytes;
  out.piece.bytes = bytes;
  out.piece.address = reinterpret_cast<std::uint64_t>(data);
  out.piece.offer.store(kOffered, std::memory_order_relaxed);
  advance(out.sent, ++sent);
  const auto done = [&] { return reached(out.taken.value.load(std::memory_order_acquire), sent); };
  try {
    // While the peer reads, it copies at memory's pace and is done soon: with
    // a core per rank, poll (and now and then yield, for another process on
    // this CPU) rather than sleep, whose wake-up costs more than the rest of
    // the copy (send_recv of 2 MiB at n = 2: 507 us a message with sleeps,
    // 383-394 us without, 2026-12-07). Until it begins, the usual wait.
    auto deadline_check = std::chrono::steady_clock::now();
    for (int polls = 0; !done(); ++polls) {
      if (!policy_.core_per_rank ||
          (out.piece.offer.load(std::memory_order_acquire) != kBeingRead &&
           polls >= policy_.spins)) {
        wait_until(out.taken, sent, policy_, wait_state_, waiting);
        break;
      }
      if (polls % 256 != 255) {
        cpu_relax();
        continue;
      }
      sched_yield();
      const auto now = std::chrono::steady_clock::now();
      if (now - deadline_check >= policy_.tick) {
        deadline_check = now;
        waiting();
      }
    }
  } catch (...) {
    std::uint32_t offered = kOffered;
    if (!out.piece.offer.compare_exchange_strong(offered, kTakenBack)) {
      // The peer is reading this rank's buffer: not the caller's until it is done.
      const auto until = std::chrono::steady_clock::now() + kWithdrawBound;
      while (!done() && !ended(peer) && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
    }
    throw;
  }
}

void Group::send(const void* data, std::size_t bytes, int peer, int tag, const Call& call) {
  if (single_copy_ && bytes >= kSingleCopyMessageBytes) return offer(data, bytes, peer, tag, call);
  Channel& out = channel(rank_, peer);
  unsigned char* buffer = channel_data(rank_, peer);
  std::uint32_t& sent = sent_[static_cast<std::size_t>(peer)];
  const auto waiting = [&] { check(peer, out.taken, sent, call, "sending to"); };
  if (cut_off_[static_cast<std::size_t>(peer)] != 0) {
    throw Timeout(cat(call.what, " on rank ", rank_, " of ", size_, " to rank ", peer,
                      peers_.describe(peer),
                      ": an earlier send to it gave up part-way through a message, and the "
                      "messages between the two are out of step; make a new communicator"));
  }
  std::size_t offset = 0;
  do {
    try {
      wait_until(out.taken, sent, policy_, wait_state_, waiting);  // the channel is empty
    } catch (...) {
      // The peer took part of the message: the rest will never come, and
      // pieces of another in their place would be taken for it.
      if (offset > 0) cut_off_[static_cast<std::size_t>(peer)] = 1;
      throw;
    }
    const std::size_t piece = std::min(channel_bytes_, bytes - offset);
    out.piece.tag = tag;
    out.piece.total = bytes;
    out.piece.bytes = piece;
    out.piece.address = 0;
    copy_bytes(buffer, static_cast<const unsigned char*>(data) + offset, piece);
    advance(out.sent, ++sent);
    offset += piece;
  } while (offset < bytes);
  wait_until(out.taken, sent, policy_, wait_state_, waiting);  // the peer has all of it
}

void Group::recv(void* data, std::size_t bytes, int peer, int tag, const Call& call) {
  const auto wrong_size = [&](std::size_t total) {
    return InvalidArgument(cat("recv from rank ", peer, " with tag ", tag, ": the message has ",
                               total, " bytes, the buffer ", bytes));
  };
  auto early = early_.find({peer, tag});
  if (early != early_.end() && !early->second.empty()) {
    const std::string message = std::move(early->second.front());
    early->second.pop_front();
    if (message.size() != bytes) throw wrong_size(message.size());
    std::memcpy(data, message.data(), bytes);
    return;
  }
  Channel& in = channel(peer, rank_);
  const unsigned char* buffer = channel_data(peer, rank_);
  std::uint32_t& taken = taken_[static_cast<std::size_t>(peer)];
  const auto waiting = [&] { check(peer, in.sent, taken + 1, call, "receiving from"); };
  for (;;) {
    wait_until(in.sent, taken + 1, policy_, wait_state_, waiting);
    const bool mine = in.piece.tag == tag;
    const std::size_t total = in.piece.total;
    const int other_tag = in.piece.tag;
    const std::uint64_t address = in.piece.address;
    std::uint32_t offered = kOffered;
    if (address != 0 &&
        !in.piece.offer.compare_exchange_strong(offered, kBeingRead, std::memory_order_acquire)) {
      advance(in.taken, ++taken);  // taken back by a send that gave up: no message
      continue;
    }
    std::string kept;  // a message for a later recv, or one of the wrong size
    unsigned char* target = static_cast<unsigned char*>(data);
    if (!mine || total != bytes) {
      kept.resize(total);
      target = reinterpret_cast<unsigned char*>(kept.data());
    }
    if (address != 0) {
      try {
        read_from(peer, target, address, total, call);
      } catch (...) {
        advance(in.taken, ++taken);  // the sender waits for this, not for a message
        throw;
      }
      advance(in.taken, ++taken);
    } else {
      for (std::size_t offset = 0;;) {
        const std::size_t piece = in.piece.bytes;
        copy_bytes(target + offset, buffer, piece);
        offset += piece;
        advance(in.taken, ++taken);
        if (offset >= total) break;
        wait_until(in.sent, taken + 1, policy_, wait_state_, waiting);
      }
    }
    if (mine && total != bytes) throw wrong_size(total);
    if (mine) return;
    early_[{peer, other_tag}].push_back(std::move(kept));
  }
}

}  // namespace cohort::detail::shm_backend
